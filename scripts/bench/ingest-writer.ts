#!/usr/bin/env bun
/**
 * The group-commit writer alone, on one thread, without HTTP: how many validated events per
 * second the event store with its rollups takes. Isolates the store's share of an ingest run.
 *
 *   bun scripts/bench/ingest-writer.ts [--engine=sqlite|postgres] [--events=1000000] [--commit=2000]
 */
import { join } from 'node:path'
import { type Db, migrate, openDb } from '../../core/db'
import { createLogger } from '../../core/log'
import { ingestMigrations } from '../../plugins/ingest/migrations'
import { validateEvents } from '../../plugins/ingest/validate'
import { GroupWriter } from '../../plugins/ingest/writer'
import { eventsBody, shapes } from './events'
import { PG_URL, arg, freshPgDatabase, tempDir } from './lib'

const engine = arg('engine', 'sqlite')
const total = Number(arg('events', '1000000'))
const perCommit = Number(arg('commit', '2000'))
const DAY = 86_400_000

const dir = tempDir('liveops-writer-bench-')
const url = engine === 'postgres' ? await freshPgDatabase('liveops_bench_writer') : join(dir, 'w.sqlite')
const db: Db = openDb(url, dir)
await migrate(db, [{ plugin: 'ingest', migrations: ingestMigrations }])
const writer = new GroupWriter(
  db,
  createLogger({ level: 'error', format: 'json', sensitive_fields: [] } as never),
)

// Prepared outside the timing: 30 simulated days over the run, as the HTTP benchmark does.
const pool = shapes('g1')
const simStart = Date.now() - 30 * DAY
const commits: ReturnType<typeof validateEvents>['events'][] = []
for (let at = 0; at < total; at += perCommit) {
  const t = simStart + (at / total) * 30 * DAY
  commits.push(validateEvents(JSON.parse(eventsBody(pool, perCommit, t)), { payments: false }).events)
}

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
console.log(
  JSON.stringify({
    engine,
    events: total,
    perCommit,
    eventsPerSec: Math.round(total / secs),
    cpuSecondsPerMillion: Math.round(((cpu.user + cpu.system) / 1e6 / total) * 1e6 * 100) / 100,
  }),
)
await db.close()
if (engine === 'postgres') {
  const postgres = (await import('postgres')).default
  const sql = postgres(PG_URL, { max: 1, onnotice: () => undefined })
  await sql.unsafe('DROP DATABASE IF EXISTS liveops_bench_writer WITH (FORCE)')
  await sql.end()
}
