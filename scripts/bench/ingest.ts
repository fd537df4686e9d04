#!/usr/bin/env bun
/**
 * Ingestion benchmark against a real server process (`bun core/main.ts --config <temp yaml>`),
 * load generated on the same machine (127.0.0.1 only, bounded in time).
 *
 *   bun scripts/bench/ingest.ts --mode=batch  --engine=sqlite|postgres|mysql [--seconds=60] [--connections=16]
 *   bun scripts/bench/ingest.ts --mode=single --engine=sqlite [--seconds=30] [--connections=64]
 *   bun scripts/bench/ingest.ts --mode=single-wrk --engine=sqlite [--seconds=20] [--connections=64] [--warmup=10]   (pre-signed, wrk)
 *   bun scripts/bench/ingest.ts --mode=batch-wrk --engine=sqlite [--seconds=60] [--connections=24] [--warmup=10] [--wrk-threads=1] [--times=replay|live]   (pre-signed 100-event batches, wrk)
 *   bun scripts/bench/ingest.ts --mode=badsig --engine=sqlite [--seconds=20]   (wrk)
 *   bun scripts/bench/ingest.ts --mode=kill   --engine=sqlite [--seconds=20]   (kill -9 mid-run, restart, count)
 *
 * `batch` sends signed 100-event batches whose event times replay 30 days over the run
 * (200,000 users; login, session_start, heartbeat, function.invoke, payments, others), then
 * times the warehouse queries over what it stored and checks acknowledged == stored.
 *
 * `batch-wrk` on SQLite then replays the same pre-signed requests into a bare Bun server that
 * does only the essential work (verify the HMAC, parse, one row per event into one SQLite table)
 * and prints its figures as `bare` and `liveopsShareOfCeiling` (`--ceiling=0` skips it): the
 * machine's speed drifts from hour to hour, the share much less.
 */
import { Database } from 'bun:sqlite'
import { rmSync } from 'node:fs'
import { join } from 'node:path'
import mysql from 'mysql2/promise'
import postgres from 'postgres'
import { freshMysqlDb } from '../../test/mysql-db'
import { type Running, startServer } from '../../test/process'
import { bareIngest } from './ingest-bare'
import { benchConfig, bootstrap, consumersCaughtUp, load as loadWith, summary } from './ingest-load'
import { presign, replayScript } from './ingest-presign'
import {
  type CpuResult,
  arg,
  dropPgDatabase,
  engineProcess,
  freshPgDatabase,
  median,
  okShare,
  startBare,
  tempDir,
  wrk,
  wrkCpu,
} from './lib'

const mode = arg('mode', 'batch')
const engine = arg('engine', 'sqlite')
const seconds = Number(arg('seconds', mode === 'batch' || mode === 'batch-wrk' ? '60' : '20'))
// batch-wrk: 24 connections. At 16 the persist thread waited for the next commit ~40% of the
// time; at 32 p99 rose past 50 ms with no more throughput (session 7, README).
const connections = Number(
  arg('connections', mode === 'single' || mode === 'single-wrk' ? '64' : mode === 'batch-wrk' ? '24' : '16'),
)
const batchSize = Number(arg('batch', '100'))
/** Events carry an event_id as the SDK sends them (0: none, as from clients that send none). */
const eventIds = arg('event-ids', '1') !== '0'

const dir = tempDir('liveops-ingest-bench-')
// Analytics and experiments on: their consumers of the event log keep up beside ingestion.
// --consumers=0 leaves them out, to see what ingestion alone costs.
const withConsumers = arg('consumers', '1') !== '0'
// A long run's admin token (it samples the consumers) outlives signing and run; the replay window
// is an hour for every run (ingest-load.ts).
const long = seconds + Number(arg('warmup', '10')) > 200
const config = await benchConfig(
  dir,
  withConsumers ? 'analytics: {}, experiments: {}' : '',
  '',
  long ? [`auth: { access_ttl_s: ${seconds * 4 + 3600} }`] : [],
)
const env: Record<string, string> = { ADMIN_PASSWORD: 'bench-password', JWT_SECRET: 'bench-jwt-secret-0001' }
/** The bare ceiling's own PostgreSQL database, once it ran. */
let bareUrl = ''
/** liveops' PostgreSQL pool (core/db/postgres.ts), also the bare ceiling's. */
const pgPool = 10
if (engine === 'postgres') env.DATABASE_URL = await freshPgDatabase('liveops_bench_ingest')
// MySQL/MariaDB (MYSQL_URL's server, TEST_MYSQL_URL): a database of its own, dropped at the end.
const my = engine === 'mysql' ? await freshMysqlDb() : undefined
if (my) env.DATABASE_URL = my.url
// --profile=DIR writes the server's CPU profile (markdown) there on exit.
const profile = arg('profile', '')
const profFlags = profile ? ['--cpu-prof', '--cpu-prof-md', `--cpu-prof-dir=${profile}`] : []
const start = () =>
  startServer([process.execPath, ...profFlags, 'core/main.ts', '--config', config], env, {
    timeoutMs: 60_000,
  })

async function storedEvents(): Promise<number> {
  if (my) {
    const c = await mysql.createConnection({ uri: my.url })
    const [[r]] = (await c.query('SELECT COUNT(*) AS n FROM ingest_events')) as unknown as [[{ n: number }]]
    await c.end()
    return Number(r?.n)
  }
  if (engine === 'postgres') {
    const sql = postgres(env.DATABASE_URL, { max: 1, onnotice: () => undefined })
    const [r] = await sql`SELECT COUNT(*)::bigint AS n FROM ingest_events`
    await sql.end()
    return Number(r.n)
  }
  const db = new Database(join(dir, 'liveops.sqlite'), { readonly: true })
  const n = Number((db.query('SELECT COUNT(*) AS n FROM ingest_events').get() as { n: number }).n)
  db.close()
  return n
}

async function timeQuery(
  base: string,
  token: string,
  path: string,
): Promise<{ path: string; medianMs: number; maxMs: number }> {
  const times: number[] = []
  for (let i = 0; i < 11; i++) {
    const s = performance.now()
    const r = await fetch(`${base}${path}`, { headers: { authorization: `Bearer ${token}` } })
    await r.arrayBuffer()
    if (r.status !== 200) throw new Error(`${path}: ${r.status}`)
    times.push(performance.now() - s)
  }
  return {
    path,
    medianMs: Math.round(median(times) * 10) / 10,
    maxMs: Math.round(Math.max(...times) * 10) / 10,
  }
}

/** The four warehouse reads a batch run times over what it stored. */
async function warehouseQueries(base: string, token: string, gameId: string) {
  const q = `gameId=${gameId}&env=prod`
  return [
    await timeQuery(base, token, `/api/v1/analytics/warehouse/dau?${q}&days=30`),
    await timeQuery(base, token, `/api/v1/analytics/warehouse/revenue?${q}&days=30`),
    await timeQuery(base, token, `/api/v1/analytics/warehouse/online?${q}&minutes=1440`),
    await timeQuery(base, token, `/api/v1/analytics/invocations/summary?${q}&hours=720`),
  ]
}

const load = (base: string, gameId: string, size: number, runSeconds: number, stopAt?: number) =>
  loadWith(base, gameId, size, runSeconds, connections, stopAt)

const stop = async (s: Running) => {
  s.proc.kill('SIGTERM')
  await s.proc.exited
}

let s = await start()
try {
  const { token, gameId } = await bootstrap(s.base)
  if (mode === 'batch' || mode === 'single') {
    const r = await load(s.base, gameId, mode === 'single' ? 1 : batchSize, seconds)
    const out: Record<string, unknown> = { mode, engine, seconds, connections, ...summary(r) }
    if (mode === 'batch') {
      const q = `gameId=${gameId}&env=prod`
      out.queries = await warehouseQueries(s.base, token, gameId)
      const dau = await (
        await fetch(`${s.base}/api/v1/analytics/warehouse/dau?${q}&days=30`, {
          headers: { authorization: `Bearer ${token}` },
        })
      ).json()
      out.dauSample = dau.points.slice(-3)
    }
    await stop(s)
    out.stored = await storedEvents()
    out.ackedEqualsStored = out.stored === r.acked
    console.log(JSON.stringify(out))
  } else if (mode === 'single-wrk' || mode === 'batch-wrk') {
    // Requests from wrk: each is pre-signed (unique nonce) by this process and replayed from a
    // file by a Lua script, so the generator costs little CPU. `single-wrk` sends one event per
    // request; `batch-wrk` sends --batch events per request whose times replay 30 days in order.
    // The measured window follows a warm-up under the same load (--warmup seconds, not counted in
    // the rates, counted in the count check): the JIT settles, and the store meets the 200,000
    // users once, as a live game's store already has. Without it the first ~10 s of a run
    // insert a first-seen row for nearly every event.
    const warmup = Number(arg('warmup', '10'))
    // wrk's threads, each replaying its share of the requests. One by default: wrk runs each
    // thread's `init` (here, reading the whole request file) in its main thread one after another
    // and starts each thread as soon as its own `init` is done, so with two the first thread
    // loaded the server for the ~6 s the second spent reading, wrk's reading took a core from
    // the server in those seconds, and those requests counted in a rate whose clock starts only
    // after the last thread (session 16, sampled each second from /proc). One thread drives
    // ~3,000 requests a second at 2-3% of a core.
    const wrkThreads = Number(arg('wrk-threads', '1'))
    const size = mode === 'batch-wrk' ? batchSize : 1
    const { n, files } = await presign({
      dir,
      gameId,
      size,
      seconds,
      warmup,
      eventIds,
      requests: arg('requests', ''),
      live: arg('times', 'replay') === 'live',
    })
    const scriptFor = (name: string, file: string) => replayScript(dir, name, file, wrkThreads)
    const url = `${s.base}/api/ingest/events`
    const warm = warmup
      ? wrk(url, {
          connections,
          seconds: warmup,
          threads: wrkThreads,
          script: await scriptFor('warmup', files[0]),
        })
      : undefined
    // The consumers' lag over the measured window, sampled by a process of its own (wrk blocks this one).
    const sampler = withConsumers
      ? Bun.spawn([process.execPath, join(import.meta.dir, 'lag-sampler.ts'), s.base, token], {
          stdout: 'pipe',
        })
      : undefined
    const w = wrkCpu(
      s.proc.pid,
      url,
      { connections, seconds, threads: wrkThreads, script: await scriptFor('signed', files[1]) },
      engineProcess(engine),
    )
    sampler?.kill('SIGTERM')
    const lag = sampler ? JSON.parse((await new Response(sampler.stdout).text()).trim() || '{}') : undefined
    // How long the consumers take to finish what the window left them.
    const caughtUp = withConsumers ? await consumersCaughtUp(s.base, token) : undefined
    const warmAcked = warm ? (warm.requests - warm.errors) * size : 0
    const acked = warmAcked + (w.requests - w.errors) * size
    const wrkRuns = warm ? 2 : 1
    const queries = size > 1 && withConsumers ? await warehouseQueries(s.base, token, gameId) : undefined
    await stop(s)
    const stored = await storedEvents()
    // The machine's ceiling for this job, measured after liveops in the same run: the same
    // pre-signed requests replayed into a bare Bun server (its own process) that does only the
    // essential work, verify the HMAC, parse the JSON, insert one row per event into one table
    // of the same engine (SQLite: WAL, synchronous NORMAL; PostgreSQL: the machine's server
    // defaults), one transaction per request, with none of liveops' validation, replay window,
    // deduplication, rollups or group commit.
    const bare =
      arg('ceiling', '1') !== '0'
        ? await bareIngest({
            engine,
            dir,
            pgPool,
            connections,
            seconds,
            files,
            scriptFor,
            wrkThreads,
            warmup,
            madeDb: (url) => {
              bareUrl = url
            },
          })
        : undefined
    console.log(
      JSON.stringify({
        mode,
        engine,
        connections,
        times: arg('times', 'replay'),
        // Acknowledged requests only: a 429 for a replayed nonce is fast and would inflate them.
        requestsPerSec: Math.round(w.rps * okShare(w)),
        eventsPerSec: Math.round(w.rps * okShare(w) * size),
        p50ms: w.p50ms,
        p99ms: w.p99ms,
        cpuUsPerRequest: w.cpuUsPerRequest,
        seconds,
        warmup: warm
          ? {
              seconds: warmup,
              eventsPerSec: Math.round(warm.rps * okShare(warm) * size),
              p99ms: warm.p99ms,
              non2xx: warm.errors,
            }
          : undefined,
        requests: w.requests,
        non2xx: w.errors,
        acked,
        stored,
        // wrk stops counting at its deadline (warm-up and window) with up to one request per connection in flight:
        // those are stored but never counted as acknowledged. Lost acknowledgements are the failure.
        lostAcked: Math.max(0, acked - stored),
        inFlightAtStop: stored - acked,
        countCheck: stored >= acked && stored - acked <= wrkRuns * connections * size,
        presigned: n,
        queries,
        consumers: withConsumers ? { ...lag, catchUpSeconds: caughtUp } : 'off',
        // Which thread holds the rate: the event loop, the persist thread, the checkpointer.
        threads: w.threads,
        machineIdle: w.machineIdle,
        engineUsPerRequest: w.engineUsPerRequest,
        bare: bare && {
          eventsPerSec: Math.round(bare.rps * okShare(bare) * size),
          p99ms: bare.p99ms,
          cpuUsPerRequest: bare.cpuUsPerRequest,
          engineUsPerRequest: bare.engineUsPerRequest,
          non2xx: bare.errors,
        },
        liveopsShareOfCeiling: bare && +((w.rps * okShare(w)) / (bare.rps * okShare(bare))).toFixed(2),
      }),
    )
  } else if (mode === 'badsig') {
    const body = JSON.stringify([{ event: 'x', ts: String(Date.now()), game_id: gameId, env: 'prod' }])
    const script = join(dir, 'badsig.lua')
    await Bun.write(script, `wrk.method = "POST"\nwrk.body = ${JSON.stringify(body)}\n`)
    const headers = {
      'content-type': 'application/json',
      'x-timestamp': String(Math.floor(Date.now() / 1000) + 100_000),
      'x-nonce': 'n',
      'x-signature': 'AAAA',
    }
    // A fresh timestamp but a wrong signature: rejected by the HMAC check, never parsed or stored.
    headers['x-timestamp'] = String(Math.floor(Date.now() / 1000))
    // The ceiling: a bare Bun POST route that reads the body and answers a 401 of the same size,
    // in its own process, measured in alternation with liveops (the machine is shared and noisy).
    const sample = await fetch(`${s.base}/api/ingest/events`, { method: 'POST', headers, body })
    const answer = await sample.text()
    const bare = await startBare(
      '/api/ingest/events',
      `{ POST: async (r) => { await r.arrayBuffer(); return new Response(${JSON.stringify(answer)}, { status: 401, headers: { 'content-type': 'application/json' } }) } }`,
    )
    const runs = Number(arg('runs', '3'))
    const ours: CpuResult[] = []
    const ceiling: CpuResult[] = []
    for (let i = 0; i < runs; i++) {
      ours.push(wrkCpu(s.proc.pid, `${s.base}/api/ingest/events`, { connections, seconds, headers, script }))
      ceiling.push(
        wrkCpu(bare.pid, `${bare.base}/api/ingest/events`, { connections, seconds, headers, script }),
      )
    }
    bare.stop()
    await stop(s)
    const rps = median(ours.map((w) => w.rps))
    const bareRps = median(ceiling.map((w) => w.rps))
    console.log(
      JSON.stringify({
        mode,
        engine,
        status: sample.status,
        rejectedPerSec: Math.round(rps),
        p99ms: median(ours.map((w) => w.p99ms)),
        non2xx: ours.reduce((n, w) => n + w.errors, 0),
        requests: ours.reduce((n, w) => n + w.requests, 0),
        runs: ours.map((w) => Math.round(w.rps)),
        bareBunPerSec: Math.round(bareRps),
        bareRuns: ceiling.map((w) => Math.round(w.rps)),
        liveopsShareOfCeiling: +(rps / bareRps).toFixed(2),
        // Server CPU per request (all threads, from /proc): steadier than req/s on a noisy machine.
        cpuUsPerRequest: median(ours.map((w) => w.cpuUsPerRequest)),
        bareCpuUsPerRequest: median(ceiling.map((w) => w.cpuUsPerRequest)),
        stored: await storedEvents(),
      }),
    )
  } else if (mode === 'kill') {
    const killAt = performance.now() + (seconds / 2) * 1000
    const running = load(s.base, gameId, batchSize, seconds, killAt + 50)
    await Bun.sleep(killAt - performance.now())
    s.proc.kill('SIGKILL')
    const r = await running
    await s.proc.exited
    s = await start()
    await stop(s)
    const stored = await storedEvents()
    console.log(
      JSON.stringify({
        mode,
        engine,
        acked: r.acked,
        stored,
        lostAcked: Math.max(0, r.acked - stored),
        storedButUnacked: Math.max(0, stored - r.acked),
        failedRequests: r.errors,
      }),
    )
  }
} catch (e) {
  // What the server said last, to see why.
  console.error(s.output().slice(-4000))
  throw e
} finally {
  if (s.proc.exitCode === null) await stop(s)
  // The stores of a long run take gigabytes: removed unless --keep.
  if (arg('keep', '') === '') {
    rmSync(dir, { recursive: true, force: true })
    await my?.drop()
    if (engine === 'postgres') {
      await dropPgDatabase(env.DATABASE_URL)
      if (bareUrl) await dropPgDatabase(bareUrl)
    }
  }
}
