import type { Db } from './db'
import { GroupCommit } from './db/group-commit'
import type { Logger } from './log'
import { type BucketSettings, LocalBuckets, type Take } from './ratelimit'
import { redisState } from './shared-redis'

/** One counter of an `addAll`: `by` (1 when absent) added to `key`, whose window is `windowMs`. */
export interface Count {
  key: string
  windowMs: number
  by?: number
}

/**
 * Short-lived state every instance sees alike: an ingestion nonce accepted by one instance is a
 * replay on all of them (and after a restart); a budget counted on one is spent on all; a login
 * lockout started on one holds on all. Redis when `redis.url` is set (one round trip per call,
 * atomic); otherwise the database (`liveops_shared`), with concurrent claims sharing one
 * transaction. When Redis fails, the answer comes from this process alone (never a refusal of all
 * traffic), a warning is logged, and the `redis` health check (not critical) shows it down until
 * Redis answers again; then the state is shared again.
 */
export interface SharedState {
  /** True the first time `key` is claimed within `ttlMs` by any instance; false while it holds. */
  claimOnce(key: string, ttlMs: number): Promise<boolean>
  /** Adds `by` to the counter `key` of a window of `windowMs` and answers the new total. */
  add(key: string, windowMs: number, by?: number): Promise<number>
  /**
   * Several counters in one round trip, the new totals in order (keys distinct). A window starts
   * with the add that creates its counter; with `slide`, every add starts it again (the counter
   * is forgotten a window after its last add).
   */
  addAll(counts: Count[], opts?: { slide?: boolean }): Promise<number[]>
  /** The values of `keys` (undefined when absent or expired), in one round trip. */
  get(keys: string[]): Promise<Array<number | undefined>>
  /** Sets `key` to `value` for `ttlMs`. */
  put(key: string, value: number, ttlMs: number): Promise<void>
  /** Forgets `keys`. */
  remove(keys: string[]): Promise<void>
  /**
   * Takes one token from the bucket `key` (`burstSize` tokens, refilled at `requestsPerMinute`),
   * atomically: in Redis by script with Redis's clock, in the database by one upsert statement
   * with this instance's clock (instances' clocks must agree within what a token is worth).
   */
  take(key: string, bucket: BucketSettings): Promise<Take>
  /** Where the state lives now: `redis`, `database`, or `memory` while Redis is down. */
  readonly backend: 'redis' | 'database' | 'memory'
  close(): Promise<void>
}

/** The operations a backend provides; `createSharedState` adds the fallback and the backend name. */
export type Ops = Omit<SharedState, 'backend' | 'close' | 'add'>

/** One process's state: the fallback while Redis is down, and what tests compare with. */
export class MemoryState {
  private entries = new Map<string, { value: number; expires: number }>()
  private buckets = new Map<string, LocalBuckets>()
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

  add(key: string, windowMs: number, by = 1, now = Date.now(), slide = false): number {
    const e = this.live(key, now)
    if (e) {
      e.value += by
      if (slide) e.expires = now + windowMs
      return e.value
    }
    this.entries.set(key, { value: by, expires: now + windowMs })
    return by
  }

  addAll(counts: Count[], opts: { slide?: boolean } = {}, now = Date.now()): number[] {
    return counts.map((c) => this.add(c.key, c.windowMs, c.by ?? 1, now, opts.slide))
  }

  get(keys: string[], now = Date.now()): Array<number | undefined> {
    return keys.map((k) => this.live(k, now)?.value)
  }

  put(key: string, value: number, ttlMs: number, now = Date.now()): void {
    this.entries.set(key, { value, expires: now + ttlMs })
  }

  remove(keys: string[]): void {
    for (const k of keys) this.entries.delete(k)
  }

  take(key: string, s: BucketSettings, now = Date.now()): Take {
    const id = `${s.requestsPerMinute}/${s.burstSize}`
    let b = this.buckets.get(id)
    if (!b) {
      b = new LocalBuckets(s)
      this.buckets.set(id, b)
    }
    return b.take(key, now)
  }
}

type Claim = { key: string; ttlMs: number; ok?: boolean }
type Adding = { counts: Count[]; slide: boolean; out?: number[] }

/** Tokens are stored in thousandths, twice over, with the last take's outcome in the low bit. */
const MILLI = 1000

/**
 * The token bucket as one upsert: the row's `expires_at` is the last take plus the time the bucket
 * needs to fill (`?3`), so an expired row is a full bucket and the last take's time is
 * `expires_at - ?3`. `value` is `tokens x 1000 x 2 + taken`. Parameters: now, capacity in
 * thousandths, time to fill, thousandths per millisecond, the new row's value.
 */
function bucketSql(dialect: Db['dialect']) {
  const now = 'CAST(?1 AS BIGINT)'
  const cap = 'CAST(?2 AS BIGINT)'
  const elapsed = `(${now} - liveops_shared.expires_at + CAST(?3 AS BIGINT))`
  const refilled = `liveops_shared.value / 2 + CAST((CASE WHEN ${elapsed} < 0 THEN 0 ELSE ${elapsed} END) * CAST(?4 AS DOUBLE PRECISION) AS BIGINT)`
  const tokens = `(CASE WHEN liveops_shared.expires_at <= ${now} THEN ${cap} WHEN ${refilled} > ${cap} THEN ${cap} ELSE ${refilled} END)`
  const sql = `INSERT INTO liveops_shared (key, value, expires_at) VALUES (?6, CAST(?5 AS BIGINT), ${now} + CAST(?3 AS BIGINT))
    ON CONFLICT (key) DO UPDATE SET
      value = CASE WHEN ${tokens} >= ${MILLI} THEN (${tokens} - ${MILLI}) * 2 + 1 ELSE ${tokens} * 2 END,
      expires_at = excluded.expires_at
    RETURNING value`
  if (dialect === 'postgres') return sql.replace(/\?(\d)/g, '$$$1')
  // MySQL's `/` divides exactly (a DECIMAL); the others' divides integers.
  if (dialect === 'mysql') return sql.replaceAll('liveops_shared.value / 2', 'liveops_shared.value DIV 2')
  return sql
}

function databaseState(db: Db, counters: Db = db): Ops {
  // A claim succeeds when the key is new or its previous claim expired: the keys a statement
  // returns are the claims it won. `rows` rows a statement, a power of two (few statement texts).
  const claimRows = (
    rows: number,
  ) => `INSERT INTO liveops_shared (key, value, expires_at) VALUES ${Array(rows).fill('(?, 1, ?)').join(', ')}
    ON CONFLICT (key) DO UPDATE SET value = 1, expires_at = excluded.expires_at WHERE liveops_shared.expires_at <= ?
    RETURNING key, expires_at`
  const upsert = (rows: number, slide: boolean) =>
    `INSERT INTO liveops_shared (key, value, expires_at) VALUES ${Array(rows).fill('(?, ?, ?)').join(', ')}
    ON CONFLICT (key) DO UPDATE SET
      value = CASE WHEN liveops_shared.expires_at <= ? THEN excluded.value ELSE liveops_shared.value + excluded.value END,
      expires_at = ${slide ? 'excluded.expires_at' : 'CASE WHEN liveops_shared.expires_at <= ? THEN excluded.expires_at ELSE liveops_shared.expires_at END'}
    RETURNING key, value`
  const TAKE = bucketSql(db.dialect)
  const inList = (n: number) => Array(n).fill('?').join(', ')
  // Requests arriving together share one transaction: one commit for a burst of nonces. On
  // PostgreSQL through `counters`, which commits without waiting for the WAL flush: a claim only
  // guards a request that is acknowledged once its own writes commit durably afterwards, and that
  // later flush writes out the WAL up to its own commit, the claim's included. A crash before it
  // forgets only claims of requests that were never acknowledged (their retries are then accepted,
  // as they should be). Each request no longer waits for an fsync of its own claim (wave 3, eighth session).
  // Each key is claimed once per group (a repeat within it is a replay), in key order, by
  // multi-row statements: one round trip for a burst, where one statement a claim kept a
  // PostgreSQL transaction open across as many round trips.
  const claims = new GroupCommit<Claim>(
    async (items) => {
      const now = Date.now()
      const first = new Map<string, Claim>()
      for (const c of items) {
        if (first.has(c.key)) c.ok = false
        else first.set(c.key, c)
      }
      const keys = [...first.keys()].sort()
      const won = new Set<string>()
      for (let at = 0; at < keys.length; ) {
        const size = Math.min(512, 2 ** Math.floor(Math.log2(keys.length - at)))
        const chunk = keys.slice(at, at + size)
        at += size
        const params: Array<string | number> = chunk.flatMap((k) => [k, now + first.get(k)!.ttlMs])
        params.push(now)
        // A won claim's row holds this claim's expiry. (SQLite and PostgreSQL return only the rows
        // written; MySQL returns the rows its WHERE kept as they were too.)
        for (const r of await counters.all<{ key: string; expires_at: number }>(claimRows(size), params))
          if (Number(r.expires_at) === now + first.get(r.key)!.ttlMs) won.add(r.key)
      }
      for (const [key, c] of first) c.ok = won.has(key)
    },
    { parallel: counters.dialect === 'postgres' ? 2 : 1, maxWeight: 1000 },
  )
  // Counters of requests arriving together share one statement: one row per key with the sum of
  // their additions, in key order (two batches never wait on each other's rows crosswise). Each
  // caller's total is the row's new value less what the callers after it added.
  const adds = new GroupCommit<Adding>(
    async (items) => {
      const now = Date.now()
      for (const slide of [false, true]) {
        const group = items.filter((i) => i.slide === slide)
        if (!group.length) continue
        const sums = new Map<string, { by: number; windowMs: number }>()
        for (const i of group)
          for (const c of i.counts) {
            const sum = sums.get(c.key)
            if (sum) sum.by += c.by ?? 1
            else sums.set(c.key, { by: c.by ?? 1, windowMs: c.windowMs })
          }
        const keys = [...sums.keys()].sort()
        const params: Array<string | number> = keys.flatMap((k) => [
          k,
          sums.get(k)!.by,
          now + sums.get(k)!.windowMs,
        ])
        params.push(now)
        if (!slide) params.push(now)
        const rows = await counters.all<{ key: string; value: number | string }>(
          upsert(keys.length, slide),
          params,
        )
        const value = new Map(rows.map((r) => [r.key, Number(r.value)]))
        const after = new Map<string, number>()
        for (let n = group.length - 1; n >= 0; n--)
          group[n]!.out = group[n]!.counts.map((c) => {
            const later = after.get(c.key) ?? 0
            after.set(c.key, later + (c.by ?? 1))
            return (value.get(c.key) ?? 0) - later
          })
      }
    },
    { parallel: counters.dialect === 'postgres' ? 2 : 1, maxWeight: 1000, weight: (i) => i.counts.length },
  )
  let purged = 0
  const purge = (now: number) => {
    if (now - purged < 60_000) return
    purged = now
    void db.run('DELETE FROM liveops_shared WHERE expires_at <= ?', [now]).catch(() => undefined)
  }
  return {
    async claimOnce(key, ttlMs) {
      const c: Claim = { key, ttlMs }
      await claims.add(c)
      purge(Date.now())
      return c.ok === true
    },
    async addAll(counts, opts = {}) {
      purge(Date.now())
      const item: Adding = { counts, slide: !!opts.slide }
      await adds.add(item)
      return item.out!
    },
    async get(keys) {
      const rows = await counters.all<{ key: string; value: number | string }>(
        `SELECT key, value FROM liveops_shared WHERE key IN (${inList(keys.length)}) AND expires_at > ?`,
        [...keys, Date.now()],
      )
      const by = new Map(rows.map((r) => [r.key, Number(r.value)]))
      return keys.map((k) => by.get(k))
    },
    async put(key, value, ttlMs) {
      const now = Date.now()
      purge(now)
      await counters.run(
        `INSERT INTO liveops_shared (key, value, expires_at) VALUES (?, ?, ?)
         ON CONFLICT (key) DO UPDATE SET value = excluded.value, expires_at = excluded.expires_at`,
        [key, Math.round(value), now + ttlMs],
      )
    },
    async remove(keys) {
      if (keys.length)
        await counters.run(`DELETE FROM liveops_shared WHERE key IN (${inList(keys.length)})`, keys)
    },
    async take(key, s) {
      const now = Date.now()
      purge(now)
      const perMs = s.requestsPerMinute / 60_000
      const cap = Math.round(s.burstSize * MILLI)
      const fill = Math.ceil(s.burstSize / perMs) + 1000
      const first = cap >= MILLI ? (cap - MILLI) * 2 + 1 : cap * 2
      const row = await counters.get<{ value: number | string }>(TAKE, [
        now,
        cap,
        fill,
        perMs * MILLI,
        first,
        key,
      ])
      const v = Number(row?.value ?? 0)
      return { allowed: v % 2 === 1, tokens: Math.floor(v / 2) / MILLI }
    },
  }
}

export function createSharedState(opts: {
  db: Db
  /**
   * Where counters, locks and buckets are written (default `db`): on PostgreSQL a small pool that
   * commits without waiting for the WAL flush, for claims (nonces) too (see `databaseState`).
   */
  counters?: Db
  redisUrl?: string
  log: Logger
}): SharedState {
  if (!opts.redisUrl) {
    const d = databaseState(opts.db, opts.counters)
    return {
      ...d,
      backend: 'database',
      add: async (key, windowMs, by = 1) => (await d.addAll([{ key, windowMs, by }]))[0]!,
      close: async () => undefined,
    }
  }
  const memory = new MemoryState()
  const r = redisState(opts.redisUrl)
  let down = false
  /** Redis's answer, or this process's alone while Redis does not answer. */
  const either = async <T>(remote: () => Promise<T>, local: () => T): Promise<T> => {
    try {
      const v = await remote()
      if (down) opts.log.info('redis answers again: shared state is shared again')
      down = false
      return v
    } catch (e) {
      if (!down)
        opts.log.warn('redis unavailable: shared limits and replay checks fall back to this instance alone', {
          error: String(e),
        })
      down = true
      return local()
    }
  }
  const state: SharedState = {
    get backend() {
      return down ? 'memory' : 'redis'
    },
    claimOnce: (key, ttlMs) =>
      either(
        async () => {
          const ok = await r.claimOnce(key, ttlMs)
          // Remembered here too, so a replay to this instance is refused during an outage later on.
          memory.claimOnce(key, ttlMs)
          return ok
        },
        () => memory.claimOnce(key, ttlMs),
      ),
    add: async (key, windowMs, by = 1) => (await state.addAll([{ key, windowMs, by }]))[0]!,
    addAll: (counts, o) =>
      either(
        () => r.addAll(counts, o),
        () => memory.addAll(counts, o),
      ),
    get: (keys) =>
      either(
        () => r.get(keys),
        () => memory.get(keys),
      ),
    put: (key, value, ttlMs) =>
      either(
        () => r.put(key, value, ttlMs),
        () => memory.put(key, value, ttlMs),
      ),
    remove: (keys) =>
      either(
        () => r.remove(keys),
        () => memory.remove(keys),
      ),
    take: (key, s) =>
      either(
        () => r.take(key, s),
        () => memory.take(key, s),
      ),
    close: async () => r.close(),
  }
  return state
}
