import { afterAll, describe, expect, test } from 'bun:test'
import { createLogger } from '../../core/log'
import { makeApp } from '../../test/helpers'
import { GatewayLimiter, LocalBuckets } from './limiter'

const REDIS = process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379'
const prefix = () => `liveops-test:${crypto.randomUUID()}:`
const log = createLogger({ level: 'error', format: 'json', sensitive_fields: [] } as never)

describe('token bucket', () => {
  test('burstSize at once, then refilled at requestsPerMinute', () => {
    const b = new LocalBuckets({ requestsPerMinute: 120, burstSize: 3 })
    const t0 = 1_000_000
    expect([1, 2, 3, 4].map(() => b.take('k', t0).allowed)).toEqual([true, true, true, false])
    // 2 per second: after 500 ms one token is back, not two.
    expect(b.take('k', t0 + 500).allowed).toBe(true)
    expect(b.take('k', t0 + 500).allowed).toBe(false)
    // Other keys have their own bucket.
    expect(b.take('other', t0).allowed).toBe(true)
    // A long pause refills to the capacity, never past it.
    const later = t0 + 3_600_000
    expect([1, 2, 3, 4].map(() => b.take('k', later).allowed)).toEqual([true, true, true, false])
  })

  test('two instances on one Redis share one bucket per key', async () => {
    const s = { requestsPerMinute: 6, burstSize: 4 }
    const shared = { url: REDIS, prefix: prefix(), timeoutMs: 200, retryMs: 1000 }
    const a = new GatewayLimiter(s, log, shared)
    const b = new GatewayLimiter(s, log, shared)
    try {
      const outcome = async (l: GatewayLimiter) => {
        try {
          return (await l.hit('user:kira')).remaining
        } catch (e) {
          return (e as { status: number }).status
        }
      }
      // Four tokens in all, whichever instance takes them.
      expect([await outcome(a), await outcome(b), await outcome(a), await outcome(b)]).toEqual([3, 2, 1, 0])
      expect(await outcome(b)).toBe(429)
      expect(await outcome(a)).toBe(429)
      expect(a.mode).toBe('shared')
      expect((await a.check()).ok).toBe(true)
    } finally {
      a.close()
      b.close()
    }
  })

  test('a Redis outage degrades to the local bucket, never to refusing everything', async () => {
    const l = new GatewayLimiter({ requestsPerMinute: 60, burstSize: 2 }, log, {
      url: 'redis://127.0.0.1:1',
      prefix: prefix(),
      timeoutMs: 100,
      retryMs: 60_000,
    })
    try {
      expect((await l.hit('user:ola')).remaining).toBe(1)
      expect(l.mode).toBe('local')
      expect((await l.hit('user:ola')).remaining).toBe(0)
      await expect(l.hit('user:ola')).rejects.toMatchObject({ status: 429 })
      const c = await l.check()
      expect(c.ok).toBe(false)
      expect(c.error).toBeTruthy()
    } finally {
      l.close()
    }
  })
})

describe('the gateway limiter in the app', () => {
  const apps: Array<{ stop(): Promise<void> }> = []
  afterAll(async () => {
    for (const a of apps) await a.stop()
  })
  const app = async (redisUrl: string, p = prefix()) => {
    const a = await makeApp('sqlite', {
      plugins: {
        games: {},
        ingest: { purge_interval_minutes: 0 },
        agents: {},
        'rate-limits': {
          rateLimit: { requestsPerMinute: 30, burstSize: 3 },
          redis: { url: redisUrl, prefix: p },
        },
      },
    })
    apps.push(a)
    return a
  }

  test('every authenticated route counts against the shared bucket: 429 with Retry-After past the burst', async () => {
    const a = await app(REDIS)
    const viewer = await a.token('viewer')
    const codes: number[] = []
    for (let i = 0; i < 4; i++)
      codes.push((await a.req('GET', '/api/v1/rate-limits', { token: viewer })).status)
    expect(codes).toEqual([200, 200, 200, 429])
    const r = await a.req('GET', '/api/v1/agents', { token: viewer })
    expect(r.status).toBe(429)
    expect(Number(r.headers.get('retry-after'))).toBeGreaterThanOrEqual(1)
    expect(r.body.data).toMatchObject({ limit: 30, burst: 3 })
    // The admin token is exempt, as with core's limiter.
    expect(
      (await a.req('GET', '/api/v1/rate-limits', { headers: { 'x-admin-token': 'test-admin-token' } }))
        .status,
    ).toBe(200)
    const h = await a.req('GET', '/healthz')
    expect(h.body.checks.rate_limit_redis).toMatchObject({ status: 'up', mode: 'shared' })
  })

  test('with Redis unreachable requests are still answered and limited per instance; the check fails but is not critical', async () => {
    const a = await app('redis://127.0.0.1:1')
    const viewer = await a.token('viewer')
    const first = await a.req('GET', '/api/v1/rate-limits', { token: viewer })
    expect(first.status).toBe(200)
    expect(first.headers.get('x-ratelimit-remaining')).toBe('2')
    const h = await a.req('GET', '/healthz')
    expect(h.status).toBe(200)
    expect(h.body.checks.rate_limit_redis).toMatchObject({ status: 'down', mode: 'local' })
  })
})
