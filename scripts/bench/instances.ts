#!/usr/bin/env bun
/**
 * How long a change made through one instance takes to show on the others: three server
 * processes on one PostgreSQL database, every poll set to an hour, so only the change notice
 * (LISTEN/NOTIFY) can carry it. Measures from A's answer to the rename until B and C both
 * serve the new name.
 *
 *   bun scripts/bench/instances.ts [--samples=50]
 */
import { join } from 'node:path'
import { startServer } from '../../test/process'
import { arg, freshPgDatabase, tempDir } from './lib'

const samples = Number(arg('samples', '50'))
const url = await freshPgDatabase('liveops_bench_instances')
const yaml = `rate_limit: { requests_per_minute: 0, burst: 0 }
log: { level: info }
plugins: { games: { cache_ttl_ms: 3600000 } }
`
const servers = []
for (const name of ['a', 'b', 'c']) {
  const dir = tempDir(`liveops-bench-${name}-`)
  await Bun.write(join(dir, 'bench.yaml'), `data_dir: ${dir}\n${yaml}`)
  servers.push(
    await startServer([process.execPath, 'core/main.ts', '--config', join(dir, 'bench.yaml')], {
      DATABASE_URL: url,
      ADMIN_PASSWORD: 'bench-password',
      JWT_SECRET: 'bench-shared',
      LOG_LEVEL: 'info',
    }),
  )
}
const [a, b, c] = servers
try {
  const { token } = await (
    await fetch(`${a.base}/api/auth/login`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ email: 'admin@localhost', password: 'bench-password' }),
    })
  ).json()
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
  console.log(
    `change visible on 2 other instances: median ${q(0.5)} ms, p90 ${q(0.9)} ms, max ${q(1)} ms (${samples} samples)`,
  )
} finally {
  for (const s of servers) s.proc.kill('SIGTERM')
  await Promise.all(servers.map((s) => s.proc.exited))
}
