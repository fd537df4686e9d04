#!/usr/bin/env bun
/**
 * Where PostgreSQL's time goes while a benchmark runs (pg_stat_statements is not installed):
 * samples `pg_stat_activity` every `--every` ms for `--seconds`, over the databases whose name
 * starts with `--db` (default `liveops_bench_`), and prints the share of samples in which a
 * backend was active in each statement (its first 90 characters) and what it waited on.
 *
 *   bun scripts/bench/pg-activity.ts [--seconds=60] [--every=50] [--db=liveops_bench_ingest]
 */
import postgres from 'postgres'
import { PG_URL, arg } from './lib'

const seconds = Number(arg('seconds', '60'))
const every = Number(arg('every', '50'))
const prefix = arg('db', 'liveops_bench_')
const sql = postgres(PG_URL, { max: 1, onnotice: () => undefined })
const counts = new Map<string, number>()
let samples = 0
/** Samples in which at least one backend was active (the shares are of these). */
let busy = 0
const end = performance.now() + seconds * 1000
while (performance.now() < end) {
  const rows = await sql<{ q: string; w: string | null }[]>`
    SELECT left(regexp_replace(query, '\\s+', ' ', 'g'), 90) AS q,
      wait_event_type || ':' || wait_event AS w
    FROM pg_stat_activity
    WHERE state = 'active' AND datname LIKE ${`${prefix}%`} AND pid <> pg_backend_pid()`
  samples++
  if (rows.length) busy++
  for (const r of rows) {
    const k = `${r.w ?? 'CPU'}\t${r.q}`
    counts.set(k, (counts.get(k) ?? 0) + 1)
  }
  await Bun.sleep(every)
}
await sql.end()
const total = [...counts.values()].reduce((a, b) => a + b, 0)
console.log(
  `samples ${samples}, ${busy} with a backend active; active backends per busy sample ${(total / Math.max(1, busy)).toFixed(2)}`,
)
for (const [k, n] of [...counts.entries()].sort((a, b) => b[1] - a[1]).slice(0, 30))
  console.log(`${((100 * n) / Math.max(1, busy)).toFixed(1).padStart(6)}%\t${k}`)
