import { redisNotifier } from './changes-redis'
import { type Db, isMysqlUrl } from './db'
import type { Logger } from './log'

/**
 * Change notices between instances sharing one store: a plugin that changed something other
 * instances cache (a game, an experiment, a channel) publishes a topic, and every instance's
 * subscribers hear it (this instance's at once; the others' through PostgreSQL LISTEN/NOTIFY,
 * typically within a few milliseconds). Polling stays only as a safety net for a notice lost
 * while a connection was down. On SQLite (one instance) notices stay in the process.
 */
export type ChangeDetail = Record<string, string | number | boolean | null | undefined>
type Listener = (detail: ChangeDetail, origin: 'local' | 'remote') => void | Promise<void>

export interface Changes {
  /** Tells every instance that `topic` changed; resolves once sent (never rejects). */
  publish(topic: string, detail?: ChangeDetail): Promise<void>
  /** Hears `topic` from this instance and the others; returns the unsubscribe. */
  on(topic: string, fn: Listener): () => void
}

/** What the PostgreSQL facade offers for notices (core/db/postgres.ts). */
export interface Notifier {
  listen(channel: string, fn: (payload: string) => void): Promise<() => Promise<void>>
  notify(channel: string, payload: string): Promise<void>
}

export function hasNotifier(db: Db): db is Db & Notifier {
  return typeof (db as Partial<Notifier>).listen === 'function'
}

/** Where change notices are heard: the PostgreSQL schema, or a MySQL server's database (host, port, name). */
export function changeNamespace(url: string | undefined, schema: string | undefined): string {
  if (schema) return schema
  if (!isMysqlUrl(url)) return 'public'
  const u = new URL(url!)
  return `${u.hostname}_${u.port}_${u.pathname.slice(1)}`
}

/**
 * `redisUrl` on MySQL carries the notices through Redis pub/sub (core/changes-redis.ts) instead of
 * the polled table; `namespace` then names the database (Redis is shared wider than one store).
 */
export async function createChanges(
  store: Db,
  log: Logger,
  namespace: string,
  redisUrl?: string,
): Promise<Changes & { close(): Promise<void> }> {
  const redis = redisUrl && store.dialect === 'mysql' ? redisNotifier(redisUrl) : undefined
  const notifier: Notifier | undefined = redis ?? (hasNotifier(store) ? store : undefined)
  const self = Bun.randomUUIDv7()
  const listeners = new Map<string, Set<Listener>>()
  // One channel per store namespace (the PostgreSQL schema): apps on other schemas of the same
  // database never hear each other.
  const channel = `liveops_${namespace.replace(/[^a-zA-Z0-9_]/g, '_')}`.slice(0, 63)
  const deliver = (topic: string, detail: ChangeDetail, origin: 'local' | 'remote') => {
    for (const fn of listeners.get(topic) ?? []) {
      Promise.resolve()
        .then(() => fn(detail, origin))
        .catch((e) => log.error('change listener failed', { topic, error: String(e) }))
    }
  }
  let unlisten: (() => Promise<void>) | undefined
  if (notifier)
    unlisten = await notifier.listen(channel, (payload) => {
      try {
        const m = JSON.parse(payload) as { o: string; t: string; d: ChangeDetail }
        if (m.o !== self) deliver(m.t, m.d ?? {}, 'remote')
      } catch (e) {
        log.warn('unreadable change notice', { error: String(e) })
      }
    })
  return {
    async publish(topic, detail = {}) {
      deliver(topic, detail, 'local')
      if (!notifier) return
      try {
        // NOTIFY payloads are limited to 8000 bytes: a notice names what changed, never carries it.
        await notifier.notify(channel, JSON.stringify({ o: self, t: topic, d: detail }))
      } catch (e) {
        log.warn('change notice not sent; other instances catch up by polling', { topic, error: String(e) })
      }
    },
    on(topic, fn) {
      const set = listeners.get(topic) ?? new Set()
      listeners.set(topic, set)
      set.add(fn)
      return () => set.delete(fn)
    },
    async close() {
      await unlisten?.()
      redis?.close()
    },
  }
}
