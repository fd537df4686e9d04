import type { Db, Row } from './db'
import { KEY_MAX, bounded, cut } from './event-bounds'
import type { LogConsumer, LogEvent, Pause } from './event-log-types'

/**
 * A derivation of the event log (analytics' counters and sketches, experiment exposures) in two
 * halves, as `ctx.events` runs it (`derivedConsumer`): `gather` turns a batch of log rows into
 * rows for its tables, with what it keeps in memory of what is stored (caches, loaded sketches);
 * `write` stores them in the transaction that also moves the consumer's cursor. One instance
 * runs a consumer at a time, so writes never race one another.
 */
export interface Derivation<R = unknown, E = unknown> {
  /** The consumer's name (its cursor's key). */
  name: string
  /** Rows per batch (default 20,000: each batch writes every sketch it changed, 4 KB each, so fewer larger batches write less). */
  batch?: number
  /** Once, before the first batch, with the store the log and the results live in. */
  init?(db: Db): Promise<void>
  /**
   * The rows of a batch, or undefined when it adds none. `done` runs once they are committed
   * (what they stored is then known).
   */
  gather(events: readonly LogEvent[]): Gathered<R> | undefined | Promise<Gathered<R> | undefined>
  /** Stores a batch's rows in `tx`; `stored.payments` are the batch's payments. */
  write: DerivationWrite<R, E>
  /** Optional first part of `write`, sent before it (each user's own rows). */
  early?: (tx: Db, rows: R) => Promise<E>
  /** Whether `reset` can keep the results before a date (else only whole rebuilds). */
  rebuildsFrom?: boolean
  /**
   * Deletes the results for event times at or after `from` (all when undefined), before a
   * rebuild: through `db`, in slices with `pause` between them (`LogConsumer.reset`).
   */
  reset(from: number | undefined, db: Db, pause: Pause): Promise<void>
  /** See `LogConsumer.replayFrom`: where a game's rows are delivered again in a rebuild from `from`. */
  replayFrom?(gameId: string, from: number): number | Promise<number>
  /** Drops every cache of what is stored (a batch rolled back, or another instance wrote). */
  forget(): void
  /**
   * Retention: deletes detail older than `cutoff` (epoch ms) of one game's environment, and answers
   * how many rows went. Counters meant to outlive raw events stay.
   */
  purge?(db: Db, env: { gameId: string; env: string }, cutoff: number): Promise<number>
}

export interface Gathered<R> {
  rows: R
  done?(): void
}

/** A batch's payments, as the derivations that count money read them. */
export interface Stored {
  /**
   * `game_id, env, order_id, status, amount_cents, ts, user_id` and the log `id` of each payment
   * in the batch, in log order. A row that supersedes a client's (`LogPayment.supersedes`) comes
   * as two: the client's with `sign: -1` (to take off what it counted), then its own with
   * `replaces: true` (and `sign: 0` when its counts were kept by a rebuild from a date).
   */
  payments: Promise<Row[]>
  hasPayments: boolean
}

export type DerivationWrite<R, E> = (tx: Db, rows: R, stored: Stored, early: Promise<E>) => Promise<unknown>

/** The payments of a batch of log rows (each order and status is in the log once). */
export function paymentsOf(events: readonly LogEvent[]): Row[] {
  const out: Row[] = []
  for (const e of events)
    if (e.payment) {
      const p = e.payment
      const row: Row = {
        game_id: e.gameId,
        env: e.env,
        order_id: p.orderId,
        status: p.status,
        amount_cents: p.amountCents,
        ts: e.ts,
        user_id: e.userId,
        id: e.id,
      }
      if (p.supersedes) {
        const s = p.supersedes
        out.push({ ...row, amount_cents: s.amountCents, ts: s.ts, user_id: s.userId, id: s.id, sign: -1 })
        row.replaces = true
        if (p.recount === false) row.sign = 0
      }
      out.push(row)
    }
  return out
}

/** A payment row's sign (`Stored.payments`): 1 counts it, -1 takes it off, 0 neither. */
export const signOf = (r: Row): number => (r.sign === undefined ? 1 : Number(r.sign))

/** The log consumer that runs a derivation: gather, then write in the cursor's transaction. */
export function derivedConsumer<R, E>(d: Derivation<R, E>): LogConsumer & { init(db: Db): Promise<void> } {
  let ready: Promise<void> | undefined
  let store: Db | undefined
  return {
    name: d.name,
    batch: d.batch ?? 20_000,
    rebuildsFrom: d.rebuildsFrom,
    async init(db: Db) {
      store = db
      ready = d.init?.(db)
      await ready
    },
    // Gathering reads the store's caches and loads sketches, outside the write transaction.
    async prepare(events) {
      if (!events.length) return undefined
      if (!store) throw new Error(`derivation '${d.name}' used before init`)
      await ready
      // Every derivation sees its keys' text bounded, the same on every engine (event-bounds.ts).
      return d.gather(events.map(bounded))
    },
    async handle(events, tx, prepared) {
      const batch = prepared as Gathered<R> | undefined
      if (!batch) return
      const payments = paymentsOf(events.map(bounded))
      const stored: Stored = { payments: Promise.resolve(payments), hasPayments: payments.length > 0 }
      const early = d.early ? d.early(tx, batch.rows) : Promise.resolve(undefined as E)
      await Promise.all([early, d.write(tx, batch.rows, stored, early)])
      return batch.done
    },
    reset: (from, db, pause) => d.reset(from, db, pause),
    replayFrom: d.replayFrom?.bind(d),
    forget: () => d.forget(),
  }
}

type Obj = Record<string, unknown>
const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v)

/** An event's field at top level, else inside `attrs` (how games send attributes). */
export function pick(e: Obj, key: string): unknown {
  if (e[key] !== undefined) return e[key]
  const attrs = e.attrs
  return isObj(attrs) ? attrs[key] : undefined
}

/** PostgreSQL TEXT cannot hold NUL; one such character must not fail a whole transaction. */
export const clean = (v: string): string => (v.includes('\0') ? v.replaceAll('\0', '') : v)

/**
 * A label a consumer takes from an event's properties (a feature, a platform, a variant): as
 * text (`str`), cut to `KEY_MAX` characters, so it fits a key column on every engine
 * (core/event-bounds.ts).
 */
export const label = (v: unknown): string | null => {
  const s = str(v)
  return s === null ? null : cut(s, KEY_MAX)
}

/** A field as text: non-empty strings and finite numbers, else null. */
export const str = (v: unknown): string | null =>
  typeof v === 'string' && v !== ''
    ? clean(v)
    : typeof v === 'number' && Number.isFinite(v)
      ? String(v)
      : null
