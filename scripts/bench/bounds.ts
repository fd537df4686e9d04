#!/usr/bin/env bun
/**
 * /healthz while heavy input is handled (issue 34 point 7).
 *
 *   bun scripts/bench/bounds.ts [--samples=200] [--runs=3]
 *
 * A real server process (`bun core/main.ts`, SQLite, rate limit off). Sequential /healthz
 * latencies are measured at rest (the baseline), then while a 9.5 MB CSV dataset upload is
 * handled, and while an iCalendar import whose rule never occurs runs until its timeout (3 s).
 * Prints the median and the largest latency of each, and their ratios to the baseline, per run.
 * Target: the largest /healthz latency under load stays under 100 ms.
 */
import { join } from 'node:path'
import { recurringCalendar } from '../../plugins/rosters/testing'
import { startServer } from '../../test/process'
import { arg, median, tempDir } from './lib'

const samples = Number(arg('samples', '200'))
const runs = Number(arg('runs', '3'))
const ADMIN = 'bench-admin-token'
const json = { 'x-admin-token': ADMIN, 'content-type': 'application/json' }

const dir = tempDir('liveops-bounds-bench-')
const config = join(dir, 'bench.yaml')
await Bun.write(
  config,
  [
    `data_dir: ${dir}`,
    'rate_limit: { requests_per_minute: 0, burst: 0 }',
    'log: { level: info }',
    'plugins: { games: {}, ingest: {}, ml: { drift_check_minutes: 0 }, notify: {}, rules: {}, rosters: {} }',
    '',
  ].join('\n'),
)
const s = await startServer([process.execPath, 'core/main.ts', '--config', config], { ADMIN_TOKEN: ADMIN })

/** /healthz latencies, one request after the other, until `until` settles (or `n` at rest). */
async function healthz(until?: Promise<unknown>, n = samples): Promise<number[]> {
  const out: number[] = []
  let done = false
  void until?.finally(() => {
    done = true
  })
  while (until ? !done : out.length < n) {
    const t0 = performance.now()
    await (await fetch(`${s.base}/healthz`)).arrayBuffer()
    out.push(performance.now() - t0)
  }
  return out
}

const line = (name: string, xs: number[], base: number) =>
  `${name.padEnd(22)} n=${String(xs.length).padStart(4)} median ${median(xs).toFixed(2)} ms (x${(median(xs) / base).toFixed(1)}), max ${Math.max(...xs).toFixed(1)} ms`

try {
  const game = await (
    await fetch(`${s.base}/api/games`, {
      method: 'POST',
      headers: json,
      body: JSON.stringify({
        name: 'Bench',
        genre: 'PUZZLE',
        platforms: ['IOS'],
        timezone: 'UTC',
        defaultCurrency: 'USD',
      }),
    })
  ).json()
  const model = await (
    await fetch(`${s.base}/api/ml-models`, {
      method: 'POST',
      headers: json,
      body: JSON.stringify({ name: 'bench', gameId: game.id, type: 'CLASSIFICATION' }),
    })
  ).json()
  const rows = ['sessions,days,label,note']
  for (let i = 0, size = 0; size < 9.5 * 1024 * 1024; i++) {
    const l = `${i % 50},${(i * 7) % 120},${i % 2 ? 'yes' : 'no'},"player ${i}"`
    rows.push(l)
    size += l.length + 1
  }
  const csv = rows.join('\n')
  const ics = recurringCalendar(Date.now() - 86_400_000, 'FREQ=SECONDLY;BYMONTH=2;BYMONTHDAY=30')
  await healthz(undefined, 50)
  for (let run = 1; run <= runs; run++) {
    const rest = await healthz()
    const base = median(rest)
    const upload = await healthz(
      fetch(`${s.base}/api/ml-models/${model.id}/datasets?name=big.csv`, {
        method: 'POST',
        headers: { 'x-admin-token': ADMIN, 'content-type': 'text/csv' },
        body: csv,
      }).then((r) => r.arrayBuffer()),
    )
    const calendar = await healthz(
      fetch(`${s.base}/api/v1/rosters/never/import`, {
        method: 'POST',
        headers: { 'x-admin-token': ADMIN, 'content-type': 'text/calendar' },
        body: ics,
      }).then((r) => r.arrayBuffer()),
    )
    console.log(`run ${run}`)
    console.log(line('at rest', rest, base))
    console.log(line('during CSV upload', upload, base))
    console.log(line('during iCal import', calendar, base))
  }
} finally {
  s.proc.kill()
  await s.proc.exited
}
