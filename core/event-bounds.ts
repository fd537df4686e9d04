import type { LogEvent } from './event-log-types'

/**
 * How long the text an event contributes to a derived key may be, the same on every engine.
 * MySQL/MariaDB store key columns as VARCHAR(191) (core/db/mysql-sql.ts) and refuse a longer
 * value, where SQLite and PostgreSQL store TEXT: one stored event with a 192-character name
 * failed the behavior consumer on every retry, for every game behind it (audit-sec2 H1).
 *
 * Ingestion refuses names and ids longer than `KEY_MAX` (plugins/ingest/signed/validate.ts);
 * the consumers still cut what they derive from (`bounded`), so rows stored before that rule,
 * or by a route that does not check, can never stop them either.
 */
export const KEY_MAX = 128

/**
 * The latest event time taken, by ingestion and by the agents' reports: 9999-12-31T23:59:59.999Z,
 * the last millisecond a Date (and every engine's timestamp) can show. Past JavaScript's last
 * date (8.64e15 ms) a time is no day the warehouse can bucket: one such event, stored, stopped
 * the analytics consumers for every game (each retry failed on it).
 */
export const TS_MAX = 253_402_300_799_999

/** The narrowest key column on any engine: a key built of two parts is cut to it as a whole. */
export const KEY_COLUMN_MAX = 191

/** `s` cut to `max` characters (code points, as MySQL counts them; never half a surrogate pair). */
export function cut(s: string, max: number): string {
  // A string of at most `max` UTF-16 units has at most `max` code points: the usual case is free.
  if (s.length <= max) return s
  const points = Array.from(s)
  return points.length <= max ? s : points.slice(0, max).join('')
}

const cutOrNull = (s: string | null): string | null => (s === null ? null : cut(s, KEY_MAX))

/**
 * The event as the consumers derive from it, its own fields' text (name, user, session,
 * currency, network, level, payment order, called function) cut to `KEY_MAX`. The same object
 * when none is that long, the hot path: nothing allocated, and its properties (JSON text the
 * stored event parses on first use) left unread. The labels consumers take from the properties
 * are cut where they are taken (`label` in core/derive.ts). Cutting, not skipping: the event
 * still counts in every total; only a label past 128 characters is shortened, and two labels
 * sharing their first 128 characters count as one.
 */
export function bounded(e: LogEvent): LogEvent {
  if (
    e.event.length <= KEY_MAX &&
    (e.userId?.length ?? 0) <= KEY_MAX &&
    (e.sessionId?.length ?? 0) <= KEY_MAX &&
    (e.currency?.length ?? 0) <= KEY_MAX &&
    (e.network?.length ?? 0) <= KEY_MAX &&
    (e.level?.length ?? 0) <= KEY_MAX &&
    (e.payment?.orderId.length ?? 0) <= KEY_MAX &&
    (e.invocation?.functionId.length ?? 0) <= KEY_MAX
  )
    return e
  return new BoundedEvent(e)
}

/** A view of an event with a long field (rare): the fields cut, its properties read through. */
class BoundedEvent implements LogEvent {
  readonly id: number
  readonly receivedAt: number
  readonly gameId: string
  readonly env: string
  readonly event: string
  readonly ts: number
  readonly userId: string | null
  readonly sessionId: string | null
  readonly amountCents: number | null
  readonly currency: string | null
  readonly durationMs: number | null
  readonly network: string | null
  readonly level: string | null
  readonly payment?: LogEvent['payment']
  readonly invocation?: LogEvent['invocation']

  constructor(private readonly e: LogEvent) {
    this.id = e.id
    this.receivedAt = e.receivedAt
    this.gameId = e.gameId
    this.env = e.env
    this.event = cut(e.event, KEY_MAX)
    this.ts = e.ts
    this.userId = cutOrNull(e.userId)
    this.sessionId = cutOrNull(e.sessionId)
    this.amountCents = e.amountCents
    this.currency = cutOrNull(e.currency)
    this.durationMs = e.durationMs
    this.network = cutOrNull(e.network)
    this.level = cutOrNull(e.level)
    const p = e.payment
    this.payment = p && {
      ...p,
      orderId: cut(p.orderId, KEY_MAX),
      ...(p.supersedes ? { supersedes: bounded(p.supersedes) } : {}),
    }
    const i = e.invocation
    this.invocation = i && { ...i, functionId: cut(i.functionId, KEY_MAX) }
  }

  get eventId(): string | null {
    return this.e.eventId
  }

  get props(): Record<string, unknown> {
    return this.e.props
  }
}

/**
 * The largest amount of one payment ingestion takes, in minor units (`amount_cents`): 10^12, ten
 * billion of a currency's main unit, above any real purchase even in currencies of small units
 * (IDR, KRW, VND). Up to 2^53 was taken, and a few of them overflowed the day counters: a REAL
 * on SQLite, and on PostgreSQL and MariaDB a BIGINT error that stopped the analytics, behavior
 * and realtime consumers for every game (audit 19 M3).
 */
export const AMOUNT_CENTS_MAX = 1_000_000_000_000

/**
 * Where a money sum a consumer keeps stops growing: 2^53 − 1, exact in JavaScript and within
 * BIGINT on every engine. At `AMOUNT_CENTS_MAX` a day's counter reaches it after about 9,000
 * payments, so the bound alone does not keep sums in range: they saturate (`addCapped` in
 * JavaScript, `cappedSql` in an upsert), and a stored sum never fails a consumer's commit.
 */
export const SUM_MAX = Number.MAX_SAFE_INTEGER

/** `a + b`, at most `SUM_MAX` (both at most `SUM_MAX`: the double sum is never past 2^54). */
export const addCapped = (a: number, b: number): number => {
  const s = a + b
  return s > SUM_MAX ? SUM_MAX : s
}

/**
 * SQL for `cur + add`, at most `SUM_MAX`, portable and with no intermediate past BIGINT (both
 * non-negative and at most `SUM_MAX`): for an upsert's `SET x = …`.
 */
export const cappedSql = (cur: string, add: string): string =>
  `CASE WHEN ${cur} > ${SUM_MAX} - ${add} THEN ${SUM_MAX} ELSE ${cur} + ${add} END`
