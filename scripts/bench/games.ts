#!/usr/bin/env bun
/**
 * Authenticated `GET /api/games/{id}` at 64 connections, wrk on the same machine.
 *
 *   bun scripts/bench/games.ts [--engine=sqlite|postgres|both] [--seconds=10] [--runs=3] [--connections=64]
 *
 * Prints the median of the runs per engine (the machine is shared and noisy).
 */
import { join } from 'node:path'
import { startServer } from '../../test/process'
import { arg, freshPgDatabase, median, tempDir, wrk } from './lib'

const engines = arg('engine', 'both') === 'both' ? ['sqlite', 'postgres'] : [arg('engine', 'sqlite')]
const seconds = Number(arg('seconds', '10'))
const runs = Number(arg('runs', '3'))
const connections = Number(arg('connections', '64'))

for (const engine of engines) {
  const dir = tempDir('liveops-bench-')
  const config = join(dir, 'bench.yaml')
  await Bun.write(
    config,
    `data_dir: ${dir}\nrate_limit: { requests_per_minute: 0, burst: 0 }\nlog: { level: info }\nplugins: { games: {} }\n`,
  )
  const env: Record<string, string> = {
    ADMIN_PASSWORD: 'bench-password',
    JWT_SECRET: 'bench-jwt-secret-0001',
  }
  if (engine === 'postgres') env.DATABASE_URL = await freshPgDatabase('liveops_bench_games')
  const s = await startServer([process.execPath, 'core/main.ts', '--config', config], env)
  try {
    const { token } = await (
      await fetch(`${s.base}/api/auth/login`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ email: 'admin@localhost', password: 'bench-password' }),
      })
    ).json()
    const game = await (
      await fetch(`${s.base}/api/games`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
        body: JSON.stringify({
          name: 'Bench',
          genre: 'RPG',
          platforms: ['IOS'],
          timezone: 'UTC',
          defaultCurrency: 'USD',
        }),
      })
    ).json()
    const url = `${s.base}/api/games/${game.id}`
    wrk(url, { connections, seconds: 2, headers: { authorization: `Bearer ${token}` } }) // warm-up
    const results = Array.from({ length: runs }, () =>
      wrk(url, { connections, seconds, headers: { authorization: `Bearer ${token}` } }),
    )
    const row = {
      engine,
      rps: Math.round(median(results.map((r) => r.rps))),
      p50ms: median(results.map((r) => r.p50ms)),
      p99ms: median(results.map((r) => r.p99ms)),
      errors: results.reduce((n, r) => n + r.errors, 0),
      runs: results.map((r) => Math.round(r.rps)),
    }
    console.log(JSON.stringify(row))
  } finally {
    s.proc.kill('SIGTERM')
    await s.proc.exited
  }
}
