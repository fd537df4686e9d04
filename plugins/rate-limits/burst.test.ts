import { afterAll, expect, test } from 'bun:test'
import { createLogger } from '../../core/log'
import { until } from '../../test/helpers'
import { tcpProxy } from '../../test/tcp-proxy'
import { GatewayLimiter } from './limiter'

/**
 * Issue 36 point 2: the shared bucket holds under bursts. 450 concurrent requests over three
 * instances got 214 through a budget of about 100 when a Redis slowed by the burst answered later
 * than the timeout and two instances counted on their own buckets. A proxy in front of the shared
 * Redis holds every reply back longer than the timeout (a slow Redis that answers everything), or
 * forwards nothing at all (a silent one).
 */
const REDIS = new URL(process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379')
const lines: string[] = []
const log = createLogger({ level: 'warn', format: 'json', sensitive_fields: [] } as never, (l) =>
  lines.push(l),
)
const proxy = tcpProxy({ hostname: REDIS.hostname, port: Number(REDIS.port || 6379) })
afterAll(() => proxy.stop())

const BURST = 100
const instances = (shared: { timeoutMs: number; downAfter: number }) => {
  const prefix = `liveops-test:${crypto.randomUUID()}:`
  const s = { requestsPerMinute: 60, burstSize: BURST }
  return [1, 2, 3].map(
    () =>
      new GatewayLimiter(s, log, {
        url: `redis://127.0.0.1:${proxy.port}`,
        prefix,
        retryMs: 60_000,
        ...shared,
      }),
  )
}
const admitted = async (l: GatewayLimiter, n: number) => {
  const out = await Promise.all(
    Array.from({ length: n }, () =>
      l.hit('user:burst').then(
        () => true,
        (e: { status?: number }) => {
          if (e.status !== 429) throw e
          return false
        },
      ),
    ),
  )
  return out.filter(Boolean).length
}

test('450 concurrent requests over three instances on a Redis answering slower than the timeout: at most the budget plus one per instance', async () => {
  proxy.set('pass')
  proxy.delay(90)
  // Every reply comes past the 50 ms timeout. Ten silent windows (500 ms) make an outage here, not
  // the default three: on a loaded machine a 90 ms reply came after three (a whole CI beside two
  // other test runs), and this test is about a slow Redis, not a silent one (the next test).
  const ls = instances({ timeoutMs: 50, downAfter: 10 })
  try {
    const through = (await Promise.all(ls.map((l) => admitted(l, 150)))).reduce((a, b) => a + b, 0)
    // The burst lasts well under a second: at most one token is refilled on top of the bucket.
    expect(through).toBeGreaterThanOrEqual(BURST)
    expect(through).toBeLessThanOrEqual(BURST + ls.length)
    expect(ls.map((l) => l.mode)).toEqual(['shared', 'shared', 'shared'])
  } finally {
    for (const l of ls) l.close()
    proxy.delay(0)
  }
}, 30_000)

test('a Redis that answers nothing is an outage after the timeouts in a row: every instance counts alone and says so', async () => {
  proxy.set('pass')
  const ls = instances({ timeoutMs: 50, downAfter: 3 })
  try {
    expect(await admitted(ls[0]!, 1)).toBe(1)
    proxy.set('blackhole')
    // Requests are answered (from the local bucket) once Redis was silent for three windows.
    expect(await admitted(ls[0]!, 5)).toBe(5)
    expect(ls[0]!.mode).toBe('local')
    expect(lines.join('\n')).toContain('Redis: no answer for')
  } finally {
    for (const l of ls) l.close()
    proxy.set('pass')
  }
}, 30_000)

test('a Redis refused from the start is down at once, not after the timeouts, and once it answers the instance shares it', async () => {
  proxy.set('refuse')
  const prefix = `liveops-test:${crypto.randomUUID()}:`
  const l = new GatewayLimiter({ requestsPerMinute: 60, burstSize: BURST }, log, {
    url: `redis://127.0.0.1:${proxy.port}`,
    prefix,
    timeoutMs: 1_000,
    downAfter: 3,
    retryMs: 50,
  })
  try {
    // Refused: the check reports the refusal, not the bound of 3 s (a client reconnecting on its
    // own had held every retry of Redis and every health read until it).
    expect(await admitted(l, 1)).toBe(1)
    expect(l.mode).toBe('local')
    const down = await l.check()
    expect(down.ok).toBe(false)
    expect(down.error).not.toContain('did not answer')
    proxy.set('pass')
    // Answering: a later request connects again and counts in the shared bucket.
    expect(await until(async () => (await admitted(l, 1)) === 1 && l.mode === 'shared', 10_000)).toBe(true)
    expect((await l.check()).ok).toBe(true)
  } finally {
    l.close()
    proxy.set('pass')
  }
}, 30_000)
