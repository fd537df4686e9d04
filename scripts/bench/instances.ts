#!/usr/bin/env bun
/**
 * Three instances on one PostgreSQL (and Redis), in parts:
 *
 *  - changes: how long a change made through one instance takes to show on the others, every poll
 *    set to an hour, so only the change notice (LISTEN/NOTIFY) can carry it: from A's answer to
 *    the rename until B and C both serve the new name;
 *  - outage, burst, takeover: the bad days of issue 36 (scripts/bench/instances-faults.ts).
 *
 *   bun scripts/bench/instances.ts [--parts=changes,outage,burst,takeover] [--samples=50] [--runs=1]
 */
import { startFleet } from './fleet'
import { burst, outage, takeover } from './instances-faults'
import { arg, freshPgDatabase } from './lib'

const parts = arg('parts', 'changes,outage,burst,takeover').split(',')
const runs = Number(arg('runs', '1'))
for (const part of parts)
  for (let run = 1; run <= (part === 'changes' ? 1 : runs); run++) {
    if (part === 'outage') console.log(await outage())
    if (part === 'burst') console.log(await burst())
    if (part === 'takeover') console.log(await takeover())
    if (part === 'changes') console.log(await changes())
  }

async function changes(): Promise<string> {
  const samples = Number(arg('samples', '50'))
  const url = await freshPgDatabase('liveops_bench_instances')
  const fleet = await startFleet({
    names: ['a', 'b', 'c'],
    databaseUrl: url,
    plugins: { games: { cache_ttl_ms: 3600000 } },
  })
  const [a, b, c] = fleet.servers as [
    (typeof fleet.servers)[0],
    (typeof fleet.servers)[0],
    (typeof fleet.servers)[0],
  ]
  const token = fleet.token
  try {
    const h = { authorization: `Bearer ${token}`, 'content-type': 'application/json' }
    const game = await (
      await fetch(`${a.base}/api/games`, {
        method: 'POST',
        headers: h,
        body: JSON.stringify({
          name: 'n0',
          genre: 'RPG',
          platforms: ['WEB'],
          timezone: 'UTC',
          defaultCurrency: 'USD',
        }),
      })
    ).json()
    const nameOn = async (base: string) =>
      (await (await fetch(`${base}/api/games/${game.id}`, { headers: h })).json()).name as string
    const ms: number[] = []
    for (let i = 1; i <= samples; i++) {
      // Both followers hold the old name in their cache first.
      await Promise.all([nameOn(b.base), nameOn(c.base)])
      await fetch(`${a.base}/api/games/${game.id}`, {
        method: 'PUT',
        headers: h,
        body: JSON.stringify({ name: `n${i}` }),
      })
      const t0 = performance.now()
      for (;;) {
        const [nb, nc] = await Promise.all([nameOn(b.base), nameOn(c.base)])
        if (nb === `n${i}` && nc === `n${i}`) break
        if (performance.now() - t0 > 5000) throw new Error(`sample ${i}: not visible after 5 s`)
      }
      ms.push(performance.now() - t0)
    }
    ms.sort((x, y) => x - y)
    const q = (p: number) => ms[Math.min(ms.length - 1, Math.floor(p * ms.length))].toFixed(1)
    return `change visible on 2 other instances: median ${q(0.5)} ms, p90 ${q(0.9)} ms, max ${q(1)} ms (${samples} samples)`
  } finally {
    await fleet.stop()
  }
}
