import { afterAll, expect, test } from 'bun:test'
import { redisNotifier } from '../../core/changes-redis'
import { until } from '../helpers'
import { tcpProxy } from '../tcp-proxy'

// Change notices through Redis (core/changes-redis.ts) while Redis refuses connections: a notice
// fails at once (core/changes.ts logs it; other instances catch up by polling) instead of waiting
// for the client's own reconnecting, and notices travel again once Redis answers.
const REDIS = new URL(process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379')
const proxy = tcpProxy({ hostname: REDIS.hostname, port: Number(REDIS.port || 6379) })
afterAll(() => proxy.stop())

test('a notice while Redis refuses fails at once; once Redis answers, notices travel again', async () => {
  proxy.set('refuse')
  const channel = `liveops-test-${crypto.randomUUID()}`
  const sender = redisNotifier(`redis://127.0.0.1:${proxy.port}`)
  const receiver = redisNotifier(REDIS.toString())
  const heard: string[] = []
  try {
    await receiver.listen(channel, (p) => heard.push(p))
    // Within bun's 5 s test limit: the client's own reconnecting had held this ~35 s.
    await expect(sender.notify(channel, 'while refused')).rejects.toBeDefined()
    proxy.set('pass')
    expect(
      await until(async () => {
        await sender.notify(channel, 'answered').catch(() => undefined)
        return heard.includes('answered')
      }, 5_000),
    ).toBe(true)
    expect(heard).not.toContain('while refused')
  } finally {
    sender.close()
    receiver.close()
    proxy.set('pass')
  }
})
