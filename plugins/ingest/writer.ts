import type { Db, Param } from '../../core/db'
import { newId } from '../../core/db'
import type { Logger } from '../../core/log'
import { HyperLogLog } from './hll'
import { DAY, floorTo, HOUR, insertMany, MINUTE } from './sql'
import { pick, type NormEvent } from './validate'

const EVENT_COLS = ['id', 'received_at', 'game_id', 'env', 'event', 'ts', 'user_id', 'session_id', 'amount_cents', 'currency', 'duration_ms', 'network', 'level', 'props'] as const
const DAU_EVENTS = new Set(['login', 'session_start'])
const ONLINE_EVENTS = new Set(['heartbeat', 'session_start'])
/** Largest transaction; a bigger backlog is committed in several. */
const MAX_ROWS_PER_TX = 20_000
/** Bounded membership caches: clearing one only costs a few redundant conflict checks. */
const CACHE_CAP = 2_000_000
const SKETCH_CAP = 4096

export const histBucket = (ms: number) => Math.round(Math.log1p(Math.max(0, ms)) / Math.log(1.05))
export const histValue = (bucket: number) => Math.expm1(bucket * Math.log(1.05))

const sep = '\u0001'
const key = (...parts: Array<string | number>) => parts.join(sep)
const s = (v: unknown): string | null => (typeof v === 'string' && v !== '' ? v : typeof v === 'number' ? String(v) : null)

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
  private running: Promise<void> | undefined
  private seen = new Set<string>()
  private userDays = new Set<string>()
  private exposed = new Set<string>()
  private sketches = new Map<string, HyperLogLog>()
  private loaded = false

  constructor(
    private db: Db,
    private log: Logger,
  ) {}

  /** Resolves once the events are committed. */
  write(events: NormEvent[]): Promise<void> {
    if (!events.length) return Promise.resolve()
    return new Promise((resolve, reject) => {
      this.pending.push({ events, resolve, reject })
      // setImmediate lets every request parsed in this turn of the event loop join the batch.
      this.running ??= new Promise<void>((r) => setImmediate(r)).then(() => this.drain())
    })
  }

  /** Waits for everything queued so far. */
  async idle(): Promise<void> {
    while (this.running) await this.running
  }

  private async drain(): Promise<void> {
    try {
      if (!this.loaded) await this.loadExposed()
      while (this.pending.length) {
        const batch: Pending[] = []
        let n = 0
        while (this.pending.length && n < MAX_ROWS_PER_TX) {
          const p = this.pending.shift()!
          batch.push(p)
          n += p.events.length
        }
        try {
          await this.commit(batch.flatMap((p) => p.events))
          for (const p of batch) p.resolve()
        } catch (e) {
          this.log.error('event batch commit failed', { error: String(e), events: n })
          for (const p of batch) p.reject(e)
        }
      }
    } finally {
      this.running = undefined
      if (this.pending.length) this.running = this.drain()
    }
  }

  private async loadExposed() {
    const rows = await this.db.all<{ game_id: string; env: string; user_id: string }>('SELECT DISTINCT game_id, env, user_id FROM ingest_exposures')
    for (const r of rows) this.exposed.add(key(r.game_id, r.env, r.user_id))
    this.loaded = true
  }

  private async sketch(gameId: string, env: string, minute: number): Promise<HyperLogLog> {
    const k = key(gameId, env, minute)
    let h = this.sketches.get(k)
    if (!h) {
      const row = await this.db.get<{ sketch: string }>('SELECT sketch FROM ingest_online WHERE game_id = ? AND env = ? AND minute = ?', [gameId, env, minute])
      h = row ? HyperLogLog.parse(row.sketch) : new HyperLogLog()
      // Oldest first out: sketches are persisted on every commit, so eviction loses nothing.
      if (this.sketches.size >= SKETCH_CAP) this.sketches.delete(this.sketches.keys().next().value!)
      this.sketches.set(k, h)
    }
    return h
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

    for (const e of events) {
      eventRows.push([newId(), now, e.gameId, e.env, e.event, e.ts, e.userId, e.sessionId, e.amountCents, e.currency, e.durationMs, e.network, e.level, JSON.stringify(e.props)])
      if (e.payment) {
        const k = key(e.gameId, e.env, e.payment.orderId, e.payment.status)
        if (!payments.has(k)) payments.set(k, [e.gameId, e.env, e.payment.orderId, e.payment.status, e.payment.amountCents, e.currency, e.userId, e.ts, now])
      }
      if (e.event === 'function.invoke') {
        const fn = s(pick(e.props, 'functionId')) ?? s(pick(e.props, 'function_id')) ?? 'unknown'
        const outcome = s(pick(e.props, 'outcome')) === 'failure' ? 'failure' : 'success'
        const dur = e.durationMs
        invocations.push([newId(), e.gameId, e.env, e.ts, now, fn, s(pick(e.props, 'actor')), outcome, dur, s(pick(e.props, 'traceId')) ?? s(pick(e.props, 'trace_id'))])
        const hour = floorTo(e.ts, HOUR)
        const hk = key(e.gameId, e.env, hour, fn)
        const h = hours.get(hk) ?? [e.gameId, e.env, hour, fn, 0, 0, 0, 0]
        h[4]++
        if (outcome === 'failure') h[5]++
        if (dur !== null) (h[6] += dur), h[7]++
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
        ;(await this.sketch(e.gameId, e.env, minute)).add(who)
        online.set(ok, [e.gameId, e.env, minute])
      }
    }
    // Conversions of exposed users: after the loop, so an exposure earlier in this batch counts.
    for (const e of events) {
      if (!e.userId || !this.exposed.has(key(e.gameId, e.env, e.userId))) continue
      const k = key(e.gameId, e.env, e.userId, e.event)
      const prev = userEvents.get(k)
      if (!prev || e.ts > prev[4]) userEvents.set(k, [e.gameId, e.env, e.userId, e.event, e.ts])
    }
    const onlineRows = [...online.entries()].map(([k, [g, env, minute]]) => {
      const h = this.sketches.get(k) ?? new HyperLogLog()
      return [g, env, minute, h.count(), h.serialize()]
    })

    await this.db.tx(async (tx) => {
      const [, paid, , , , fresh, active] = await Promise.all([
        insertMany(tx, 'ingest_events', EVENT_COLS, eventRows),
        insertMany(tx, 'ingest_payments', ['game_id', 'env', 'order_id', 'status', 'amount_cents', 'currency', 'user_id', 'ts', 'received_at'], [...payments.values()],
          'ON CONFLICT (game_id, env, order_id, status) DO NOTHING RETURNING game_id, env, status, amount_cents, ts'),
        insertMany(tx, 'ingest_invocations', ['id', 'game_id', 'env', 'ts', 'received_at', 'function_id', 'actor', 'outcome', 'duration_ms', 'trace_id'], invocations),
        insertMany(tx, 'ingest_invocation_hour', ['game_id', 'env', 'hour', 'function_id', 'total', 'failed', 'duration_sum', 'duration_n'], [...hours.values()],
          `ON CONFLICT (game_id, env, hour, function_id) DO UPDATE SET total = ingest_invocation_hour.total + excluded.total,
           failed = ingest_invocation_hour.failed + excluded.failed, duration_sum = ingest_invocation_hour.duration_sum + excluded.duration_sum,
           duration_n = ingest_invocation_hour.duration_n + excluded.duration_n`),
        insertMany(tx, 'ingest_invocation_hist', ['game_id', 'env', 'hour', 'bucket', 'n'], [...hist.values()],
          'ON CONFLICT (game_id, env, hour, bucket) DO UPDATE SET n = ingest_invocation_hist.n + excluded.n'),
        insertMany(tx, 'ingest_first_seen', ['game_id', 'env', 'user_id', 'first_ts'], [...firstSeen.values()],
          'ON CONFLICT (game_id, env, user_id) DO NOTHING RETURNING game_id, env, first_ts'),
        insertMany(tx, 'ingest_user_day', ['game_id', 'env', 'day', 'user_id'], [...userDays.values()],
          'ON CONFLICT (game_id, env, day, user_id) DO NOTHING RETURNING game_id, env, day'),
        insertMany(tx, 'ingest_online', ['game_id', 'env', 'minute', 'online', 'sketch'], onlineRows,
          'ON CONFLICT (game_id, env, minute) DO UPDATE SET online = excluded.online, sketch = excluded.sketch'),
        insertMany(tx, 'ingest_exposures', ['game_id', 'env', 'experiment_id', 'user_id', 'variant', 'ts'], [...exposures.values()],
          `ON CONFLICT (game_id, env, experiment_id, user_id) DO UPDATE SET variant = excluded.variant, ts = excluded.ts
           WHERE excluded.ts < ingest_exposures.ts`),
        insertMany(tx, 'ingest_user_events', ['game_id', 'env', 'user_id', 'event', 'last_ts'], [...userEvents.values()],
          `ON CONFLICT (game_id, env, user_id, event) DO UPDATE SET last_ts = excluded.last_ts WHERE excluded.last_ts > ingest_user_events.last_ts`),
      ])
      // Daily counters from the rows that were really new: dau, new users, revenue, refunds, failed.
      const daily = new Map<string, [string, string, number, number, number, number, number, number]>()
      const bump = (g: unknown, env: unknown, ts: number, i: 3 | 4 | 5 | 6 | 7, by: number) => {
        const day = floorTo(ts, DAY)
        const k = key(String(g), String(env), day)
        const d = daily.get(k) ?? [String(g), String(env), day, 0, 0, 0, 0, 0]
        d[i] += by
        daily.set(k, d)
      }
      for (const r of active) bump(r.game_id, r.env, Number(r.day), 3, 1)
      for (const r of fresh) bump(r.game_id, r.env, Number(r.first_ts), 4, 1)
      for (const r of paid) {
        if (r.status === 'success') bump(r.game_id, r.env, Number(r.ts), 5, Number(r.amount_cents))
        else if (r.status === 'refunded') bump(r.game_id, r.env, Number(r.ts), 6, Number(r.amount_cents))
        else bump(r.game_id, r.env, Number(r.ts), 7, 1)
      }
      const dailyRows = [...daily.entries()].sort(([a], [b]) => (a < b ? -1 : 1)).map(([, v]) => v)
      await insertMany(tx, 'ingest_daily', ['game_id', 'env', 'day', 'dau', 'new_users', 'revenue_cents', 'refunds_cents', 'failed'], dailyRows,
        `ON CONFLICT (game_id, env, day) DO UPDATE SET dau = ingest_daily.dau + excluded.dau, new_users = ingest_daily.new_users + excluded.new_users,
         revenue_cents = ingest_daily.revenue_cents + excluded.revenue_cents, refunds_cents = ingest_daily.refunds_cents + excluded.refunds_cents,
         failed = ingest_daily.failed + excluded.failed`)
    })
    if (this.seen.size + firstSeen.size > CACHE_CAP) this.seen.clear()
    for (const k of firstSeen.keys()) this.seen.add(k)
    if (this.userDays.size + userDays.size > CACHE_CAP) this.userDays.clear()
    for (const k of userDays.keys()) this.userDays.add(k)
  }
}
