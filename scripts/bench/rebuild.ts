#!/usr/bin/env bun
/**
 * Rebuild from the log (issue 35 point 5): how long the event log's consumers take to derive
 * every result from N stored events, with ingestion open.
 *
 *   bun scripts/bench/rebuild.ts --engine=sqlite|postgres [--events=10000000] [--users=200000]
 *
 * The raw events are written straight into `ingest_events` by one SQL statement (30 days, a mix
 * of session_start, login, heartbeat, level and custom events, one payment in 200), numbered as
 * commits of 1,000 rows. Then a server process starts with analytics and experiments: their four
 * consumers (analytics, behavior, realtime, exposures) are new, so they take in the whole log, as
 * a rebuild does after its reset. The time is from the start until every consumer's lag is 0,
 * sampled through `GET /api/v1/analytics/consumers`; then `POST .../analytics/rebuild` rebuilds
 * the largest consumer once more, timed alone.
 */
import { Database } from 'bun:sqlite'
import { join } from 'node:path'
import postgres from 'postgres'
import { startServer } from '../../test/process'
import { bootstrap } from './ingest-load'
import { arg, dropPgDatabase, freshPgDatabase, tempDir } from './lib'

const engine = arg('engine', 'sqlite')
const N = Number(arg('events', '10000000'))
const users = Number(arg('users', '200000'))
const DAY = 86_400_000
/** How often the bench asks how far the consumers are (the times are good to this much). */
const POLL_MS = Number(arg('poll-ms', '2000'))
const dir = tempDir('liveops-rebuild-bench-')
const config = join(dir, 'liveops.yaml')
await Bun.write(
  config,
  `data_dir: ${dir}
rate_limit: { requests_per_minute: 0, burst: 0 }
plugins: { games: {}, ingest: { purge_interval_minutes: 0 }, analytics: {}, experiments: {} }
`,
)
const env: Record<string, string> = {
  ADMIN_PASSWORD: 'bench-password',
  JWT_SECRET: 'bench-jwt-secret-0001',
  INGEST_SIGNING_SECRET: 's',
}
if (engine === 'postgres') env.DATABASE_URL = await freshPgDatabase('liveops_bench_rebuild')

// A first start migrates the store and makes the game; the events go in while it is down.
let s = await startServer([process.execPath, 'core/main.ts', '--config', config], env, { timeoutMs: 60_000 })
const { gameId } = await bootstrap(s.base)
s.proc.kill('SIGTERM')
await s.proc.exited

const start = Date.now() - 30 * DAY
const t0 = performance.now()
// Row i: user i % users, time spread over 30 days, one commit (seq) per 1,000 rows.
const select = (
  series: string,
  mod: (a: string, b: number) => string,
  div: (a: string, b: number) => string,
) => `
  SELECT ${start} * 1024 + i, 1 + ${div('i', 1000)}, ${start} + ${div(`i * ${30 * DAY}`, N)}, '${gameId}', 'prod',
    CASE ${mod('i', 10)} WHEN 0 THEN 'session_start' WHEN 1 THEN 'login' WHEN 2 THEN 'level_start'
      WHEN 3 THEN 'level_complete' WHEN 4 THEN 'heartbeat' ELSE 'custom_' || ${mod('i', 20)} END,
    ${start} + ${div(`i * ${30 * DAY}`, N)}, 'u' || ${mod('i * 7919', users)},
    CASE WHEN ${mod('i', 200)} = 199 THEN 499 ELSE NULL END,
    CASE WHEN ${mod('i', 200)} = 199 THEN 'success' ELSE NULL END,
    CASE WHEN ${mod('i', 10)} IN (2, 3) THEN '{"level":"' || ${mod('i', 30)} || '"}'
      WHEN ${mod('i', 200)} = 199 THEN '{"order_id":"o' || i || '","status":"success"}' ELSE '{}' END
  FROM ${series}`
const cols = 'id, seq, received_at, game_id, env, event, ts, user_id, amount_cents, payment_status, props'
if (engine === 'postgres') {
  const sql = postgres(env.DATABASE_URL, { max: 1, onnotice: () => undefined })
  await sql.unsafe(
    `INSERT INTO ingest_events (${cols}) ${select(
      `generate_series(0::bigint, ${N - 1}) AS i`,
      (a, b) => `((${a}) % ${b})`,
      (a, b) => `((${a}) / ${b})`,
    )}`,
  )
  await sql.unsafe('ANALYZE ingest_events')
  await sql.end()
} else {
  const db = new Database(join(dir, 'liveops.sqlite'))
  db.exec('PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL')
  db.exec(
    `WITH RECURSIVE c(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM c WHERE i < ${N - 1})
     INSERT INTO ingest_events (${cols}) ${select(
       'c',
       (a, b) => `((${a}) % ${b})`,
       (a, b) => `((${a}) / ${b})`,
     )}`,
  )
  db.exec(
    'UPDATE ingest_log_head SET seq = (SELECT MAX(seq) FROM ingest_events); PRAGMA wal_checkpoint(TRUNCATE)',
  )
  db.close()
}
const loadSeconds = (performance.now() - t0) / 1000

/** The admin's token, renewed when it expires. */
const session = { token: '' }
const consumers = async (base: string) => {
  const r = await fetch(`${base}/api/v1/analytics/consumers`, {
    headers: { authorization: `Bearer ${session.token}` },
  }).catch((e) => {
    if (s.proc.exitCode !== null)
      throw new Error(`${e}; server exit ${s.proc.exitCode}, its last output:\n${s.output().slice(-3000)}`)
    // Alive but slow to answer (a loaded machine: Bun.serve's 10 s idle timeout): asked again.
    console.error(`consumers: ${e}`)
    return undefined
  })
  if (!r) return []
  // A run longer than the token's 900 s: logged in again.
  if (r.status === 401) {
    session.token = await login(base)
    return []
  }
  const body = await r.json()
  // A loaded machine may answer 503 now and then (the store busy): said, and asked again.
  if (!r.ok || !Array.isArray(body.items)) {
    console.error(`consumers answered ${r.status}: ${JSON.stringify(body).slice(0, 300)}`)
    await Bun.sleep(1000)
    return []
  }
  return body.items as Array<{
    name: string
    lagEvents: number
    rebuilding: boolean
    delivered: number
  }>
}
const login = async (base: string) => {
  const r = await fetch(`${base}/api/auth/login`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ email: 'admin@localhost', password: 'bench-password' }),
  })
  const body = await r.json()
  if (!body.token) throw new Error(`login answered ${r.status}: ${JSON.stringify(body).slice(0, 300)}`)
  return body.token as string
}
/** Seconds until every consumer (or `name`) is done; the time each finished, from `since`. */
const until = async (base: string, since: number, name?: string) => {
  const done = new Map<string, number>()
  for (;;) {
    for (const c of await consumers(base))
      if ((!name || c.name === name) && c.lagEvents === 0 && !c.rebuilding && !done.has(c.name))
        done.set(c.name, Math.round((performance.now() - since) / 100) / 10)
    if (done.size === (name ? 1 : 4)) return Object.fromEntries(done)
    // Each poll has the server count every consumer's backlog (up to 100,000 rows each): at
    // 500 ms that count was PostgreSQL's busiest statement of a rebuild (pg-activity.ts).
    await Bun.sleep(POLL_MS)
  }
}

/** CPU seconds (user + system) a process has used so far, from /proc (Linux); 0 elsewhere. */
const cpuOf = async (pid: number) => {
  const stat = await Bun.file(`/proc/${pid}/stat`)
    .text()
    .catch(() => '')
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
  return f.length > 13 ? (Number(f[11]) + Number(f[12])) / 100 : 0
}
/**
 * CPU seconds of the server process and of the PostgreSQL backends serving its database (the
 * machine is shared: CPU time says more than wall time). Backends that ended are not counted.
 */
const cpu = async () => {
  const server = await cpuOf(s.proc.pid)
  if (engine !== 'postgres') return { server, pg: 0 }
  const sql = postgres(env.DATABASE_URL, { max: 1, onnotice: () => undefined })
  const pids = await sql<{ pid: number }[]>`
    SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()`
  await sql.end()
  let pg = 0
  for (const { pid } of pids) pg += await cpuOf(pid)
  return { server, pg }
}
const round = (c: { server: number; pg: number }) => ({
  server: Math.round(c.server * 10) / 10,
  pg: Math.round(c.pg * 10) / 10,
})

/** `--profile-dir=DIR`: the measured server writes Bun's CPU profile (also as markdown) there on exit. */
const profileDir = arg('profile-dir', '')
const profile = profileDir ? ['--cpu-prof', '--cpu-prof-md', `--cpu-prof-dir=${profileDir}`] : []
const t1 = performance.now()
s = await startServer([process.execPath, ...profile, 'core/main.ts', '--config', config], env, {
  timeoutMs: 120_000,
})
const running = s
// Should the server end early, its last output says why.
void running.proc.exited.then((code) => {
  if (code !== 0 && code !== 143 && code !== null)
    console.error(`server exited ${code}:\n${running.output().slice(-3000)}`)
})
session.token = await login(s.base)
const all = await until(s.base, t1)
const cpu1 = await cpu()
const t2 = performance.now()
const r = await fetch(`${s.base}/api/v1/analytics/consumers/analytics/rebuild`, {
  method: 'POST',
  headers: { authorization: `Bearer ${session.token}`, 'content-type': 'application/json' },
  body: '{}',
})
if (r.status !== 202) throw new Error(`rebuild answered ${r.status}`)
const again = await until(s.base, t2, 'analytics')
const cpu2 = await cpu()
const dau = await (
  await fetch(`${s.base}/api/v1/analytics/warehouse/dau?gameId=${gameId}&env=prod&days=30`, {
    headers: { authorization: `Bearer ${session.token}` },
  })
).json()
s.proc.kill('SIGTERM')
await s.proc.exited
console.log(
  JSON.stringify({
    engine,
    events: N,
    users,
    loadSeconds: Math.round(loadSeconds),
    allConsumersSeconds: all,
    analyticsRebuildSeconds: again.analytics,
    // CPU seconds of each phase (the first from the server's start): the server process, and
    // PostgreSQL's backends of its database.
    cpuAll: round(cpu1),
    cpuAnalyticsRebuild: round({ server: cpu2.server - cpu1.server, pg: cpu2.pg - cpu1.pg }),
    eventsPerSecondAll: Math.round(N / Math.max(...Object.values(all))),
    dauLastDays: dau.points?.slice(-2),
  }),
)
if (engine === 'postgres') await dropPgDatabase(env.DATABASE_URL)
