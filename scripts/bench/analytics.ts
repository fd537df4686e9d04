#!/usr/bin/env bun
/**
 * Analytics reads over a generated event store (issue 17 benchmark): events are written through
 * ingest's group-commit writer with the analytics rollup registered and the server's persist
 * thread (as the server writes them; each event with an SDK event_id, so deduplication is paid
 * too), then each read is timed warm, directly on the stores (no HTTP), median of `--runs`.
 *
 *   bun scripts/bench/analytics.ts [--events=10000000] [--users=200000] [--days=30]
 *     [--engine=sqlite|postgres] [--commit=5000] [--runs=15] [--keep=1]
 *
 * The size is 10 M events over 30 days and 200,000 users. Targets (10 M events, warm):
 * overview <= 100 ms, retention matrix <= 300 ms, revenue and DAU series <= 50 ms. Each figure is
 * printed beside its target and beside two references measured in the same run: the floor (a
 * `SELECT 1` round trip on the same store) and the baseline the counters replaced (the retention
 * join of first sights with user-days).
 */
import { type Db, migrate, openDb } from '../../core/db'
import { createLogger } from '../../core/log'
import { gameAnalytics } from '../../plugins/analytics/game/game'
import { DAY, floorTo } from '../../plugins/analytics/lib/time'
import { migrations as analyticsMigrations } from '../../plugins/analytics/migrations'
import { oracleRetention } from '../../plugins/analytics/server/cohort-testing'
import { serverAnalytics } from '../../plugins/analytics/server/server'
import { derive } from '../../plugins/analytics/store/testing'
import { warehouseStore } from '../../plugins/analytics/warehouse/warehouse'
import { ingestMigrations } from '../../plugins/ingest/migrations'
import { PersistThread } from '../../plugins/ingest/persist/persist-thread'
import { COMMITS_IN_FLIGHT, GroupWriter } from '../../plugins/ingest/persist/writer'
import { analyticsBatch } from './analytics-events'
import { arg, dropPgDatabase, freshPgDatabase, median, tempDir } from './lib'

const engine = arg('engine', 'sqlite')
const total = Number(arg('events', '10000000'))
const users = Number(arg('users', '200000'))
const days = Number(arg('days', '30'))
const perCommit = Number(arg('commit', '5000'))
const runs = Number(arg('runs', '15'))
const GAME = 'bench-game'

const dir = tempDir('liveops-analytics-bench-')
const url = engine === 'postgres' ? await freshPgDatabase('liveops_bench_analytics') : `${dir}/a.sqlite`
const db: Db = openDb(url, dir)
await migrate(db, [
  { plugin: 'ingest', migrations: ingestMigrations },
  { plugin: 'analytics', migrations: analyticsMigrations },
])
// The server's write path: the event loop prepares each commit, a persist thread stores it.
const thread = new PersistThread(db.location!, COMMITS_IN_FLIGHT[db.dialect])
const writer = new GroupWriter(
  db,
  createLogger({ level: 'error', format: 'json', sensitive_fields: [] } as never),
  (rows) => thread.persist(rows),
)

/** Bytes the store takes on disk (SQLite: the file and its WAL). */
async function storeBytes(): Promise<number> {
  if (engine === 'postgres') {
    const r = await db.get<{ n: number }>('SELECT pg_database_size(current_database()) AS n')
    return Number(r?.n)
  }
  const { statSync, existsSync } = await import('node:fs')
  return [url, `${url}-wal`].filter((f) => existsSync(f)).reduce((sum, f) => sum + statSync(f).size, 0)
}

const today = floorTo(Date.now(), DAY)
const start = today - (days - 1) * DAY
const t0 = performance.now()
const order = { n: 0 }
let inFlight: Promise<void>[] = []
for (let written = 0; written < total; written += perCommit) {
  inFlight.push(
    writer.write(
      analyticsBatch(
        { gameId: GAME, users, total, days, perCommit },
        start + (written / total) * days * DAY,
        order,
      ),
    ),
  )
  if (written % 1_000_000 === 0 && written)
    console.error(`${written} events in ${Math.round((performance.now() - t0) / 1000)} s`)
  if (inFlight.length >= 4) await inFlight.shift()
}
await Promise.all(inFlight)
inFlight = []
await writer.idle()
// The consumers of the log derive the rollups the reads below use.
await derive(db)
await thread.close()
const loadSeconds = (performance.now() - t0) / 1000
const bytes = await storeBytes()

const wh = warehouseStore(db)
const server = serverAnalytics(db)
const game = gameAnalytics(db)
const scope = { gameId: GAME, env: 'prod' }
const reads: Array<[string, () => Promise<unknown>, number | undefined]> = [
  [
    'overview (7 days and the 7 before)',
    () => server.overview({ ...scope, from: today - 6 * DAY, to: today }),
    100,
  ],
  [
    'retention matrix (30 day cohorts, D1..D30)',
    () => server.retention({ ...scope, from: today - 29 * DAY, to: today, interval: 'day', size: 30 }, today),
    300,
  ],
  [
    'retention matrix by week (5 week cohorts, W1..W4)',
    () => server.retention({ ...scope, from: today - 34 * DAY, to: today, interval: 'week', size: 4 }, today),
    300,
  ],
  [
    'baseline: the retention join the counters replaced (30 day cohorts)',
    () =>
      oracleRetention(db, { ...scope, from: today - 29 * DAY, to: today, interval: 'day', size: 30 }, today),
    undefined,
  ],
  ['floor: SELECT 1 on the same store', () => db.get('SELECT 1 AS one'), undefined],
  ['DAU series (30 days)', () => wh.dau({ ...scope, days: 30 }), 50],
  ['revenue series (30 days)', () => wh.revenue({ ...scope, days: 30 }), 50],
  [
    'game revenue overview (30 days)',
    () => game.revenueOverview({ ...scope, from: start, to: today }),
    undefined,
  ],
  ['game ARPU per day (30 days)', () => game.arpu({ ...scope, from: start, to: today }), undefined],
]
const results = []
for (const [name, read, target] of reads) {
  await read()
  const times: number[] = []
  for (let i = 0; i < runs; i++) {
    const s = performance.now()
    await read()
    times.push(performance.now() - s)
  }
  const ms = Math.round(median(times) * 10) / 10
  results.push({
    read: name,
    medianMs: ms,
    maxMs: Math.round(Math.max(...times) * 10) / 10,
    targetMs: target,
    met: target === undefined ? undefined : ms <= target,
  })
}
console.log(
  JSON.stringify(
    {
      engine,
      events: total,
      users,
      days,
      loadSeconds: Math.round(loadSeconds),
      eventsPerSecLoaded: Math.round(total / loadSeconds),
      bytesPerEvent: Math.round(bytes / total),
      results,
    },
    null,
    1,
  ),
)
await db.close()
// The store (about 2 KB an event) is removed unless --keep=1.
if (arg('keep', '') === '') (await import('node:fs')).rmSync(dir, { recursive: true, force: true })
else console.error(`store kept: ${url}`)
if (engine === 'postgres' && arg('keep', '') === '') await dropPgDatabase(url)
