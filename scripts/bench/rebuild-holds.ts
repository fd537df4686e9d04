#!/usr/bin/env bun
/**
 * How long a rebuild holds a SQLite server's event loop (bun:sqlite is synchronous: while a
 * statement runs, no request is answered):
 *
 *   bun scripts/bench/rebuild-holds.ts [--events=500000] [--users=50000] [--mix=plain|rich]
 *     [--consumers=behavior,analytics] [--from=YYYY-MM-DD]
 *
 * Writes the events as rebuild.ts does (30 days, one commit per 1,000 rows), starts the server
 * with loop-holds.ts preloaded, lets its consumers take the log in, then rebuilds each consumer
 * named, one after the other (whole, or from `--from`). For each: the reset's time (from the
 * request to its "consumer rebuild started" log line), the rebuild's (until it is caught up
 * again, polled every 100 ms), the longest hold of the event loop during the reset and during the
 * whole rebuild, and how many holds over 100 ms there were.
 */
import { Database } from 'bun:sqlite'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { startServer } from '../../test/process'
import { bootstrap } from './ingest-load'
import { arg, tempDir } from './lib'

const N = Number(arg('events', '500000'))
const users = Number(arg('users', '50000'))
const names = arg('consumers', 'behavior,analytics').split(',')
const fromDate = arg('from', '')
const DAY = 86_400_000
const dir = tempDir('liveops-rebuild-holds-')
const config = join(dir, 'liveops.yaml')
const holdsFile = join(dir, 'holds.txt')
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
  LOOP_HOLDS_FILE: holdsFile,
}
let s = await startServer([process.execPath, 'core/main.ts', '--config', config], env, { timeoutMs: 60_000 })
const { gameId } = await bootstrap(s.base)
s.proc.kill('SIGTERM')
await s.proc.exited

// The events of rebuild.ts (its SQLite statement), written while the server is down. `--mix=rich`:
// behavior's tables as a played game fills them: a death point per level_fail (x, y, map), 200
// features used with platform, country and version, 500 custom event names (a sketch of ~4 KB for
// each name and dimension value a day).
const rich = arg('mix', 'plain') === 'rich'
const event = rich
  ? `CASE i % 10 WHEN 0 THEN 'session_start' WHEN 1 THEN 'login' WHEN 2 THEN 'level_fail'
       WHEN 3 THEN 'level_complete' WHEN 4 THEN 'heartbeat' WHEN 5 THEN 'feature_use' WHEN 6 THEN 'feature_use'
       ELSE 'custom_' || (i % 500) END`
  : `CASE i % 10 WHEN 0 THEN 'session_start' WHEN 1 THEN 'login' WHEN 2 THEN 'level_start'
       WHEN 3 THEN 'level_complete' WHEN 4 THEN 'heartbeat' ELSE 'custom_' || (i % 20) END`
const props = rich
  ? `CASE WHEN i % 200 = 199 THEN '{"order_id":"o' || i || '","status":"success"}'
       WHEN i % 10 = 2 THEN '{"level":"' || (i % 30) || '","map":"m' || (i % 5) || '","x":' || (i % 1000) || ',"y":' || (i % 777) || '}'
       WHEN i % 10 = 3 THEN '{"level":"' || (i % 30) || '"}'
       WHEN i % 10 IN (5, 6) THEN '{"feature":"f' || (i % 200) || '","platform":"' || CASE WHEN i % 3 = 0 THEN 'ios' ELSE 'android' END
         || '","country":"c' || (i % 40) || '","app_version":"1.' || (i % 7) || '"}'
       ELSE '{}' END`
  : `CASE WHEN i % 10 IN (2, 3) THEN '{"level":"' || (i % 30) || '"}'
       WHEN i % 200 = 199 THEN '{"order_id":"o' || i || '","status":"success"}' ELSE '{}' END`
const start = Date.now() - 30 * DAY
const db = new Database(join(dir, 'liveops.sqlite'))
db.exec('PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL')
db.exec(
  `WITH RECURSIVE c(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM c WHERE i < ${N - 1})
   INSERT INTO ingest_events (id, seq, received_at, game_id, env, event, ts, user_id, amount_cents, payment_status, props)
   SELECT ${start} * 1024 + i, 1 + i / 1000, ${start} + (i * ${30 * DAY}) / ${N}, '${gameId}', 'prod', ${event},
     ${start} + (i * ${30 * DAY}) / ${N}, 'u' || ((i * 7919) % ${users}),
     CASE WHEN i % 200 = 199 THEN 499 ELSE NULL END,
     CASE WHEN i % 200 = 199 THEN 'success' ELSE NULL END, ${props}
   FROM c`,
)
db.exec(
  'UPDATE ingest_log_head SET seq = (SELECT MAX(seq) FROM ingest_events); PRAGMA wal_checkpoint(TRUNCATE)',
)
db.close()

s = await startServer(
  [process.execPath, '--preload', join(import.meta.dir, 'loop-holds.ts'), 'core/main.ts', '--config', config],
  env,
  { timeoutMs: 120_000 },
)
const login = await fetch(`${s.base}/api/auth/login`, {
  method: 'POST',
  headers: { 'content-type': 'application/json' },
  body: JSON.stringify({ email: 'admin@localhost', password: 'bench-password' }),
})
const token = ((await login.json()) as { token: string }).token
const auth = { authorization: `Bearer ${token}` }
const consumers = async () => {
  const r = await fetch(`${s.base}/api/v1/analytics/consumers`, { headers: auth })
  if (!r.ok) return []
  return ((await r.json()) as { items: Array<{ name: string; lagEvents: number; rebuilding: boolean }> })
    .items
}
/** Until the consumer (every one when undefined) is caught up and not rebuilding. */
const caughtUp = async (name?: string, pollMs = 100) => {
  for (;;) {
    const all = await consumers()
    const mine = all.filter((c) => !name || c.name === name)
    if (mine.length && mine.every((c) => c.lagEvents === 0 && !c.rebuilding)) return
    await Bun.sleep(pollMs)
  }
}
await caughtUp(undefined, 1000)
await Bun.sleep(1000)

const holds = () =>
  readFileSync(holdsFile, 'utf8')
    .trim()
    .split('\n')
    .filter(Boolean)
    .map((l) => l.split(' ').map(Number) as [end: number, ms: number])
const results: Record<string, unknown>[] = []
for (const name of names) {
  const t0 = Date.now()
  const r = await fetch(`${s.base}/api/v1/analytics/consumers/${name}/rebuild`, {
    method: 'POST',
    headers: { ...auth, 'content-type': 'application/json' },
    body: JSON.stringify(fromDate ? { from: fromDate } : {}),
  })
  if (r.status !== 202) throw new Error(`rebuild of ${name} answered ${r.status}: ${await r.text()}`)
  await caughtUp(name)
  const t1 = Date.now()
  // The line the instance writes once the cursor moved (its JSON or console form), with its time.
  const line = s
    .output()
    .split('\n')
    .filter((l) => l.includes('consumer rebuild started') && l.includes(`"${name}"`))
    .at(-1)
  const started = Date.parse(line?.match(/\d{4}-\d\d-\d\dT[\d:.]+Z/)?.[0] ?? '')
  const all = holds().filter(([end]) => end >= t0 && end <= t1)
  const reset = all.filter(([end]) => end <= started + 100)
  const longest = (xs: Array<[number, number]>) => Math.max(0, ...xs.map(([, ms]) => ms))
  results.push({
    consumer: name,
    from: fromDate || null,
    resetSeconds: (started - t0) / 1000,
    rebuildSeconds: (t1 - t0) / 1000,
    longestHoldInResetMs: longest(reset),
    longestHoldInRebuildMs: longest(all),
    holdsOver100msInReset: reset.filter(([, ms]) => ms > 100).length,
    holdsOver100msInRebuild: all.filter(([, ms]) => ms > 100).length,
  })
  await Bun.sleep(1000)
}
s.proc.kill('SIGTERM')
await s.proc.exited
const sizes = new Database(join(dir, 'liveops.sqlite'), { readonly: true })
const rows = Object.fromEntries(
  ['analytics_behavior_sketch', 'analytics_death', 'analytics_event_span', 'analytics_user_day'].map((t) => [
    t,
    (sizes.query(`SELECT COUNT(*) AS n FROM ${t}`).get() as { n: number }).n,
  ]),
)
sizes.close()
console.log(JSON.stringify({ events: N, users, mix: rich ? 'rich' : 'plain', rows, results }, null, 1))
