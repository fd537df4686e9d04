#!/usr/bin/env bun
/**
 * PostgreSQL against MariaDB/MySQL in ONE run (issue 39's benchmark): two liveops servers, one on
 * each engine (databases of their own, uniquely named, dropped at the end), measured in
 * alternation (PG, MariaDB, PG, MariaDB, ...) so the shared machine's drift falls on both alike.
 *
 *   bun scripts/bench/engines.ts [--rounds=3] [--seconds=15] [--connections=16]
 *                                [--read-seconds=4] [--read-connections=8] [--seed=400]
 *                                [--only=reads|ingest] [--reads=games list,experiments list]
 *                                [--profile=DIR]
 *
 * 1. Both stores get the same seed: `--seed` signed 100-event batches (30 days, 200,000 users,
 *    one batch in 100 of payments), byte for byte the same events, and the same experiments;
 *    the consumers of the event log catch up.
 * 2. Authenticated reads with the admin's JWT (a representative set: games, experiments, users,
 *    warehouse and invocation queries, the consumers' status), each path driven by wrk for
 *    `--read-seconds` at `--read-connections`, the engines alternating per path and round; with
 *    each, the liveops server's CPU per request (µs, from /proc: the part the engine's driver and
 *    its store code cost in our process) and the database server's CPU per request (µs: the
 *    processes or threads serving this side's connections, from /proc). `--reads` keeps the
 *    named ones only.
 * 3. Signed batch ingestion: `--rounds` windows of `--seconds` per engine, alternating, each
 *    followed by a wait for the consumers to catch up (so the next window, on the other
 *    server, does not share the machine with them); then acknowledged == stored is checked.
 *
 * `--only=reads` skips 3., `--only=ingest` skips 2.
 *
 * Prints one JSON line: per engine the medians, and `mysqlShareOfPg` (MariaDB's figure over
 * PostgreSQL's: events/s for ingestion, requests/s for each read and their geometric mean).
 */
import { existsSync, readdirSync } from 'node:fs'
import { join } from 'node:path'
import mysql from 'mysql2/promise'
import postgres from 'postgres'
import { freshMysqlDb } from '../../test/mysql-db'
import { startServer } from '../../test/process'
import { type EngineName, type Side, catchUp, get, seed, seedBodies } from './engines-seed'
import { shapes } from './events'
import { benchConfig, bootstrap, load, summary } from './ingest-load'
import { PG_URL, arg, cpuSeconds, median, statTicks, tempDir, wrk, wrkCpu } from './lib'

const rounds = Number(arg('rounds', '3'))
const seconds = Number(arg('seconds', '15'))
const connections = Number(arg('connections', '16'))
const readSeconds = Number(arg('read-seconds', '4'))
const readConnections = Number(arg('read-connections', '8'))
const seedBatches = Number(arg('seed', '400'))
const only = arg('only', '')
const readNames = arg('reads', '')
const profileDir = arg('profile', '')

/** A PostgreSQL database of this run alone (never a fixed name: other runs share the server). */
async function pgDatabase(): Promise<{ url: string; drop: () => Promise<void> }> {
  const name = `liveops_bench_eng_${crypto.randomUUID().replace(/-/g, '').slice(0, 12)}`
  const sql = postgres(PG_URL, { max: 1, onnotice: () => undefined })
  await sql.unsafe(`CREATE DATABASE ${name}`)
  await sql.end()
  return {
    url: PG_URL.replace(/\/[^/]*$/, `/${name}`),
    drop: async () => {
      const s = postgres(PG_URL, { max: 1, onnotice: () => undefined })
      await s.unsafe(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)
      await s.end()
    },
  }
}

async function start(engine: EngineName): Promise<Side> {
  const dir = tempDir(`liveops-bench-${engine}-`)
  const config = await benchConfig(dir, 'analytics: {}, experiments: {}')
  const env: Record<string, string> = {
    ADMIN_PASSWORD: 'bench-password',
    JWT_SECRET: 'bench-jwt-secret-0001',
  }
  let stored: () => Promise<number>
  let serving: () => Promise<string[]>
  let drop: () => Promise<void>
  if (engine === 'postgres') {
    const db = await pgDatabase()
    env.DATABASE_URL = db.url
    drop = db.drop
    stored = async () => {
      const sql = postgres(db.url, { max: 1, onnotice: () => undefined })
      const [r] = await sql`SELECT COUNT(*)::bigint AS n FROM ingest_events`
      await sql.end()
      return Number(r?.n)
    }
    const name = new URL(db.url).pathname.slice(1)
    serving = async () => {
      const sql = postgres(PG_URL, { max: 1, onnotice: () => undefined })
      const rows =
        await sql`SELECT pid FROM pg_stat_activity WHERE datname = ${name} AND pid <> pg_backend_pid()`
      await sql.end()
      return rows.map((r) => `/proc/${r.pid}/stat`)
    }
  } else {
    const db = await freshMysqlDb()
    env.DATABASE_URL = db.url
    drop = db.drop
    stored = async () => {
      const c = await mysql.createConnection({ uri: db.url })
      const [[r]] = (await c.query('SELECT COUNT(*) AS n FROM ingest_events')) as unknown as [[{ n: number }]]
      await c.end()
      return Number(r?.n)
    }
    serving = async () => {
      const c = await mysql.createConnection({ uri: db.url })
      try {
        // MariaDB names each connection's thread in its process list; MySQL in performance_schema.
        const [rows] = (await c
          .query(
            'SELECT TID AS t FROM information_schema.PROCESSLIST WHERE DB = ? AND ID <> CONNECTION_ID()',
            [db.name],
          )
          .catch(() =>
            c.query(
              'SELECT THREAD_OS_ID AS t FROM performance_schema.threads WHERE PROCESSLIST_DB = ? AND PROCESSLIST_ID <> CONNECTION_ID()',
              [db.name],
            ),
          )) as unknown as [Array<{ t: number }>]
        return threadStats(rows.map((r) => Number(r.t)))
      } finally {
        await c.end()
      }
    }
  }
  // --profile=DIR: each server writes Bun's CPU profile (markdown) into DIR/<engine> when it stops.
  const profile = profileDir ? ['--cpu-prof-md', `--cpu-prof-dir=${join(profileDir, engine)}`] : []
  const server = await startServer([process.execPath, ...profile, 'core/main.ts', '--config', config], env, {
    timeoutMs: 60_000,
  })
  const { token, gameId } = await bootstrap(server.base)
  return { engine, server, token, gameId, dir, ackedEvents: 0, retried: 0, stored, serving, drop }
}

/**
 * CPU seconds so far of the database's `/proc` entries `stats` (a PostgreSQL backend's
 * `/proc/PID/stat`, a MySQL connection thread's `/proc/PID/task/TID/stat`): the database server's
 * own cost of this side's requests, apart from whatever else it runs for other clients. One that
 * ended counts as nothing.
 */
function dbCpu(stats: readonly string[]): number {
  let sum = 0
  for (const path of stats)
    try {
      const { user, sys } = statTicks(path)
      sum += (user + sys) / 100
    } catch {}
  return sum
}

/** The `/proc/PID/task/TID/stat` of each thread `tids` (of whichever process runs it). */
function threadStats(tids: readonly number[]): string[] {
  const out: string[] = []
  const pids = readdirSync('/proc').filter((d) => /^\d+$/.test(d))
  for (const tid of tids) {
    const pid = pids.find((p) => existsSync(`/proc/${p}/task/${tid}`))
    if (pid) out.push(`/proc/${pid}/task/${tid}/stat`)
  }
  return out
}

/** The reads, named; the game's id filled in per server. */
const ALL_READS: Array<[string, (g: string) => string]> = [
  ['games list', () => '/api/games'],
  ['game', (g) => `/api/games/${g}`],
  ['experiments list', (g) => `/api/experiments?gameId=${g}`],
  ['users list', () => '/api/users'],
  ['warehouse dau 30 d', (g) => `/api/v1/analytics/warehouse/dau?gameId=${g}&env=prod&days=30`],
  ['warehouse revenue 30 d', (g) => `/api/v1/analytics/warehouse/revenue?gameId=${g}&env=prod&days=30`],
  ['invocations summary', (g) => `/api/v1/analytics/invocations/summary?gameId=${g}&env=prod&hours=720`],
  ['consumers', () => '/api/v1/analytics/consumers'],
]
const READS =
  only === 'ingest'
    ? []
    : readNames
      ? ALL_READS.filter(([name]) => readNames.split(',').includes(name))
      : ALL_READS

const round1 = (x: number) => Math.round(x * 10) / 10
const share = (a: number, b: number) => +(a / b).toFixed(2)

const sides: Side[] = []
try {
  sides.push(await start('postgres'), await start('mysql'))
  const [pg, my] = sides as [Side, Side]
  const bodies = seedBodies(seedBatches)
  for (const s of sides) await seed(s, bodies)
  console.error('seeded; reads')
  // What each side spends with no request at all (its pollers and timers), per second of CPU:
  // it takes its share of the two cores from the reads.
  const idle: Record<string, { serverCpuShare: number; dbCpuShare: number }> = {}
  for (const s of sides) {
    const stats = await s.serving()
    const [c0, d0, t0] = [cpuSeconds(s.server.proc.pid), dbCpu(stats), performance.now()]
    await Bun.sleep(5000)
    const secs = (performance.now() - t0) / 1000
    idle[s.engine] = {
      serverCpuShare: +((cpuSeconds(s.server.proc.pid) - c0) / secs).toFixed(3),
      dbCpuShare: +((dbCpu(stats) - d0) / secs).toFixed(3),
    }
  }
  for (const s of sides)
    for (const [name, path] of READS) {
      const r = await get(s, path(s.gameId))
      await r.arrayBuffer()
      if (r.status !== 200) throw new Error(`${s.engine} ${name}: ${r.status}`)
    }

  // Reads: per path, the engines alternate within each round.
  const reads: Record<
    string,
    Record<EngineName, Array<{ rps: number; p50ms: number; errors: number; cpuUs: number; dbCpuUs: number }>>
  > = {}
  for (const [name, path] of READS) {
    reads[name] = { postgres: [], mysql: [] }
    for (const s of sides)
      wrk(`${s.server.base}${path(s.gameId)}`, {
        connections: readConnections,
        seconds: 1,
        headers: { authorization: `Bearer ${s.token}` },
      })
  }
  for (let r = 0; r < rounds; r++)
    for (const [name, path] of READS)
      for (const s of r % 2 ? [...sides].reverse() : sides) {
        const ids = await s.serving()
        const db0 = dbCpu(ids)
        const w = wrkCpu(s.server.proc.pid, `${s.server.base}${path(s.gameId)}`, {
          connections: readConnections,
          seconds: readSeconds,
          headers: { authorization: `Bearer ${s.token}` },
        })
        reads[name]![s.engine].push({
          rps: w.rps,
          p50ms: w.p50ms,
          errors: w.errors,
          cpuUs: w.cpuUsPerRequest,
          dbCpuUs: ((dbCpu(ids) - db0) * 1e6) / Math.max(1, w.requests),
        })
      }

  // Ingestion: windows alternate, each followed by its consumers' catch-up.
  console.error('reads done; ingestion')
  const windows: Record<EngineName, Array<ReturnType<typeof summary> & { catchUpSeconds: number }>> = {
    postgres: [],
    mysql: [],
  }
  const pool = new Map(sides.map((s) => [s.engine, shapes(s.gameId)]))
  for (let r = 0; r < (only === 'reads' ? 0 : rounds); r++)
    for (const s of r % 2 ? [...sides].reverse() : sides) {
      // Order ids of this window only (a repeated one would be deduplicated, not stored again).
      const res = await load(
        s.server.base,
        s.gameId,
        100,
        seconds,
        connections,
        undefined,
        false,
        pool.get(s.engine),
        (r + 1) * 1e9,
      )
      s.ackedEvents += res.acked - res.ackedPayments
      windows[s.engine].push({ ...summary(res), catchUpSeconds: await catchUp(s) })
    }

  const out: Record<string, unknown> = {
    rounds,
    seconds,
    connections,
    readSeconds,
    readConnections,
    seedBatches,
    idle,
  }
  const perEngine = (e: EngineName) => {
    const w = windows[e]
    return {
      eventsPerSec: Math.round(median(w.map((x) => x.eventsPerSec))),
      p50ms: round1(median(w.map((x) => x.p50ms))),
      p99ms: round1(median(w.map((x) => x.p99ms))),
      errors: w.reduce((n, x) => n + x.errors, 0),
      windows: w.map((x) => x.eventsPerSec),
      catchUpSeconds: w.map((x) => x.catchUpSeconds),
    }
  }
  const ingest = { postgres: perEngine('postgres'), mysql: perEngine('mysql') }
  const readOut = Object.fromEntries(
    READS.map(([name]) => {
      const m = (e: EngineName) => ({
        rps: Math.round(median(reads[name]![e].map((x) => x.rps))),
        p50ms: round1(median(reads[name]![e].map((x) => x.p50ms))),
        errors: reads[name]![e].reduce((n, x) => n + x.errors, 0),
        serverCpuUsPerRequest: round1(median(reads[name]![e].map((x) => x.cpuUs))),
        dbCpuUsPerRequest: round1(median(reads[name]![e].map((x) => x.dbCpuUs))),
      })
      const [p, q] = [m('postgres'), m('mysql')]
      return [name, { postgres: p, mysql: q, mysqlShareOfPg: share(q.rps, p.rps) }]
    }),
  )
  const shares = Object.values(readOut).map((x) => x.mysqlShareOfPg)
  for (const s of sides) {
    s.server.proc.kill('SIGTERM')
    await s.server.proc.exited
  }
  const stored = { postgres: await pg.stored(), mysql: await my.stored() }
  Object.assign(out, {
    ingest:
      only === 'reads'
        ? undefined
        : { ...ingest, mysqlShareOfPg: share(ingest.mysql.eventsPerSec, ingest.postgres.eventsPerSec) },
    reads: readOut,
    readsMysqlShareOfPg: +Math.exp(shares.reduce((a, x) => a + Math.log(x), 0) / shares.length).toFixed(2),
    readsWorstShare: Math.min(...shares),
    // Acknowledged events (seed and windows; payments apart) all stored; a request cut at a
    // window's end may be stored without its answer having been counted.
    acked: { postgres: pg.ackedEvents, mysql: my.ackedEvents },
    seedRetried: { postgres: pg.retried, mysql: my.retried },
    stored,
    countCheck: stored.postgres >= pg.ackedEvents && stored.mysql >= my.ackedEvents,
  })
  console.log(JSON.stringify(out))
} catch (e) {
  for (const s of sides) console.error(`${s.engine}:`, s.server.output().slice(-3000))
  throw e
} finally {
  for (const s of sides) {
    if (s.server.proc.exitCode === null) {
      s.server.proc.kill('SIGTERM')
      await s.server.proc.exited
    }
    await s.drop()
    await Bun.$`rm -rf ${join(s.dir)}`.quiet()
  }
}
