import { RedisClient } from 'bun'
import type { Db } from './db'
import { GroupCommit } from './db/group-commit'
import type { Logger } from './log'

/**
 * Short-lived state every instance sees alike: an ingestion nonce accepted by one instance is a
 * replay on all of them (and after a restart); a budget counted on one is spent on all. Redis
 * when `redis.url` is set (one round trip, atomic); otherwise the database (`liveops_shared`),
 * with concurrent claims sharing one transaction. When Redis fails, the answer comes from this
 * process alone (never a refusal of all traffic), a warning is logged, and the `redis` health
 * check (not critical) shows it down until Redis answers again.
 */
export interface SharedState {
  /** True the first time `key` is claimed within `ttlMs` by any instance; false while it holds. */
  claimOnce(key: string, ttlMs: number): Promise<boolean>
  /** Adds `by` to the counter `key` of a window of `windowMs` and answers the new total. */
  add(key: string, windowMs: number, by?: number): Promise<number>
  /** Where the state lives now: `redis`, `database`, or `memory` while Redis is down. */
  readonly backend: 'redis' | 'database' | 'memory'
  close(): Promise<void>
}

/** One process's state: the fallback while Redis is down, and what tests compare with. */
export class MemoryState {
  private entries = new Map<string, { value: number; expires: number }>()
  private sweptAt = 0

  private live(key: string, now: number) {
    if (now - this.sweptAt > 10_000) {
      this.sweptAt = now
      for (const [k, e] of this.entries) if (e.expires <= now) this.entries.delete(k)
    }
    const e = this.entries.get(key)
    return e && e.expires > now ? e : undefined
  }

  claimOnce(key: string, ttlMs: number, now = Date.now()): boolean {
    if (this.live(key, now)) return false
    this.entries.set(key, { value: 1, expires: now + ttlMs })
    return true
  }

  add(key: string, windowMs: number, by = 1, now = Date.now()): number {
    const e = this.live(key, now)
    if (e) {
      e.value += by
      return e.value
    }
    this.entries.set(key, { value: by, expires: now + windowMs })
    return by
  }
}

type Claim = { key: string; ttlMs: number; ok?: boolean }

function databaseState(db: Db) {
  // A claim succeeds when the key is new or its previous claim expired.
  const CLAIM = `INSERT INTO liveops_shared (key, value, expires_at) VALUES (?, 1, ?)
    ON CONFLICT (key) DO UPDATE SET value = 1, expires_at = excluded.expires_at WHERE liveops_shared.expires_at <= ?
    RETURNING key`
  const ADD = `INSERT INTO liveops_shared (key, value, expires_at) VALUES (?, ?, ?)
    ON CONFLICT (key) DO UPDATE SET
      value = CASE WHEN liveops_shared.expires_at <= ? THEN excluded.value ELSE liveops_shared.value + excluded.value END,
      expires_at = CASE WHEN liveops_shared.expires_at <= ? THEN excluded.expires_at ELSE liveops_shared.expires_at END
    RETURNING value`
  // Requests arriving together share one transaction: one commit for a burst of nonces.
  const claims = new GroupCommit<Claim>(
    async (items) => {
      const now = Date.now()
      await db.tx(async (tx) => {
        for (const c of items) c.ok = !!(await tx.get(CLAIM, [c.key, now + c.ttlMs, now]))
      })
    },
    { parallel: db.dialect === 'postgres' ? 2 : 1, maxWeight: 1000 },
  )
  let purged = 0
  const purge = async (now: number) => {
    if (now - purged < 60_000) return
    purged = now
    await db.run('DELETE FROM liveops_shared WHERE expires_at <= ?', [now])
  }
  return {
    async claimOnce(key: string, ttlMs: number) {
      const c: Claim = { key, ttlMs }
      await claims.add(c)
      void purge(Date.now()).catch(() => undefined)
      return c.ok === true
    },
    async add(key: string, windowMs: number, by = 1) {
      const now = Date.now()
      const row = await db.get<{ value: number | string }>(ADD, [key, by, now + windowMs, now, now])
      return Number(row?.value ?? by)
    },
  }
}

/** After a failed connection, this long passes before the next attempt (answers come from memory meanwhile). */
const RETRY_MS = 1000

function redisState(url: string) {
  // autoReconnect would make a call wait for Redis to come back; this client fails at once and
  // is replaced on the next attempt instead.
  const make = () =>
    new RedisClient(url, { connectionTimeout: 2000, autoReconnect: false, enableOfflineQueue: false })
  let client = make()
  let failedAt = 0
  // Fixed window: INCRBY, and the expiry set by the increment that created the key.
  const ADD = `local v = redis.call('INCRBY', KEYS[1], ARGV[1])
if v == tonumber(ARGV[1]) then redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return v`
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
    return client.send(cmd, args)
  }
  return {
    async claimOnce(key: string, ttlMs: number) {
      return (await call('SET', [`liveops:${key}`, '1', 'NX', 'PX', String(ttlMs)])) === 'OK'
    },
    async add(key: string, windowMs: number, by = 1) {
      return Number(await call('EVAL', [ADD, '1', `liveops:${key}`, String(by), String(windowMs)]))
    },
    close: () => client.close(),
  }
}

export function createSharedState(opts: { db: Db; redisUrl?: string; log: Logger }): SharedState {
  const memory = new MemoryState()
  if (!opts.redisUrl) {
    const d = databaseState(opts.db)
    return {
      backend: 'database',
      claimOnce: d.claimOnce,
      add: d.add,
      close: async () => undefined,
    }
  }
  const r = redisState(opts.redisUrl)
  let down = false
  const degrade = (e: unknown) => {
    if (!down)
      opts.log.warn('redis unavailable: shared limits and replay checks fall back to this instance alone', {
        error: String(e),
      })
    down = true
  }
  const recovered = () => {
    if (down) opts.log.info('redis answers again: shared state is shared again')
    down = false
  }
  const state: SharedState = {
    get backend() {
      return down ? 'memory' : 'redis'
    },
    async claimOnce(key, ttlMs) {
      try {
        const ok = await r.claimOnce(key, ttlMs)
        recovered()
        // Remembered here too, so a replay to this instance is refused during an outage later on.
        memory.claimOnce(key, ttlMs)
        return ok
      } catch (e) {
        degrade(e)
        return memory.claimOnce(key, ttlMs)
      }
    },
    async add(key, windowMs, by = 1) {
      try {
        const v = await r.add(key, windowMs, by)
        recovered()
        return v
      } catch (e) {
        degrade(e)
        return memory.add(key, windowMs, by)
      }
    },
    close: async () => r.close(),
  }
  return state
}
