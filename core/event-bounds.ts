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

type Obj = Record<string, unknown>
const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v)

/** Whether any string of `o` (one level) is longer than `KEY_MAX`. */
const hasLong = (o: Obj): boolean => {
  for (const k in o) {
    const v = o[k]
    if (typeof v === 'string' && v.length > KEY_MAX) return true
  }
  return false
}

const cutStrings = (o: Obj): Obj => {
  const out: Obj = {}
  for (const k in o) {
    const v = o[k]
    out[k] = typeof v === 'string' ? cut(v, KEY_MAX) : v
  }
  return out
}

/**
 * The event as the consumers derive from it: every text it can give a key or dimension (the
 * fields of `LogEvent`, its payment's order, its call's function, and the strings at the top of
 * its properties and in `attrs`, where the consumers `pick` dimensions) cut to `KEY_MAX`.
 * Cutting, not skipping: the event still counts in every total; only a label past 128
 * characters is shortened, and two labels sharing their first 128 characters count as one.
 *
 * A view, lazy like the event itself: its properties (JSON text, parsed on first use by the
 * stored event; most consumers read them of few events) are parsed and cut only when a consumer
 * reads them. One view per event, shared by the consumers moving together.
 */
export function bounded(e: LogEvent): LogEvent {
  let view = views.get(e)
  if (!view) {
    view = new BoundedEvent(e)
    views.set(e, view)
  }
  return view
}

const views = new WeakMap<LogEvent, LogEvent>()

const cutProps = (props: Obj): Obj => {
  const attrs = props.attrs
  const longAttrs = isObj(attrs) && hasLong(attrs)
  if (!hasLong(props) && !longAttrs) return props
  const out = cutStrings(props)
  if (longAttrs) out.attrs = cutStrings(attrs as Obj)
  return out
}

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
  private cutProps: Obj | undefined
  private called: LogEvent['invocation'] | null = null

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
    this.payment = p && p.orderId.length > KEY_MAX ? { ...p, orderId: cut(p.orderId, KEY_MAX) } : p
  }

  get eventId(): string | null {
    return cutOrNull(this.e.eventId)
  }

  get props(): Obj {
    this.cutProps ??= cutProps(this.e.props)
    return this.cutProps
  }

  get invocation(): LogEvent['invocation'] {
    if (this.called === null) {
      const i = this.e.invocation
      this.called = i && i.functionId.length > KEY_MAX ? { ...i, functionId: cut(i.functionId, KEY_MAX) } : i
    }
    return this.called
  }
}
