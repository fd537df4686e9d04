import { RedisClient } from 'bun'
import type { Notifier } from './changes'

/** The pause before subscribing again after Redis refused or dropped the subscription. */
const RETRY_MS = 1000

/**
 * Change notices through Redis pub/sub: on MySQL, when REDIS_URL is configured, instead of the
 * polled `liveops_changes` table (core/db/mysql.ts), so a notice arrives in about a millisecond
 * rather than within a poll. One connection subscribes, another publishes; a notice published
 * while Redis is down is lost, and the caches' own polling catches up (core/changes.ts).
 *
 * Redis being down never holds up the app: `listen` resolves after one attempt (subscribed when
 * Redis answers), and a failed or dropped subscription is made again in the background, on a new
 * connection every second until it holds (Bun's client itself retried for ~35 s before failing
 * the first `subscribe`, and a server on MySQL with Redis down did not start meanwhile).
 */
export function redisNotifier(url: string): Notifier & { close(): void } {
  // Connected again by each notice when the last connection is gone: with the client's own
  // reconnecting a notice published while Redis refused waited ~35 s to fail.
  const pub = new RedisClient(url, { connectionTimeout: 2000, autoReconnect: false, maxRetries: 0 })
  const channels = new Map<string, (payload: string) => void>()
  let sub: RedisClient | undefined
  let closed = false
  let retry: ReturnType<typeof setTimeout> | undefined

  const again = () => {
    sub?.close()
    sub = undefined
    clearTimeout(retry)
    if (!closed) retry = setTimeout(() => void connect(), RETRY_MS)
  }
  /** One attempt at subscribing every channel; resolves when it held or failed (within ~2 s). */
  const connect = async () => {
    if (closed || sub || !channels.size) return
    const client = new RedisClient(url, { connectionTimeout: 2000, autoReconnect: false, maxRetries: 0 })
    sub = client
    client.onclose = () => {
      if (sub === client) again()
    }
    await Promise.all(
      [...channels].map(([channel, fn]) => client.subscribe(channel, (m: string) => fn(m))),
    ).catch(() => {
      if (sub === client) again()
    })
  }
  return {
    async listen(channel, fn) {
      channels.set(channel, fn)
      // Subscribed before it resolves when Redis answers; otherwise the retries go on behind.
      if (sub) await sub.subscribe(channel, (m: string) => fn(m)).catch(() => undefined)
      else await connect()
      return async () => {
        channels.delete(channel)
        if (sub?.connected) await sub.unsubscribe(channel).catch(() => undefined)
      }
    },
    async notify(channel, payload) {
      if (!pub.connected) await pub.connect()
      await pub.publish(channel, payload)
    },
    close() {
      closed = true
      clearTimeout(retry)
      pub.close()
      sub?.close()
    },
  }
}
