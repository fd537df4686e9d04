#!/usr/bin/env bun
/**
 * Samples the event log's consumers of a running server once a second (its own process, so a
 * benchmark blocked in wrk does not stop it): `bun scripts/bench/lag-sampler.ts BASE TOKEN`.
 * On SIGTERM it prints one JSON line: per consumer the largest lag seen, in seconds and rows.
 */
const [base, token] = process.argv.slice(2)
const worst = new Map<string, { lagSeconds: number; lagEvents: number }>()
let samples = 0
let stopped = false
process.on('SIGTERM', () => {
  stopped = true
})
while (!stopped) {
  try {
    const r = await fetch(`${base}/api/v1/analytics/consumers`, {
      headers: { authorization: `Bearer ${token}` },
    })
    if (r.ok) {
      samples++
      for (const c of (await r.json()).items as Array<{
        name: string
        lagSeconds: number
        lagEvents: number
      }>) {
        const w = worst.get(c.name) ?? { lagSeconds: 0, lagEvents: 0 }
        worst.set(c.name, {
          lagSeconds: Math.max(w.lagSeconds, Math.round(c.lagSeconds * 10) / 10),
          lagEvents: Math.max(w.lagEvents, c.lagEvents),
        })
      }
    }
  } catch {
    // The server is busy or stopping: the next sample tells.
  }
  await Bun.sleep(1000)
}
console.log(JSON.stringify({ samples, maxLag: Object.fromEntries(worst) }))
export {}
