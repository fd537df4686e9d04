#!/usr/bin/env bun
/**
 * Operations center figures (issue #19):
 * - the Prometheus exposition with 10,000 series (the request histogram, agent and check series),
 *   rendered through the app's registry as `/metrics/prometheus` does; target <= 15 ms;
 * - what the shared Redis gateway limiter adds at p99 to an authenticated request, against the
 *   same app with the per-instance bucket; target <= 0.5 ms. Needs Redis at REDIS_URL
 *   (default redis://127.0.0.1:6379).
 *
 *   bun scripts/bench/ops.ts [--requests=4000] [--renders=40]
 */
import { rmSync } from 'node:fs'
import { join } from 'node:path'
import { stringify } from 'yaml'
import { createApp } from '../../core/app'
import { loadConfig } from '../../core/config'
import { createLogger } from '../../core/log'
import { plugins } from '../../plugins'
import { arg, median, tempDir } from './lib'

const REDIS = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379'
const requests = Number(arg('requests', '4000'))
const renders = Number(arg('renders', '40'))

const pct = (xs: number[], p: number) =>
  [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(xs.length * p))]
const round = (ms: number) => Math.round(ms * 1000) / 1000

async function app(pluginSettings: Record<string, unknown>) {
  const dir = tempDir('liveops-ops-bench-')
  const yaml = stringify({
    data_dir: dir,
    database: { url: join(dir, 'bench.sqlite') },
    auth: { jwt_secret: 'bench-secret', admin_token: '' },
    admin: { email: 'admin@localhost', password: 'bench-password' },
    rate_limit: { requests_per_minute: 1_000_000_000, burst: 1_000_000_000 },
    log: { level: 'error' },
    telemetry: { prometheus: { enabled: true } },
    plugins: {
      games: {},
      ingest: { purge_interval_minutes: 0 },
      agents: {},
      'ops-alerts': { eval_interval_s: 0 },
      ...pluginSettings,
    },
  })
  const built = await createApp(loadConfig(yaml, plugins, {}), {
    plugins,
    log: createLogger({ level: 'error', format: 'json', sensitive_fields: [] } as never),
  })
  return {
    built,
    stop: async () => {
      await built.stop()
      rmSync(dir, { recursive: true, force: true })
    },
  }
}

// --- Prometheus text with 10,000 series -------------------------------------------------------
async function exposition() {
  const { built, stop } = await app({ 'rate-limits': {} })
  try {
    // 10,000 series of the kind a big fleet produces: per agent, per route.
    const g = built.metrics.gauge('svc_bench_agent_qps', 'bench: a per-agent gauge', [
      'agent_id',
      'game_id',
      'env',
    ])
    for (let i = 0; i < 10_000; i++)
      g.set({ agent_id: `agent-${i}`, game_id: `game-${i % 50}`, env: 'prod' }, i)
    const series = (await built.metrics.text()).split('\n').filter((l) => l && !l.startsWith('#')).length
    const times: number[] = []
    for (let i = 0; i < renders; i++) {
      const t0 = performance.now()
      const res = await built.app.handle(new Request('http://localhost/metrics/prometheus'))
      await res.text()
      times.push(performance.now() - t0)
    }
    return {
      series,
      renderMsMedian: round(median(times)),
      renderMsP99: round(pct(times, 0.99)),
      targetMs: 15,
    }
  } finally {
    await stop()
  }
}

// --- the Redis limiter's cost on an authenticated request --------------------------------------
async function latency(redisUrl: string) {
  const { built, stop } = await app({
    'rate-limits': {
      rateLimit: { requestsPerMinute: 100_000_000, burstSize: 100_000_000 },
      redis: { url: redisUrl, prefix: `liveops-bench:${crypto.randomUUID()}:` },
    },
  })
  try {
    const user = await built.auth.createUser({
      email: 'bench@x.test',
      username: 'bench',
      password: 'password-123',
      roles: ['viewer'],
    })
    const token = built.auth.accessToken(user)
    const req = () =>
      new Request('http://localhost/api/v1/rate-limits', { headers: { authorization: `Bearer ${token}` } })
    for (let i = 0; i < 500; i++) await (await built.app.handle(req())).text()
    const times: number[] = []
    for (let i = 0; i < requests; i++) {
      const t0 = performance.now()
      const res = await built.app.handle(req())
      await res.text()
      if (res.status !== 200) throw new Error(`bench request answered ${res.status}`)
      times.push(performance.now() - t0)
    }
    return { p50: pct(times, 0.5), p99: pct(times, 0.99) }
  } finally {
    await stop()
  }
}

/** A bare Redis round trip (PING) from this process: what any shared limiter must pay at least. */
async function redisRoundTrip() {
  const { RedisClient } = await import('bun')
  const r = new RedisClient(REDIS)
  await r.connect()
  const times: number[] = []
  for (let i = 0; i < requests; i++) {
    const t0 = performance.now()
    await r.send('PING', [])
    times.push(performance.now() - t0)
  }
  r.close()
  return { p50: pct(times, 0.5), p99: pct(times, 0.99) }
}

const prom = await exposition()
const ping = await redisRoundTrip()
// Alternate the two to spread the shared machine's noise over both.
const local: Array<{ p50: number; p99: number }> = []
const shared: Array<{ p50: number; p99: number }> = []
for (let i = 0; i < 3; i++) {
  local.push(await latency(''))
  shared.push(await latency(REDIS))
}
const med = (xs: Array<{ p50: number; p99: number }>, k: 'p50' | 'p99') => median(xs.map((x) => x[k]))
console.log(
  JSON.stringify(
    {
      loadAverage: (await Bun.file('/proc/loadavg').text()).split(' ').slice(0, 3).join(' '),
      prometheus: prom,
      limiter: {
        requests,
        localP50Ms: round(med(local, 'p50')),
        localP99Ms: round(med(local, 'p99')),
        redisP50Ms: round(med(shared, 'p50')),
        redisP99Ms: round(med(shared, 'p99')),
        addedP50Ms: round(med(shared, 'p50') - med(local, 'p50')),
        addedP99Ms: round(med(shared, 'p99') - med(local, 'p99')),
        redisPingP50Ms: round(ping.p50),
        redisPingP99Ms: round(ping.p99),
        targetAddedP99Ms: 0.5,
      },
    },
    null,
    2,
  ),
)
