#!/usr/bin/env bun
/**
 * Behavior and level analytics over a generated event store (issue 17 benchmark): events are
 * written through ingest's group-commit writer, then derived by the analytics and behavior consumers
 * (as the server writes them), then each read is timed warm, directly on the stores (no HTTP),
 * median of `--runs`.
 *
 *   bun scripts/bench/analytics-behavior.ts [--events=10000000] [--users=200000] [--days=30]
 *     [--engine=sqlite|postgres] [--commit=2000] [--runs=9] [--only=funnel,paths]
 *
 * Targets (10 M events, 30 days, 200,000 users, warm): a 3-step funnel over 24 hours <= 500 ms,
 * top-10 paths over 24 hours <= 500 ms. Raw reads walk only the id ranges the rollup recorded
 * for the range's client hours; beside each, the same run measures its floor: one plain query
 * that reads the same rows (user, event, time) of the same id ranges into JS and does nothing
 * else, and once, the same rows found without the ranges (a walk of the whole table).
 * `--only` times only the reads whose names contain one of its words (and skips the walk of the
 * whole table). Each read also reports this process's CPU per read (`cpuMs`) and, on PostgreSQL,
 * the CPU of the server processes serving this database (`pgCpuMs`, from /proc, 10 ms ticks).
 *
 * The generated store is kept for the next run (10 M events take many minutes to write): a
 * SQLite file under `$TMPDIR/liveops-behavior-bench-<engine>-e<events>-u<users>-d<days>-c<commit>/`,
 * or the PostgreSQL database `liveops_bench_behavior_e<events>_u<users>_d<days>_c<commit>`, named
 * by the parameters that shape the data. Its table `bench_meta` records how many events were
 * written and the first simulated day, so a later run with the same parameters only queries (its
 * "today" is the stored one, not the clock's). Loading resumes where it stopped:
 * `--load-seconds=N` stops writing after about N seconds and exits with status 3 before timing
 * anything (so a long load can be run in slices, each short enough to hold the CPU lock);
 * `--fresh` drops the kept store and writes a new one. A process killed while loading may leave
 * up to two commits' events more than recorded (use `--fresh` if that matters).
 */
import { mkdirSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { type Db, migrate, openDb } from '../../core/db'
import { createLogger } from '../../core/log'
import { behaviorAnalytics } from '../../plugins/analytics/behavior/behavior'
import { levelAnalytics } from '../../plugins/analytics/behavior/levels'
import { eventIdRanges } from '../../plugins/analytics/behavior/raw'
import { DAY, floorTo } from '../../plugins/analytics/lib/time'
import { migrations as analyticsMigrations } from '../../plugins/analytics/migrations'
import { derive } from '../../plugins/analytics/store/testing'
import { ingestMigrations } from '../../plugins/ingest/migrations'
import { GroupWriter } from '../../plugins/ingest/persist/writer'
import { scanEvents, walkTimeline, walkTimelineText } from '../../plugins/ingest/store/store'
import { WalkThreads } from '../../plugins/ingest/store/walk-threads'
import { analyticsBatch } from './analytics-events'
import { PG_URL, arg, median } from './lib'

const engine = arg('engine', 'sqlite')
const total = Number(arg('events', '10000000'))
const users = Number(arg('users', '200000'))
const days = Number(arg('days', '30'))
const perCommit = Number(arg('commit', '2000'))
const runs = Number(arg('runs', '9'))
const GAME = 'bench-game'

const loadBudget = Number(arg('load-seconds', 'Infinity'))
const fresh = process.argv.includes('--fresh')
const only = arg('only', '')
  .split(',')
  .filter((w) => w !== '')

const key = `e${total}-u${users}-d${days}-c${perCommit}`
const dir = join(tmpdir(), `liveops-behavior-bench-${engine}-${key}`)
const dbName = `liveops_bench_behavior_${key.replaceAll('-', '_')}`
if (fresh) rmSync(dir, { recursive: true, force: true })
mkdirSync(dir, { recursive: true })
const url = engine === 'postgres' ? await pgDatabase(dbName, fresh) : `${dir}/b.sqlite`
const db: Db = openDb(url, dir)
await migrate(db, [
  { plugin: 'ingest', migrations: ingestMigrations },
  { plugin: 'analytics', migrations: analyticsMigrations },
])
await db.exec('CREATE TABLE IF NOT EXISTS bench_meta (k TEXT PRIMARY KEY, v BIGINT NOT NULL)')
const meta = async (k: string) =>
  (await db.get<{ v: number }>('SELECT v FROM bench_meta WHERE k = ?', [k]))?.v ?? undefined
const setMeta = (k: string, v: number) =>
  db.run('INSERT INTO bench_meta (k, v) VALUES (?, ?) ON CONFLICT (k) DO UPDATE SET v = excluded.v', [k, v])

const start = Number((await meta('start')) ?? floorTo(Date.now(), DAY) - (days - 1) * DAY)
await setMeta('start', start)
const today = start + (days - 1) * DAY
const already = Number((await meta('written')) ?? 0)
const order = { n: Number((await meta('orders')) ?? 0) }
let loadSeconds = 0
if (already < total) {
  const writer = new GroupWriter(
    db,
    createLogger({ level: 'error', format: 'json', sensitive_fields: [] } as never),
  )
  const t0 = performance.now()
  const inFlight: Array<Promise<number>> = []
  let written = already
  for (; written < total && performance.now() - t0 < loadBudget * 1000; written += perCommit) {
    const t = start + (written / total) * days * DAY
    const upTo = written + perCommit
    const batch = analyticsBatch({ gameId: GAME, users, total, days, perCommit, behavior: true }, t, order)
    const orders = order.n
    // Progress is recorded once a commit is stored, so a resumed load neither skips nor repeats it.
    inFlight.push(
      writer
        .write(batch)
        .then(() => setMeta('written', upTo))
        .then(() => setMeta('orders', orders)),
    )
    if (inFlight.length >= 2) await inFlight.shift()
  }
  await Promise.all(inFlight)
  // The consumers of the log derive the counters and spans the reads below use.
  await derive(db)
  loadSeconds = (performance.now() - t0) / 1000
  if (written < total) {
    console.log(JSON.stringify({ loading: { written, total, seconds: Math.round(loadSeconds), store: url } }))
    await db.close()
    process.exit(3)
  }
  console.error(`loaded ${total - already} events in ${Math.round(loadSeconds)} s into ${url}`)
}

// SQLite's walks read on threads, as the ingest plugin starts them.
const threads = engine === 'sqlite' ? new WalkThreads(url) : undefined
const behavior = behaviorAnalytics(db, {
  scan: (q) => scanEvents(db, q),
  timeline: (q, each) => walkTimeline(db, q, each),
  timelineText: (q, each) => walkTimelineText(db, q, each, threads),
})
const levels = levelAnalytics(db)
const scope = { gameId: GAME, env: 'prod' }
// The last full simulated day (24 hours of client time; about total / days events).
const day = { ...scope, from: today - DAY, to: today }
const month = { ...scope, from: start, to: today }

/** The floor of a raw read: the range's rows of the same id ranges, three columns, into JS. */
async function floor(bounded: boolean): Promise<number> {
  const ranges = bounded ? await eventIdRanges(db, day) : [[0, Number.MAX_SAFE_INTEGER]]
  let rows = 0
  for (const [lo, hi] of ranges) {
    const got = await db.all(
      'SELECT user_id, event, ts FROM ingest_events WHERE id >= ? AND id <= ? AND game_id = ? AND env = ? AND ts >= ? AND ts < ?',
      [lo, hi, GAME, 'prod', day.from, day.to],
    )
    rows += got.length
  }
  return rows
}

const steps = [{ event: 'session_start' }, { event: 'level_start' }, { event: 'level_complete' }]
const reads: Array<[string, () => Promise<unknown>, number | undefined]> = [
  ['floor: the 24 hours rows (user, event, ts) of the recorded id ranges', () => floor(true), undefined],
  [
    'funnel, 3 steps, 24 hours, ordered, window 1 day',
    () => behavior.funnel({ ...day, steps, window: DAY, order: 'ordered' }),
    500,
  ],
  [
    'funnel, 3 steps, 24 hours, strict (every event of the users)',
    () => behavior.funnel({ ...day, steps, window: DAY, order: 'strict' }),
    500,
  ],
  [
    'paths top 10, 24 hours, per session, length 5',
    () => behavior.paths({ ...day, top: 10, length: 5, by: 'session', exclude: [] }),
    500,
  ],
  [
    'events page 0 (20 newest), 24 hours',
    () => behavior.events({ ...day, page: 0, pageSize: 20 }),
    undefined,
  ],
  ['aggregates, top 10, 30 days', () => behavior.aggregates({ ...month, top: 10 }), undefined],
  ['adoption, 30 days', () => behavior.adoption(month), undefined],
  ['product trend, 30 days', () => behavior.productTrend({ ...month, top: 10 }), undefined],
  [
    'transactions page 0, 30 days',
    () => behavior.transactions({ ...scope, from: start, to: today + DAY, page: 0, pageSize: 20 }),
    undefined,
  ],
  ['levels, 30 days', () => levels.levels(month), undefined],
  [
    'map heat grid 20x20 + 100 points, 7 days',
    () =>
      levels.map({
        ...scope,
        from: today - 7 * DAY,
        to: today,
        map: 'm0',
        cells: 20,
        limit: 100,
        bounds: {},
      }),
    undefined,
  ],
]
/** The kept PostgreSQL database of these parameters (created when missing; dropped first with `--fresh`). */
async function pgDatabase(name: string, drop: boolean): Promise<string> {
  const postgres = (await import('postgres')).default
  const sql = postgres(PG_URL, { max: 1, onnotice: () => undefined })
  if (drop) await sql.unsafe(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)
  const [{ n }] = await sql`SELECT COUNT(*)::int AS n FROM pg_database WHERE datname = ${name}`
  if (!n) await sql.unsafe(`CREATE DATABASE ${name}`)
  await sql.end()
  return PG_URL.replace(/\/[^/]*$/, `/${name}`)
}

/** CPU ticks (1/100 s) of each server process connected to the bench database (PostgreSQL on this machine). */
async function pgTicks(): Promise<Map<number, number>> {
  const out = new Map<number, number>()
  if (engine !== 'postgres') return out
  const pids = await db.all<{ pid: number }>(
    'SELECT pid FROM pg_stat_activity WHERE datname = current_database()',
  )
  for (const { pid } of pids) {
    const stat = await Bun.file(`/proc/${pid}/stat`)
      .text()
      .catch(() => '')
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
    if (f.length > 13) out.set(pid, Number(f[11]) + Number(f[12]))
  }
  return out
}

const results = []
for (const [name, read, target] of reads) {
  if (only.length && !only.some((w) => name.includes(w))) continue
  await read()
  const times: number[] = []
  const pg0 = await pgTicks()
  const cpu0 = process.cpuUsage()
  for (let i = 0; i < runs; i++) {
    const s = performance.now()
    await read()
    times.push(performance.now() - s)
  }
  const cpu = process.cpuUsage(cpu0)
  let pgTicksUsed = 0
  for (const [pid, t] of await pgTicks()) pgTicksUsed += t - (pg0.get(pid) ?? 0)
  const ms = Math.round(median(times) * 10) / 10
  results.push({
    read: name,
    medianMs: ms,
    maxMs: Math.round(Math.max(...times) * 10) / 10,
    cpuMs: Math.round((cpu.user + cpu.system) / 1000 / runs),
    pgCpuMs: engine === 'postgres' ? Math.round((pgTicksUsed * 10) / runs) : undefined,
    targetMs: target,
    met: target === undefined ? undefined : ms <= target,
  })
}
// Once: what the recorded ranges save (the same rows found by a walk of the whole table).
const u0 = performance.now()
const unboundedRows = only.length ? undefined : await floor(false)
const unboundedMs = only.length ? undefined : Math.round(performance.now() - u0)
console.log(
  JSON.stringify(
    {
      engine,
      events: total,
      users,
      days,
      store: url,
      // 0 when the kept store was complete already (only queried).
      loadSeconds: Math.round(loadSeconds),
      rowsIn24Hours: await floor(true),
      unboundedFloorMs: unboundedMs,
      unboundedRows,
      results,
    },
    null,
    1,
  ),
)
await threads?.close()
await db.close()
