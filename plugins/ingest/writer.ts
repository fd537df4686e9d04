import type { Db, Param } from '../../core/db'
import type { Logger } from '../../core/log'
import { HyperLogLog } from './hll'
import { persist } from './persist'
import { DAY, HOUR, MINUTE, floorTo } from './sql'
import { type NormEvent, pick, str } from './validate'

const DAU_EVENTS = new Set(['login', 'session_start'])
/**
 * Top-level fields whose columns hold them exactly are left out of `props` (a smaller row is a
 * smaller WAL); everything else, including what was promoted from `attrs`, stays.
 */
const COLUMN_FIELDS = new Set(['event', 'ts', 'game_id', 'env'])

function propsJson(raw: Record<string, unknown>): string {
  const out: Record<string, unknown> = {}
  for (const k in raw) if (!COLUMN_FIELDS.has(k)) out[k] = raw[k]
  return JSON.stringify(out)
}
const ONLINE_EVENTS = new Set(['heartbeat', 'session_start'])
/** Largest transaction; a bigger backlog is committed in several. */
const MAX_ROWS_PER_TX = 20_000
/** Bounded membership caches: clearing one only costs a few redundant conflict checks. */
const CACHE_CAP = 2_000_000
const SKETCH_CAP = 4096

export const histBucket = (ms: number) => Math.round(Math.log1p(Math.max(0, ms)) / Math.log(1.05))
export const histValue = (bucket: number) => Math.expm1(bucket * Math.log(1.05))

const sep = '\u0001'
// Template literals, not rest arguments and join: this runs several times per event.
const key = (a: string, b: string, c: string | number, d?: string | number) =>
  d === undefined ? `${a}${sep}${b}${sep}${c}` : `${a}${sep}${b}${sep}${c}${sep}${d}`
const s = str

interface Pending {
  events: NormEvent[]
  resolve: () => void
  reject: (e: unknown) => void
}

/**
 * Group commit (performance note 2): requests hand their events over and wait; one writer
 * drains everything queued into a single transaction that also maintains the rollups, then
 * acknowledges every request in it. Under load the next transaction collects what arrived while
 * the previous one ran, so batches grow with the load and the event loop never waits on a lock.
 */
export class GroupWriter {
  private pending: Pending[] = []
  private active = 0
  private scheduled = false
  private idleWaiters: Array<() => void> = []
  private ready: Promise<void> | undefined
  /** Commits in flight at once: SQLite has one writer anyway; PostgreSQL overlaps round trips and fsyncs. */
  private readonly concurrency: number
  private seen = new Set<string>()
  private userDays = new Set<string>()
  private exposed = new Set<string>()
  private sketches = new Map<string, { h: HyperLogLog; v: number }>()
  private loadingSketches = new Map<string, Promise<{ h: HyperLogLog; v: number }>>()
  private lastId = 0

  constructor(
    private db: Db,
    private log: Logger,
  ) {
    this.concurrency = db.dialect === 'postgres' ? 3 : 1
  }

  /** Resolves once the events are committed. */
  write(events: NormEvent[]): Promise<void> {
    if (!events.length) return Promise.resolve()
    return new Promise((resolve, reject) => {
      this.pending.push({ events, resolve, reject })
      this.kick()
    })
  }

  /** Waits for everything queued so far. */
  idle(): Promise<void> {
    if (!this.active && !this.scheduled && !this.pending.length) return Promise.resolve()
    return new Promise((r) => this.idleWaiters.push(r))
  }

  /** Starts another commit when there is work and a free slot. */
  private kick() {
    if (this.scheduled || this.active >= this.concurrency || !this.pending.length) return
    this.scheduled = true
    // setImmediate lets every request parsed in this turn of the event loop join the batch.
    setImmediate(() => {
      this.scheduled = false
      void this.drainOne()
    })
  }

  private async drainOne(): Promise<void> {
    if (!this.pending.length || this.active >= this.concurrency) return
    this.active++
    const batch: Pending[] = []
    let n = 0
    try {
      // A failed start (store unreachable) is retried by the next commit.
      this.ready ??= this.init().catch((e) => {
        this.ready = undefined
        throw e
      })
      await this.ready
      while (this.pending.length && n < MAX_ROWS_PER_TX) {
        const p = this.pending.shift()!
        batch.push(p)
        n += p.events.length
      }
      // What arrives while this commit runs may start the next one (PostgreSQL: up to `concurrency`).
      this.kick()
      await this.commit(batch.flatMap((p) => p.events))
      for (const p of batch) p.resolve()
    } catch (e) {
      this.log.error('event batch commit failed', { error: String(e), events: n })
      for (const p of batch) p.reject(e)
      if (!batch.length) for (const p of this.pending.splice(0)) p.reject(e)
    } finally {
      this.active--
      this.kick()
      if (!this.active && !this.scheduled && !this.pending.length)
        for (const r of this.idleWaiters.splice(0)) r()
    }
  }

  /**
   * Time-ordered integer ids: receive time in ms x 1024 plus a counter (exact in a double until
   * the year 2248). Starts past the largest stored id, so a restart with a clock step back
   * never collides.
   */
  private nextId(): number {
    this.lastId = Math.max(this.lastId + 1, Date.now() * 1024)
    return this.lastId
  }

  private async init() {
    const max = await this.db.get<{ m: number | null }>('SELECT MAX(id) AS m FROM ingest_events')
    const maxInv = await this.db.get<{ m: number | null }>('SELECT MAX(id) AS m FROM ingest_invocations')
    this.lastId = Math.max(Number(max?.m ?? 0), Number(maxInv?.m ?? 0))
    const rows = await this.db.all<{ game_id: string; env: string; user_id: string }>(
      'SELECT DISTINCT game_id, env, user_id FROM ingest_exposures',
    )
    for (const r of rows) this.exposed.add(key(r.game_id, r.env, r.user_id))
  }

  /** The cached sketch of a minute; concurrent commits share one load and one object. */
  private sketch(gameId: string, env: string, minute: number): Promise<{ h: HyperLogLog; v: number }> {
    const k = key(gameId, env, minute)
    const hit = this.sketches.get(k)
    if (hit) return Promise.resolve(hit)
    let loading = this.loadingSketches.get(k)
    if (!loading) {
      loading = this.db
        .get<{ sketch: string; version: number }>(
          'SELECT sketch, version FROM ingest_online WHERE game_id = ? AND env = ? AND minute = ?',
          [gameId, env, minute],
        )
        .then((row) => {
          const sk = {
            h: row ? HyperLogLog.parse(row.sketch) : new HyperLogLog(),
            v: Number(row?.version ?? 0),
          }
          // Oldest first out: sketches are persisted on every commit, so eviction loses nothing.
          if (this.sketches.size >= SKETCH_CAP) this.sketches.delete(this.sketches.keys().next().value!)
          this.sketches.set(k, sk)
          return sk
        })
        .finally(() => this.loadingSketches.delete(k))
      this.loadingSketches.set(k, loading)
    }
    return loading
  }

  private async commit(events: NormEvent[]): Promise<void> {
    const now = Date.now()
    const eventRows: Param[][] = []
    const payments = new Map<string, Param[]>()
    const invocations: Param[][] = []
    const hours = new Map<string, [string, string, number, string, number, number, number, number]>()
    const hist = new Map<string, [string, string, number, number, number]>()
    const firstSeen = new Map<string, [string, string, string, number]>()
    const userDays = new Map<string, [string, string, number, string]>()
    const online = new Map<string, [string, string, number]>()
    const exposures = new Map<string, [string, string, string, string, string, number]>()
    const userEvents = new Map<string, [string, string, string, string, number]>()
    const missing = new Map<string, string[]>()

    for (const e of events) {
      eventRows.push([
        this.nextId(),
        now,
        e.gameId,
        e.env,
        e.event,
        e.ts,
        e.userId,
        e.sessionId,
        e.amountCents,
        e.currency,
        e.durationMs,
        e.network,
        e.level,
        propsJson(e.props),
      ])
      if (e.payment) {
        const k = key(e.gameId, e.env, e.payment.orderId, e.payment.status)
        if (!payments.has(k))
          payments.set(k, [
            e.gameId,
            e.env,
            e.payment.orderId,
            e.payment.status,
            e.payment.amountCents,
            e.currency,
            e.userId,
            e.ts,
            now,
          ])
      }
      if (e.event === 'function.invoke') {
        const fn = s(pick(e.props, 'functionId')) ?? s(pick(e.props, 'function_id')) ?? 'unknown'
        const outcome = s(pick(e.props, 'outcome')) === 'failure' ? 'failure' : 'success'
        const dur = e.durationMs
        invocations.push([
          this.nextId(),
          e.gameId,
          e.env,
          e.ts,
          now,
          fn,
          s(pick(e.props, 'actor')),
          outcome,
          dur,
          s(pick(e.props, 'traceId')) ?? s(pick(e.props, 'trace_id')),
        ])
        const hour = floorTo(e.ts, HOUR)
        const hk = key(e.gameId, e.env, hour, fn)
        const h = hours.get(hk) ?? [e.gameId, e.env, hour, fn, 0, 0, 0, 0]
        h[4]++
        if (outcome === 'failure') h[5]++
        if (dur !== null) {
          h[6] += dur
          h[7]++
        }
        hours.set(hk, h)
        if (dur !== null) {
          const b = histBucket(dur)
          const bk = key(e.gameId, e.env, hour, b)
          const x = hist.get(bk) ?? [e.gameId, e.env, hour, b, 0]
          x[4]++
          hist.set(bk, x)
        }
      }
      if (e.userId) {
        const uk = key(e.gameId, e.env, e.userId)
        if (!this.seen.has(uk)) {
          const prev = firstSeen.get(uk)
          if (!prev || e.ts < prev[3]) firstSeen.set(uk, [e.gameId, e.env, e.userId, e.ts])
        }
        if (DAU_EVENTS.has(e.event)) {
          const day = floorTo(e.ts, DAY)
          const dk = key(e.gameId, e.env, day, e.userId)
          if (!this.userDays.has(dk)) userDays.set(dk, [e.gameId, e.env, day, e.userId])
        }
        if (e.event === 'experiment_exposure') {
          const exp = s(pick(e.props, 'exp'))
          const variant = s(pick(e.props, 'variant'))
          if (exp && variant) {
            const xk = key(e.gameId, e.env, exp, e.userId)
            const prev = exposures.get(xk)
            if (!prev || e.ts < prev[5]) exposures.set(xk, [e.gameId, e.env, exp, e.userId, variant, e.ts])
            this.exposed.add(uk)
          }
        }
      }
      const who = e.userId ?? e.sessionId
      if (who && ONLINE_EVENTS.has(e.event)) {
        const minute = floorTo(e.ts, MINUTE)
        const ok = key(e.gameId, e.env, minute)
        // Cached sketches are updated in place; missing ones are loaded once per commit below,
        // so the loop never suspends per event.
        const cached = this.sketches.get(ok)
        if (cached) cached.h.add(who)
        else {
          const waiting = missing.get(ok)
          if (waiting) waiting.push(who)
          else missing.set(ok, [who])
        }
        online.set(ok, [e.gameId, e.env, minute])
      }
    }
    await Promise.all(
      [...missing].map(async ([ok, whos]) => {
        const [g, env, minute] = online.get(ok)!
        const sk = await this.sketch(g, env, minute)
        for (const who of whos) sk.h.add(who)
      }),
    )
    // Conversions of exposed users: after the loop, so an exposure earlier in this batch counts.
    for (const e of events) {
      if (!e.userId || !this.exposed.has(key(e.gameId, e.env, e.userId))) continue
      const k = key(e.gameId, e.env, e.userId, e.event)
      const prev = userEvents.get(k)
      if (!prev || e.ts > prev[4]) userEvents.set(k, [e.gameId, e.env, e.userId, e.event, e.ts])
    }
    // Each write of a sketch carries a new version, so a slower concurrent commit holding an
    // older snapshot of the same minute cannot overwrite a newer one.
    const onlineRows = [...online.keys()].sort().map((k) => {
      const [g, env, minute] = online.get(k)!
      const sk = this.sketches.get(k) ?? { h: new HyperLogLog(), v: 0 }
      sk.v++
      return [g, env, minute, sk.h.count(), sk.h.serialize(), sk.v]
    })

    const sorted = <T extends Param[]>(m: Map<string, T>): T[] =>
      this.concurrency > 1
        ? [...m.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([, v]) => v)
        : [...m.values()]
    // persist takes each table's values row after row.
    await persist(this.db, {
      events: eventRows.flat(),
      payments: sorted(payments).flat(),
      invocations: invocations.flat(),
      hours: sorted(hours).flat(),
      hist: sorted(hist).flat(),
      firstSeen: sorted(firstSeen).flat(),
      userDays: sorted(userDays).flat(),
      online: onlineRows.flat(),
      exposures: sorted(exposures).flat(),
      userEvents: sorted(userEvents).flat(),
    })
    if (this.seen.size + firstSeen.size > CACHE_CAP) this.seen.clear()
    for (const k of firstSeen.keys()) this.seen.add(k)
    if (this.userDays.size + userDays.size > CACHE_CAP) this.userDays.clear()
    for (const k of userDays.keys()) this.userDays.add(k)
  }
}
