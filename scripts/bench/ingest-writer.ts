#!/usr/bin/env bun
/**
 * The group-commit writer alone, on one thread, without HTTP: how many validated events per
 * second the event store with its rollups takes. Isolates the store's share of an ingest run.
 *
 *   bun scripts/bench/ingest-writer.ts [--engine=sqlite|postgres] [--events=1000000] [--commit=2000]
 *     [--days=30] [--warm=0] [--event-ids=1] [--consumers=0|1] [--exposed-users=1000000]
 *
 * The events' times span `--days` simulated days (the HTTP benchmark's 10 M events span 30, about
 * 333,000 a day). The first `--warm` events are written before the timing starts, so the
 * 200,000 users' first-seen rows can be left out of the figure, as the HTTP benchmark's warm-up
 * leaves them out. It also reports the bytes the process wrote per timed event (WAL and
 * checkpoints, from /proc/self/io). `--rollups=base` leaves the behavior rollup out (to measure
 * what it costs: run both, alternating).
 *
 * `--consumers=1` then runs each consumer of the event log alone over what was written (analytics,
 * behavior, realtime, exposures: a new consumer takes the whole log), and prints the CPU each took
 * per event: the process's CPU time, steadier than wall time on a shared machine (`--only=NAME`:
 * that one alone). With `--warm=N` each consumer first takes the warm events untimed (the users'
 * first sights, the caches filled, as in a running server), and only the timed events count.
 * `--together=1`: the consumers instead run as in the server, one event log, their loops beside
 * the timed writes (each commit notifies them), and the CPU per event printed covers writes and
 * consumers together, with how many of the consumers' reads of the log were shared, served from
 * the rows handed over at commit (`--hand-over=0`: none are), or read from the store.
 */
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { consumerMigrations } from '../../core/auth/migrations'
import { type Db, migrate, openDb } from '../../core/db'
import { type Derivation, derivedConsumer } from '../../core/derive'
import { EventLog } from '../../core/event-log'
import { createLogger } from '../../core/log'
import { BehaviorRollup } from '../../plugins/analytics/behavior/behavior-rollup'
import { migrations as analyticsMigrations } from '../../plugins/analytics/migrations'
import { MinuteRollup } from '../../plugins/analytics/realtime/realtime-rollup'
import { AnalyticsRollup } from '../../plugins/analytics/store/rollup'
import { scopeOf } from '../../plugins/experiments/exposed'
import { ExposureRollup } from '../../plugins/experiments/exposures'
import m002 from '../../plugins/experiments/migrations/002_take_exposures.sql' with { type: 'text' }
import m003 from '../../plugins/experiments/migrations/003_exposed_users.sql' with { type: 'text' }
import { ingestMigrations } from '../../plugins/ingest/migrations'
import { GroupWriter } from '../../plugins/ingest/persist/writer'
import { validateEvents } from '../../plugins/ingest/signed/validate'
import { eventLog } from '../../plugins/ingest/store/log'
import { eventsBody, shapes } from './events'
import { arg, dropPgDatabase, freshPgDatabase, tempDir } from './lib'

const engine = arg('engine', 'sqlite')
const total = Number(arg('events', '1000000'))
const perCommit = Number(arg('commit', '2000'))
/** Events carry an SDK event_id (deduplication paid); 0: none. */
const eventIds = arg('event-ids', '1') !== '0'
const DAY = 86_400_000

const dir = tempDir('liveops-writer-bench-')
const url = engine === 'postgres' ? await freshPgDatabase('liveops_bench_writer') : join(dir, 'w.sqlite')
const db: Db = openDb(url, dir)
// The rollup tables as the analytics and experiments plugins leave them (the experiments
// plugin's own first migration is not needed here).
await migrate(db, [
  { plugin: 'ingest', migrations: ingestMigrations },
  { plugin: 'analytics', migrations: analyticsMigrations },
  {
    plugin: 'experiments',
    migrations: [
      { id: 2, name: 'take_exposures', sql: m002 },
      { id: 3, name: 'exposed_users', sql: m003 },
    ],
  },
])
const quiet = createLogger({ level: 'error', format: 'json', sensitive_fields: [] } as never)
const writer = new GroupWriter(db, quiet)
/**
 * `--together=1`: each commit wakes the consumers; on SQLite it also hands them its rows, as in
 * the server (`--hand-over=0`: they read every row back from the store, as before that).
 */
const wake: { notify?: EventLog['notify'] } = {}
const handOver = arg('hand-over', '1') === '1'
writer.attach(db, undefined, (a) => wake.notify?.(handOver ? a : undefined))
// Raw rows only: what is derived from them follows the event log (scripts/bench/ingest.ts measures the consumers).

// Prepared outside the timing.
const days = Number(arg('days', '30'))
const warm = Number(arg('warm', '0'))
const pool = shapes('g1')
const simStart = Date.now() - days * DAY
const commits: ReturnType<typeof validateEvents>['events'][] = []
for (let at = 0; at < warm + total; at += perCommit) {
  const t = simStart + (at / (warm + total)) * days * DAY
  commits.push(
    validateEvents(JSON.parse(eventsBody(pool, perCommit, t, eventIds)), { payments: false }).events,
  )
}
const warmCommits = commits.splice(0, Math.ceil(warm / perCommit))
for (const events of warmCommits) await writer.write(events)

const consumers = {
  analytics: () => new AnalyticsRollup(),
  behavior: () => new BehaviorRollup(),
  realtime: () => new MinuteRollup(),
  // The bench's events name experiments of g1/prod it does not create: every one counts.
  // `--exposed-users=N`: the users it keeps in memory (0: every environment looked up in the store).
  exposures: () =>
    new ExposureRollup(
      async (ids) => new Map(ids.map((id) => [id, scopeOf('g1', 'prod')])),
      Number(arg('exposed-users', '1000000')),
    ),
}
const only = arg('only', '')
const logs = new Map<string, EventLog>()
const together = arg('together', '0') === '1'
let shared: EventLog | undefined
if (together) {
  await migrate(db, [{ plugin: 'core.consumers', migrations: consumerMigrations }])
  shared = new EventLog({ db, instanceId: 'bench', log: quiet, pollMs: 3_600_000 })
  shared.provide(eventLog(() => db))
  wake.notify = (a) => shared?.notify(a)
  for (const [name, make] of Object.entries(consumers))
    if (!only || name === only) shared.consume(derivedConsumer(make() as Derivation<unknown, unknown>))
  await shared.start()
  if (warm) await shared.drain(undefined, 3_600_000)
} else if (arg('consumers', '0') === '1') {
  await migrate(db, [{ plugin: 'core.consumers', migrations: consumerMigrations }])
  for (const [name, make] of Object.entries(consumers)) {
    if (only && name !== only) continue
    const log = new EventLog({ db, instanceId: 'bench', log: quiet, pollMs: 3_600_000 })
    log.provide(eventLog(() => db))
    log.consume(derivedConsumer(make() as Derivation<unknown, unknown>))
    await log.start()
    // The warm events, untimed.
    if (warm) await log.drain(undefined, 3_600_000)
    logs.set(name, log)
  }
}

/** Bytes this process has written (Linux), or undefined. */
function writtenBytes(): number | undefined {
  try {
    const io = readFileSync('/proc/self/io', 'utf8')
    return Number(io.match(/^write_bytes: (\d+)/m)?.[1])
  } catch {
    return undefined
  }
}
const written0 = writtenBytes()
const t0 = performance.now()
const cpu0 = process.cpuUsage()
let inFlight: Promise<void>[] = []
for (const events of commits) {
  inFlight.push(writer.write(events))
  // Two commits queued at most, as under steady load.
  if (inFlight.length >= 2) {
    await inFlight.shift()
  }
}
await Promise.all(inFlight)
inFlight = []
const secs = (performance.now() - t0) / 1000
const cpu = process.cpuUsage(cpu0)
if (shared) {
  // The consumers' backlog at the end of the writes, then all of it.
  const lagAtEnd = await shared.status()
  await shared.drain(undefined, 3_600_000)
  const all = process.cpuUsage(cpu0)
  console.log(
    JSON.stringify({
      together: {
        seconds: Math.round(performance.now() - t0) / 1000,
        cpuUsPerEvent: Math.round(((all.user + all.system) / total) * 100) / 100,
        backlogAtEndOfWrites: lagAtEnd.map((c) => [c.name, c.lagEvents]),
        reads: shared.readCounts(),
      },
    }),
  )
  await shared.stop()
}
console.log(
  JSON.stringify({
    engine,
    events: total,
    perCommit,
    eventsPerSec: Math.round(total / secs),
    cpuSecondsPerMillion: Math.round(((cpu.user + cpu.system) / 1e6 / total) * 1e6 * 100) / 100,
    writtenBytesPerEvent:
      written0 === undefined ? undefined : Math.round(((writtenBytes() ?? written0) - written0) / total),
  }),
)
if (logs.size) {
  const per: Record<string, { seconds: number; cpuUsPerEvent: number }> = {}
  const counted = warm ? total : warmCommits.length * perCommit + total
  for (const [name, log] of logs) {
    const c0 = process.cpuUsage()
    const w0 = performance.now()
    await log.drain(undefined, 3_600_000)
    const c = process.cpuUsage(c0)
    await log.stop()
    per[name] = {
      seconds: Math.round(performance.now() - w0) / 1000,
      cpuUsPerEvent: Math.round(((c.user + c.system) / counted) * 100) / 100,
    }
  }
  console.log(JSON.stringify({ consumers: per }))
}
await db.close()
if (engine === 'postgres') await dropPgDatabase(url)
