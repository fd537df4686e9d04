import { RedisClient } from 'bun'
import type { Notifier } from './changes'

/**
 * Change notices through Redis pub/sub: on MySQL, when REDIS_URL is configured, instead of the
 * polled `liveops_changes` table (core/db/mysql.ts), so a notice arrives in about a millisecond
 * rather than within a poll. One connection subscribes, another publishes; a notice published
 * while Redis is down is lost, and the caches' own polling catches up (core/changes.ts).
 */
export function redisNotifier(url: string): Notifier & { close(): void } {
  const pub = new RedisClient(url, { connectionTimeout: 2000 })
  const sub = new RedisClient(url, { connectionTimeout: 2000 })
  return {
    async listen(channel, fn) {
      await sub.subscribe(channel, (message: string) => fn(message))
      return async () => {
        await sub.unsubscribe(channel).catch(() => undefined)
      }
    },
    async notify(channel, payload) {
      await pub.publish(channel, payload)
    },
    close() {
      pub.close()
      sub.close()
    },
  }
}
