import type { Db } from '../../../core/db'
import type { LogEntry, LogEvent, LogPosition, LogSource } from '../../../core/event-log-types'
import { invocationOf } from '../rows'
import { PAYMENT_STATUSES, type PaymentStatus, clean, str } from '../signed/validate'

const COLS =
  'id, seq, received_at, game_id, env, event, ts, user_id, session_id, amount_cents, currency, duration_ms, network, level, payment_status, props'

interface EventRow {
  id: number | string
  seq: number | string
  received_at: number | string
  game_id: string
  env: string
  event: string
  ts: number | string
  user_id: string | null
  session_id: string | null
  amount_cents: number | string | null
  currency: string | null
  duration_ms: number | string | null
  network: string | null
  level: string | null
  payment_status: string | null
  props: string
}

const n = (v: number | string | null) => (v === null ? null : Number(v))

/**
 * A stored row as consumers see it: its props parsed on first use (most consumers read them of
 * few events), a payment's and a call's facts said.
 */
class StoredEvent implements LogEvent {
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
  private parsed: Record<string, unknown> | undefined
  private invoked: LogEvent['invocation'] | null = null

  constructor(
    r: EventRow,
    private readonly raw: string,
  ) {
    this.id = Number(r.id)
    this.receivedAt = Number(r.received_at)
    this.gameId = r.game_id
    this.env = r.env
    this.event = r.event
    this.ts = Number(r.ts)
    this.userId = r.user_id
    this.sessionId = r.session_id
    this.amountCents = n(r.amount_cents)
    this.currency = r.currency
    this.durationMs = n(r.duration_ms)
    this.network = r.network
    this.level = r.level
    const status = r.payment_status
    if (status !== null && PAYMENT_STATUSES.includes(status as PaymentStatus))
      this.payment = {
        orderId: clean(String(this.props.order_id ?? '')),
        status: status as PaymentStatus,
        amountCents: Number(r.amount_cents ?? 0),
      }
  }

  get props(): Record<string, unknown> {
    if (this.parsed === undefined) {
      try {
        this.parsed = JSON.parse(this.raw) as Record<string, unknown>
      } catch {
        this.parsed = {}
      }
    }
    return this.parsed
  }

  get eventId(): string | null {
    return str(this.props.event_id)
  }

  get invocation(): LogEvent['invocation'] {
    if (this.event !== 'function.invoke') return undefined
    this.invoked ??= invocationOf(this)
    return this.invoked
  }
}

/** A stored row as consumers see it. */
export const logEvent = (r: EventRow): LogEvent => new StoredEvent(r, r.props)

/**
 * The event log over `ingest_events` (issue 35): rows in (seq, id) order, each once by the
 * ingest rules (event_id; a payment's order and status). Rows with seq 0 were stored before the
 * log existed; consumers start past them (core/event-log.ts) and read them on a rebuild.
 */
export function eventLog(store: () => Db): LogSource {
  return {
    get db() {
      return store()
    },
    async read(after: LogPosition, below: number, limit: number, db: Db): Promise<LogEntry[]> {
      const rows = await db.all<EventRow>(
        `SELECT ${COLS} FROM ingest_events WHERE (seq, id) > (?, ?) AND seq < ? ORDER BY seq, id LIMIT ?`,
        [after.seq, after.pos, below, limit],
      )
      return rows.map((r) => ({ at: { seq: Number(r.seq), pos: Number(r.id) }, row: logEvent(r) }))
    },
    async pending(after: LogPosition, db: Db) {
      const r = await db.get<{ n: number | string; t: number | string | null }>(
        'SELECT COUNT(*) AS n, MIN(received_at) AS t FROM ingest_events WHERE (seq, id) > (?, ?)',
        [after.seq, after.pos],
      )
      return { rows: Number(r?.n ?? 0), oldestReceivedAt: r?.t == null ? null : Number(r.t) }
    },
    async head(db: Db): Promise<LogPosition> {
      const r = await db.get<{ seq: number | string; id: number | string }>(
        'SELECT seq, id FROM ingest_events ORDER BY seq DESC, id DESC LIMIT 1',
      )
      return r ? { seq: Number(r.seq), pos: Number(r.id) } : { seq: 0, pos: 0 }
    },
  }
}
