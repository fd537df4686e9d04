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

/** A stored row as consumers see it: its props parsed, a payment's and a call's facts said. */
export function logEvent(r: EventRow): LogEvent {
  let props: Record<string, unknown>
  try {
    props = JSON.parse(r.props) as Record<string, unknown>
  } catch {
    props = {}
  }
  const e: LogEvent = {
    id: Number(r.id),
    receivedAt: Number(r.received_at),
    gameId: r.game_id,
    env: r.env,
    event: r.event,
    ts: Number(r.ts),
    userId: r.user_id,
    sessionId: r.session_id,
    amountCents: n(r.amount_cents),
    currency: r.currency,
    durationMs: n(r.duration_ms),
    network: r.network,
    level: r.level,
    eventId: str(props.event_id),
    props,
  }
  const status = r.payment_status
  if (status !== null && PAYMENT_STATUSES.includes(status as PaymentStatus))
    e.payment = {
      orderId: clean(String(props.order_id ?? '')),
      status: status as PaymentStatus,
      amountCents: Number(r.amount_cents ?? 0),
    }
  if (e.event === 'function.invoke') e.invocation = invocationOf(e)
  return e
}

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
