#!/usr/bin/env bun
/**
 * Public experiment configuration read and client-side assignment.
 *
 *   bun scripts/bench/config.ts [--engine=sqlite|postgres] [--seconds=10] [--runs=3] [--connections=64] [--wrk-threads=1] [--part=all|http|assign]
 *
 * http: a real server process (`bun core/main.ts --config <temp yaml>`, rate limit off), running
 * experiments making a ~2 KB answer, wrk at 64 connections on 127.0.0.1 on the same machine:
 * the 200 path, then the 304 path (If-None-Match with the current ETag). Targets: >= 80,000
 * requests/s with p99 <= 2 ms; the 304 path faster.
 * assign: `assign()` of the SDK in this process on one core over 4,096 distinct user ids.
 * Target: >= 3 million assignments/s.
 *
 * Prints the median of the runs (the machine is shared and noisy) and every run.
 */
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { assign } from '../../sdk/assign'
import { startServer } from '../../test/process'
import { type WrkResult, arg, freshPgDatabase, median, startBare, tempDir, wrk } from './lib'

const engine = arg('engine', 'sqlite')
const seconds = Number(arg('seconds', '10'))
const runs = Number(arg('runs', '3'))
const connections = Number(arg('connections', '64'))
const part = arg('part', 'all')
// One wrk thread: it drives 64 connections past 200,000 req/s on its own core. A second thread
// only competes with the server for the two cores: on 2026-11-24, 171,600 req/s with p99 3.4 ms
// (the bare route 2.9 ms) against 221,000 with p99 0.62 ms (the bare route 0.35 ms).
const threads = Number(arg('wrk-threads', '1'))

/** Busy CPU seconds of the machine and of one process, from /proc (Linux, 100 ticks/s). */
function cpu(pid: number) {
  const fields = readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).slice(1).map(Number)
  const idle = fields[3] + fields[4]
  const busy = fields.reduce((a: number, b: number) => a + b, 0) - idle
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
  const rest = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
  const server = Number(rest[11]) + Number(rest[12])
  const load1 = Number(readFileSync('/proc/loadavg', 'utf8').split(' ')[0])
  return { busy: busy / 100, server: server / 100, at: performance.now() / 1000, load1 }
}

async function http() {
  const dir = tempDir('liveops-bench-config-')
  const config = join(dir, 'bench.yaml')
  await Bun.write(
    config,
    `data_dir: ${dir}\nrate_limit: { requests_per_minute: 0, burst: 0 }\nlog: { level: info }\nplugins: { games: {}, ingest: {}, experiments: {} }\n`,
  )
  const env: Record<string, string> = {
    ADMIN_PASSWORD: 'bench-password',
    JWT_SECRET: 'bench-jwt-secret-0001',
  }
  if (engine === 'postgres') env.DATABASE_URL = await freshPgDatabase('liveops_bench_config')
  const s = await startServer([process.execPath, 'core/main.ts', '--config', config], {
    ...env,
    LOG_LEVEL: 'info',
  })
  try {
    const call = async (method: string, path: string, body?: unknown, token?: string) => {
      const r = await fetch(`${s.base}${path}`, {
        method,
        headers: {
          'content-type': 'application/json',
          ...(token ? { authorization: `Bearer ${token}` } : {}),
        },
        body: body === undefined ? undefined : JSON.stringify(body),
      })
      if (r.status >= 300) throw new Error(`${method} ${path}: ${r.status} ${await r.text()}`)
      return r.json()
    }
    const { token } = await call('POST', '/api/auth/login', {
      email: 'admin@localhost',
      password: 'bench-password',
    })
    const game = await call(
      'POST',
      '/api/games',
      { name: 'Bench', genre: 'RPG', platforms: ['IOS', 'ANDROID'], timezone: 'UTC', defaultCurrency: 'USD' },
      token,
    )
    const url = `${s.base}/api/config/${game.id}/prod`
    let bytes = 0
    for (let i = 0; bytes < 2048; i++) {
      const e = await call(
        'POST',
        '/api/experiments',
        {
          gameId: game.id,
          environment: 'prod',
          name: `experiment ${i}`,
          config: {
            variants: [
              { name: 'control', weight: 34 },
              { name: 'variant_b', weight: 33 },
              { name: 'variant_c', weight: 33 },
            ],
            targeting: { platform: ['IOS', 'ANDROID'], countries: ['US', 'CA', 'GB', 'DE'] },
            metrics: { primary: 'purchase', secondary: ['level_complete'] },
          },
        },
        token,
      )
      await call('POST', `/api/experiments/${e.id}/publish`, undefined, token)
      bytes = (await (await fetch(url)).arrayBuffer()).byteLength
    }
    const etag = (await fetch(url)).headers.get('etag')!
    const notModified = (await fetch(url, { headers: { 'if-none-match': etag } })).status
    console.log(
      JSON.stringify({
        engine,
        payloadBytes: bytes,
        etag,
        notModifiedStatus: notModified,
        connections,
        seconds,
        runs,
      }),
    )

    // 200 and 304 runs alternate so both meet the same contention from the other processes on
    // the machine; each run records the CPU the server used and what everything else used.
    const measure = (headers: Record<string, string>) => {
      const before = cpu(s.proc.pid)
      const r = wrk(url, { connections, seconds, headers, threads })
      const after = cpu(s.proc.pid)
      const wall = after.at - before.at
      return {
        ...r,
        serverCores: +((after.server - before.server) / wall).toFixed(2),
        wrkAndOtherCores: +((after.busy - before.busy - (after.server - before.server)) / wall).toFixed(2),
        load1: after.load1,
        // Throughput per CPU-second the server actually got: comparable across contention levels.
        rpsPerServerCore: Math.round(r.rps / ((after.server - before.server) / wall)),
      }
    }
    // The ceiling: the same bytes and ETag from a bare Bun static route in its own process.
    const payload = await (await fetch(url)).text()
    const bare = await startBare(
      '/c',
      `new Response(${JSON.stringify(payload)}, { headers: { 'content-type': 'application/json', etag: ${JSON.stringify(etag)}, 'cache-control': 'no-cache' } })`,
    )
    wrk(url, { connections, seconds: 2, threads }) // warm-up
    wrk(`${bare.base}/c`, { connections, seconds: 2, threads })
    const ok: ReturnType<typeof measure>[] = []
    const nm: ReturnType<typeof measure>[] = []
    const ceiling: WrkResult[] = []
    for (let i = 0; i < runs; i++) {
      ok.push(measure({}))
      ceiling.push(wrk(`${bare.base}/c`, { connections, seconds, threads }))
      nm.push(measure({ 'if-none-match': etag }))
    }
    bare.stop()
    const summary = (path: string, rs: ReturnType<typeof measure>[]) => {
      const row = {
        path,
        rps: Math.round(median(rs.map((r) => r.rps))),
        p50ms: median(rs.map((r) => r.p50ms)),
        p99ms: median(rs.map((r) => r.p99ms)),
        rpsPerServerCore: Math.round(median(rs.map((r) => r.rpsPerServerCore))),
        errors: rs.reduce((n, r) => n + r.errors, 0),
        runs: rs.map((r) => ({
          rps: Math.round(r.rps),
          p99ms: r.p99ms,
          serverCores: r.serverCores,
          wrkAndOtherCores: r.wrkAndOtherCores,
          load1: r.load1,
        })),
      }
      console.log(JSON.stringify(row))
      return row
    }
    const a = summary('200', ok)
    const b = summary('304', nm)
    const bareRps = Math.round(median(ceiling.map((r) => r.rps)))
    console.log(
      JSON.stringify({
        path: 'bare Bun static route, same bytes (the ceiling)',
        rps: bareRps,
        p99ms: median(ceiling.map((r) => r.p99ms)),
        runs: ceiling.map((r) => ({ rps: Math.round(r.rps), p99ms: r.p99ms })),
        liveopsShareOfCeiling: +(a.rps / bareRps).toFixed(2),
      }),
    )
    console.log(
      JSON.stringify({
        target200: a.rps >= 80_000 && a.p99ms <= 2 ? 'met' : 'missed',
        target304Faster: b.rps > a.rps ? 'met' : 'missed',
      }),
    )
  } finally {
    s.proc.kill('SIGTERM')
    await s.proc.exited
  }
}

function assignment() {
  const exp = {
    id: '0190f5a2-7c1e-7b3a-9d41-2f6c8e0a1b23',
    salt: '9f86d081884c7d65',
    config: {
      variants: [
        { name: 'control', weight: 34 },
        { name: 'variant_b', weight: 33 },
        { name: 'variant_c', weight: 33 },
      ],
    },
  }
  const users = Array.from({ length: 4096 }, (_, i) => `player-${(i * 2654435761) >>> 0}`)
  const n = 5_000_000
  const rates: number[] = []
  let sink = 0
  for (let r = 0; r < runs + 1; r++) {
    const t0 = performance.now()
    for (let i = 0; i < n; i++) if (assign(exp, users[i & 4095]) === 'control') sink++
    const rate = n / ((performance.now() - t0) / 1000)
    if (r > 0) rates.push(rate) // the first run warms the JIT up
  }
  const m = median(rates)
  console.log(
    JSON.stringify({
      path: 'assign',
      perSecond: Math.round(m),
      runs: rates.map(Math.round),
      target: m >= 3_000_000 ? 'met' : 'missed',
      sink,
    }),
  )
}

if (part === 'all' || part === 'assign') assignment()
if (part === 'all' || part === 'http') await http()
