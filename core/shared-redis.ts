import { RedisClient } from 'bun'
import { BUCKET_SCRIPT } from './ratelimit'
import type { Ops } from './shared'
import { SilenceWatch } from './silence'

/** After a failed connection, this long passes before the next attempt (answers come from memory meanwhile). */
const RETRY_MS = 1000

/** The shared state in Redis: one round trip per call, atomic (scripts for counters and buckets). */
export function redisState(url: string): Ops & { close(): void } {
  // autoReconnect would make a call wait for Redis to come back; this client fails at once and
  // is replaced on the next attempt instead.
  const make = () =>
    new RedisClient(url, { connectionTimeout: 2000, autoReconnect: false, enableOfflineQueue: false })
  let client = make()
  let failedAt = 0
  // Redis answers commands without a deadline of its own: a silent one would hold every request.
  const watch = new SilenceWatch(100, 3)
  // Fixed windows: INCRBY, and the expiry set by the increment that created the key (or by each
  // increment when the last argument asks the windows to slide).
  const ADD = `local out = {}
local slide = ARGV[#ARGV] == '1'
for i, k in ipairs(KEYS) do
  local v = redis.call('INCRBY', k, ARGV[2 * i - 1])
  if slide or redis.call('PTTL', k) < 0 then redis.call('PEXPIRE', k, ARGV[2 * i]) end
  out[i] = v
end
return out`
  const call = async (cmd: string, args: string[]) => {
    if (!client.connected) {
      if (Date.now() - failedAt < RETRY_MS)
        throw new Error('redis: waiting before the next connection attempt')
      try {
        if (failedAt) {
          client.close()
          client = make()
        }
        await client.connect()
        failedAt = 0
      } catch (e) {
        failedAt = Date.now()
        throw e
      }
    }
    try {
      const out = await watch.wait(client.send(cmd, args))
      return out
    } catch (e) {
      // Silent (not slow): this connection is given up and the next attempt waits a while, so
      // requests meanwhile are answered from memory at once instead of each waiting its windows.
      if (/^no answer for/.test((e as Error).message)) {
        failedAt = Date.now()
        client.close()
        client = make()
        throw new Error(`redis: ${(e as Error).message}`)
      }
      throw e
    }
  }
  const k = (key: string) => `liveops:${key}`
  return {
    async claimOnce(key, ttlMs) {
      return (await call('SET', [k(key), '1', 'NX', 'PX', String(ttlMs)])) === 'OK'
    },
    async addAll(counts, opts = {}) {
      const args = counts.flatMap((c) => [String(c.by ?? 1), String(c.windowMs)])
      const out = await call('EVAL', [
        ADD,
        String(counts.length),
        ...counts.map((c) => k(c.key)),
        ...args,
        opts.slide ? '1' : '0',
      ])
      return (out as unknown[]).map(Number)
    },
    async get(keys) {
      const out = (await call('MGET', keys.map(k))) as Array<string | null>
      return out.map((v) => (v === null ? undefined : Number(v)))
    },
    async put(key, value, ttlMs) {
      await call('SET', [k(key), String(Math.round(value)), 'PX', String(ttlMs)])
    },
    async remove(keys) {
      if (keys.length) await call('DEL', keys.map(k))
    },
    async take(key, s) {
      const perMs = String(s.requestsPerMinute / 60_000)
      const [allowed, tokens] = (await call('EVAL', [
        BUCKET_SCRIPT,
        '1',
        k(key),
        perMs,
        String(s.burstSize),
      ])) as [number, string]
      return { allowed: Number(allowed) === 1, tokens: Number(tokens) }
    },
    close: () => client.close(),
  }
}
