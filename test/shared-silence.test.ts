import { afterAll, expect, test } from 'bun:test'
import { createLogger } from '../core/log'
import { createSharedState } from '../core/shared'
import { rawDb, until } from './helpers'
import { tcpProxy } from './tcp-proxy'

/**
 * Issue 36 point 2, core's side: Redis commands have no deadline of their own, so a Redis that
 * went silent (a blackholed network, not a refused connection) held every request that counts a
 * budget, claims a nonce or checks a lockout. Now silence for three windows is an outage: this
 * process counts alone, says so, and shares again once Redis answers.
 */
const REDIS = new URL(process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379')
const proxy = tcpProxy({ hostname: REDIS.hostname, port: Number(REDIS.port || 6379) })
afterAll(() => proxy.stop())

test('a silent Redis: shared state answers from this process within a few windows, warns, and is shared again when Redis answers', async () => {
  const lines: string[] = []
  const { db, done } = await rawDb('sqlite')
  const state = createSharedState({
    db,
    redisUrl: `redis://127.0.0.1:${proxy.port}`,
    log: createLogger({ level: 'info', format: 'json', sensitive_fields: [] } as never, (l) => lines.push(l)),
  })
  const key = `silence:${crypto.randomUUID()}`
  try {
    expect(await state.add(key, 60_000)).toBe(1)
    expect(state.backend).toBe('redis')
    proxy.set('blackhole')
    // Answered (from memory, which counts from zero) instead of waiting for Redis for ever.
    expect(await state.add(key, 60_000)).toBe(1)
    expect(state.backend).toBe('memory')
    expect(lines.join('\n')).toContain('redis: no answer for')
    proxy.set('pass')
    await until(
      async () => {
        await state.add(key, 60_000)
        if (state.backend === 'redis') return true
        await Bun.sleep(100)
      },
      { ms: 10_000, what: 'Redis shared again' },
    )
    expect(lines.join('\n')).toContain('redis answers again')
  } finally {
    await state.close()
    await done()
  }
}, 30_000)
