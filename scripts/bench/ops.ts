#!/usr/bin/env bun
/**
 * Operations center figures (issue #19), one part per run:
 *
 *   bun scripts/bench/ops.ts [--part=limits] [--requests=4000] [--renders=40]
 *   bun scripts/bench/ops.ts --part=certs  [--certs=1000] [--servers=10] [--runs=3] [--key=ec|rsa]
 *   bun scripts/bench/ops.ts --part=backup [--mb=1024] [--connections=8] [--baseline-s=5]
 *
 * limits (the default):
 * - the Prometheus exposition with 10,000 series (the request histogram, agent and check series),
 *   rendered through the app's registry as `/metrics/prometheus` does; target <= 15 ms;
 * - what the shared limiters add at p99 to an authenticated request: the rate-limits gateway
 *   bucket in Redis, in SQLite and in PostgreSQL against the same app with the per-instance
 *   bucket, and core's platform limit in Redis, SQLite and PostgreSQL against the limit off;
 *   target <= 0.5 ms. Needs Redis at REDIS_URL (default redis://127.0.0.1:6379) and PostgreSQL
 *   at BENCH_DATABASE_URL.
 * certs: 1,000 stored probe-sourced certificates spread over loopback TLS servers (P-256 by
 * default, RSA-2048 with --key=rsa; served by a child process), then
 * `POST /api/v1/certificates/check-all` timed against a real server process; target <= 2 s.
 * backup: a SQLite store grown to `--mb` MB, signed ingestion load from this process, its p99
 * without a backup and then while `POST /api/v1/backups` runs; targets: backup <= 20 s, p99
 * during <= 2x p99 before.
 */
import { Database } from 'bun:sqlite'
import { rmSync } from 'node:fs'
import { join } from 'node:path'
import { stringify } from 'yaml'
import { createApp } from '../../core/app'
import { loadConfig } from '../../core/config'
import { createLogger } from '../../core/log'
import { plugins } from '../../plugins'
import { PG_URL, arg, freshPgDatabase, median, tempDir } from './lib'
import { certs } from './ops-certs'
import { SECRET, admin, load, server } from './ops-process'

const REDIS = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379'
const requests = Number(arg('requests', '4000'))
const renders = Number(arg('renders', '40'))

const pct = (xs: number[], p: number) =>
  [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(xs.length * p))]
const round = (ms: number) => Math.round(ms * 1000) / 1000

async function app(
  pluginSettings: Record<string, unknown>,
  opts: { databaseUrl?: string; rateLimit?: number; redis?: string } = {},
) {
  const dir = tempDir('liveops-ops-bench-')
  const rate = opts.rateLimit ?? 1_000_000_000
  const yaml = stringify({
    data_dir: dir,
    database: { url: opts.databaseUrl ?? join(dir, 'bench.sqlite') },
    auth: { jwt_secret: 'bench-jwt-secret-0001', admin_token: '' },
    admin: { email: 'admin@localhost', password: 'bench-password' },
    rate_limit: { requests_per_minute: rate, burst: rate },
    redis: { url: opts.redis ?? '' },
    log: { level: 'error' },
    telemetry: { prometheus: { enabled: true } },
    plugins: {
      games: {},
      ingest: { purge_interval_minutes: 0 },
      agents: {},
      'ops-alerts': { eval_interval_s: 0 },
      ...pluginSettings,
    },
  })
  const built = await createApp(loadConfig(yaml, plugins, {}), {
    plugins,
    log: createLogger({ level: 'error', format: 'json', sensitive_fields: [] } as never),
  })
  return {
    built,
    stop: async () => {
      await built.stop()
      rmSync(dir, { recursive: true, force: true })
    },
  }
}

// --- Prometheus text with 10,000 series -------------------------------------------------------
async function exposition() {
  const { built, stop } = await app({ 'rate-limits': {} })
  try {
    // 10,000 series of the kind a big fleet produces: per agent, per route.
    const g = built.metrics.gauge('svc_bench_agent_qps', 'bench: a per-agent gauge', [
      'agent_id',
      'game_id',
      'env',
    ])
    for (let i = 0; i < 10_000; i++)
      g.set({ agent_id: `agent-${i}`, game_id: `game-${i % 50}`, env: 'prod' }, i)
    const series = (await built.metrics.text()).split('\n').filter((l) => l && !l.startsWith('#')).length
    const times: number[] = []
    for (let i = 0; i < renders; i++) {
      const t0 = performance.now()
      const res = await built.app.handle(new Request('http://localhost/metrics/prometheus'))
      await res.text()
      times.push(performance.now() - t0)
    }
    return {
      series,
      renderMsMedian: round(median(times)),
      renderMsP99: round(pct(times, 0.99)),
      targetMs: 15,
    }
  } finally {
    await stop()
  }
}

// --- the shared limiters' cost on an authenticated request ------------------------------------
/**
 * One way of limiting: the rate-limits gateway bucket (local, Redis, or the database) or core's
 * platform limit (off, Redis, or the database: two fixed windows, one upsert of two rows).
 */
interface Variant {
  name: string
  limiter: 'gateway' | 'core'
  /** The gateway's or core's Redis URL; '' none. Undefined for the gateway: the database. */
  redis?: string
  pg?: boolean
  /** Core's limit off: the baseline of the core variants. */
  off?: boolean
}

const VARIANTS: Variant[] = [
  { name: 'gatewayLocal', limiter: 'gateway', redis: '' },
  { name: 'gatewayRedis', limiter: 'gateway', redis: REDIS },
  { name: 'gatewaySqlite', limiter: 'gateway' },
  { name: 'gatewayPostgres', limiter: 'gateway', pg: true },
  { name: 'coreOffSqlite', limiter: 'core', off: true },
  { name: 'coreRedis', limiter: 'core', redis: REDIS },
  { name: 'coreSqlite', limiter: 'core' },
  { name: 'corePostgres', limiter: 'core', pg: true },
]

async function latency(v: Variant) {
  const databaseUrl = v.pg ? await freshPgDatabase('liveops_bench_limits') : undefined
  const { built, stop } = await app(
    v.limiter === 'gateway'
      ? {
          'rate-limits': {
            rateLimit: { requestsPerMinute: 100_000_000, burstSize: 100_000_000 },
            redis: {
              ...(v.redis === undefined ? {} : { url: v.redis }),
              prefix: `liveops-bench:${crypto.randomUUID()}:`,
            },
          },
        }
      : {},
    { databaseUrl, rateLimit: v.off ? 0 : undefined, redis: v.limiter === 'core' ? v.redis : '' },
  )
  try {
    const user = await built.auth.createUser({
      email: 'bench@x.test',
      username: 'bench',
      password: 'password-123',
      roles: ['viewer'],
    })
    const token = built.auth.accessToken(user)
    const req = () =>
      new Request('http://localhost/api/v1/agents', { headers: { authorization: `Bearer ${token}` } })
    for (let i = 0; i < 500; i++) await (await built.app.handle(req())).text()
    const times: number[] = []
    for (let i = 0; i < requests; i++) {
      const t0 = performance.now()
      const res = await built.app.handle(req())
      await res.text()
      if (res.status !== 200) throw new Error(`bench request answered ${res.status}`)
      if (!v.off && !res.headers.get('x-ratelimit-remaining')) throw new Error(`${v.name}: not limited`)
      times.push(performance.now() - t0)
    }
    // Throughput: waves of 64 concurrent requests, as a loaded instance sees them.
    const wave = () =>
      Promise.all(Array.from({ length: 64 }, async () => (await built.app.handle(req())).text()))
    const t0 = performance.now()
    let done = 0
    while (performance.now() - t0 < 2000) {
      await wave()
      done += 64
    }
    const perSecond = Math.round(done / ((performance.now() - t0) / 1000))
    return { p50: pct(times, 0.5), p99: pct(times, 0.99), perSecond }
  } finally {
    await stop()
  }
}

/** A bare Redis round trip (PING) from this process: what any shared limiter must pay at least. */
async function redisRoundTrip() {
  const { RedisClient } = await import('bun')
  const r = new RedisClient(REDIS)
  await r.connect()
  const times: number[] = []
  for (let i = 0; i < requests; i++) {
    const t0 = performance.now()
    await r.send('PING', [])
    times.push(performance.now() - t0)
  }
  r.close()
  return { p50: pct(times, 0.5), p99: pct(times, 0.99) }
}

/** A bare PostgreSQL round trip (SELECT 1) from this process: what the database path must pay at least. */
async function pgRoundTrip() {
  const { default: postgres } = await import('postgres')
  const sql = postgres(PG_URL, { max: 1, onnotice: () => undefined })
  const times: number[] = []
  for (let i = 0; i < requests; i++) {
    const t0 = performance.now()
    await sql`SELECT 1`
    times.push(performance.now() - t0)
  }
  await sql.end()
  return { p50: pct(times, 0.5), p99: pct(times, 0.99) }
}

async function limits() {
  const prom = await exposition()
  const ping = await redisRoundTrip()
  const pgPing = await pgRoundTrip()
  // Alternate the variants to spread the shared machine's noise over all of them.
  const runs = new Map<string, Array<{ p50: number; p99: number; perSecond: number }>>(
    VARIANTS.map((v) => [v.name, []]),
  )
  for (let i = 0; i < 3; i++) for (const v of VARIANTS) runs.get(v.name)!.push(await latency(v))
  const med = (name: string, k: 'p50' | 'p99' | 'perSecond') => median(runs.get(name)!.map((x) => x[k]))
  const figures = Object.fromEntries(
    VARIANTS.map((v) => [
      v.name,
      {
        p50Ms: round(med(v.name, 'p50')),
        p99Ms: round(med(v.name, 'p99')),
        requestsPerSecond64: med(v.name, 'perSecond'),
      },
    ]),
  )
  const added = (name: string, base: string) => ({
    p50Ms: round(med(name, 'p50') - med(base, 'p50')),
    p99Ms: round(med(name, 'p99') - med(base, 'p99')),
  })
  console.log(
    JSON.stringify(
      {
        loadAverage: (await Bun.file('/proc/loadavg').text()).split(' ').slice(0, 3).join(' '),
        prometheus: prom,
        limiter: {
          requests,
          route:
            'GET /api/v1/agents (viewer token); latency sequential, throughput in waves of 64 for 2 s; median of 3 alternated runs',
          figures,
          // Ceilings: the gateway against its per-instance bucket, core against no limit at all.
          addedOverBaseline: {
            gatewayRedis: added('gatewayRedis', 'gatewayLocal'),
            gatewaySqlite: added('gatewaySqlite', 'gatewayLocal'),
            gatewayPostgres: added('gatewayPostgres', 'gatewayLocal'),
            coreRedis: added('coreRedis', 'coreOffSqlite'),
            coreSqlite: added('coreSqlite', 'coreOffSqlite'),
            corePostgres: added('corePostgres', 'coreOffSqlite'),
          },
          redisPingP50Ms: round(ping.p50),
          redisPingP99Ms: round(ping.p99),
          postgresPingP50Ms: round(pgPing.p50),
          postgresPingP99Ms: round(pgPing.p99),
          targetAddedP99Ms: 0.5,
        },
      },
      null,
      2,
    ),
  )
}

async function backup() {
  const mb = Number(arg('mb', '1024'))
  const connections = Number(arg('connections', '8'))
  const baselineS = Number(arg('baseline-s', '5'))
  const dir = tempDir('liveops-ops-bench-')
  const t0 = performance.now()
  // Grow the store before the server opens it: 1 MB random blobs in a table of no plugin.
  const db = new Database(join(dir, 'liveops.sqlite'), { create: true })
  db.exec('PRAGMA journal_mode = WAL')
  db.exec('CREATE TABLE bench_filler (id INTEGER PRIMARY KEY, b BLOB)')
  db.prepare(
    'WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?) INSERT INTO bench_filler (b) SELECT randomblob(1048576) FROM n',
  ).run(mb)
  db.exec('PRAGMA wal_checkpoint(TRUNCATE)')
  db.close()
  console.log(`store grown to ${mb} MB in ${Math.round(performance.now() - t0)} ms`)
  const s = await server(
    dir,
    `{ games: {}, ingest: { signing_secret: ${SECRET}, purge_interval_minutes: 0 }, backups: { schedule_interval_s: 0 } }`,
  )
  try {
    const game = await fetch(`${s.base}/api/games`, {
      method: 'POST',
      headers: admin,
      body: JSON.stringify({
        name: 'Bench Quest',
        genre: 'RPG',
        platforms: ['IOS'],
        timezone: 'UTC',
        defaultCurrency: 'USD',
      }),
    })
    const gameId = ((await game.json()) as { id: string }).id
    // Warm-up, then the baseline.
    let end = Date.now() + 1000
    await load(s.base, gameId, connections, () => Date.now() > end)
    end = Date.now() + baselineS * 1000
    const base = await load(s.base, gameId, connections, () => Date.now() > end)
    console.log(
      `ingestion without a backup: ${base.n} requests, p50 ${base.p50.toFixed(2)} ms, p99 ${base.p99.toFixed(2)} ms`,
    )

    const r = await fetch(`${s.base}/api/v1/backups`, {
      method: 'POST',
      headers: admin,
      body: '{"name":"bench"}',
    })
    const id = ((await r.json()) as { data: { id: string } }).data.id
    let record: { status: string; size?: number; startedAt?: string; completedAt?: string; error?: string } =
      { status: 'pending' }
    let done = false
    const poll = (async () => {
      while (!done) {
        await Bun.sleep(100)
        const g = await fetch(`${s.base}/api/v1/backups/${id}`, { headers: admin })
        record = ((await g.json()) as { data: typeof record }).data
        done = record.status === 'succeeded' || record.status === 'failed'
      }
    })()
    const during = await load(s.base, gameId, connections, () => done)
    await poll
    if (record.status !== 'succeeded') throw new Error(`backup ${record.status}: ${record.error}`)
    const seconds = (Date.parse(record.completedAt!) - Date.parse(record.startedAt!)) / 1000
    console.log(
      `backup of ${mb} MB: ${seconds.toFixed(1)} s (target <= 20 s), file ${Math.round((record.size ?? 0) / 1048576)} MB`,
    )
    console.log(
      `ingestion during the backup: ${during.n} requests (${during.failed} failed), p50 ${during.p50.toFixed(2)} ms, p99 ${during.p99.toFixed(2)} ms = ${(during.p99 / base.p99).toFixed(2)}x the p99 without (target <= 2x)`,
    )
  } finally {
    s.proc.kill()
    await s.proc.exited
    rmSync(dir, { recursive: true, force: true })
  }
}

const part = arg('part', 'limits')
if (part === 'limits') await limits()
else if (part === 'certs') await certs()
else if (part === 'backup') await backup()
else throw new Error(`unknown --part=${part} (limits, certs, backup)`)
process.exit(0)
