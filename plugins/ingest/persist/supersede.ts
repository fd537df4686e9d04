import type { Db } from '../../../core/db'
import type { LogEvent } from '../../../core/event-log-types'
import type { NormEvent } from '../signed/validate'
import { supersededEvent } from '../store/log'
import { paymentKey } from './writer-rows'

/**
 * What the group writer does with payments whose order and status the store holds already (the
 * commit rolled back on them, `DUPLICATE_PAYMENTS`): a client's is dropped, as ever (a retry
 * under a new event_id), and so is a server's of a row the server wrote. A server's (the trusted
 * route, `serverWrite`) of a row a signed client stored first supersedes it (docs/security.md,
 * "Superseding payments"): its log row carries the client's as it stood, so every consumer that
 * counted the client's takes it off (docs/analytics.md). Only this retry path reads here, and
 * only a duplicate leads to it: the signed path's per-event work is unchanged.
 */
export async function settlePayments(db: Db, events: NormEvent[]): Promise<NormEvent[]> {
  const stored = new Map<string, StoredPayment | null>()
  const out: NormEvent[] = []
  for (const e of events) {
    if (!e.payment) {
      out.push(e)
      continue
    }
    const k = paymentKey(e)
    let s = stored.get(k)
    if (s === undefined) {
      s = (await storedPayment(db, e)) ?? null
      stored.set(k, s)
    }
    // Not stored (any more: retention took the client's): a new row after all.
    if (!s) out.push(e.payment.supersedes ? plain(e) : e)
    else if (e.server && s.source === 'client')
      out.push(e.payment.supersedes ? e : await supersedingOf(db, e, s))
  }
  return out
}

interface StoredPayment {
  source: string
  amount_cents: number | string
  currency: string | null
  user_id: string | null
  ts: number | string
  received_at: number | string
}

const storedPayment = (db: Db, e: NormEvent) =>
  db.get<StoredPayment>(
    `SELECT source, amount_cents, currency, user_id, ts, received_at FROM ingest_payments
     WHERE game_id = ? AND env = ? AND order_id = ? AND status = ?`,
    [e.gameId, e.env, e.payment!.orderId, e.payment!.status],
  )

/**
 * How far past its receipt a commit's raw row ids can lie (ids are receive time x 1024 plus a
 * counter, moved on past another instance's, see writer.ts): the client's raw row is looked for
 * among the ids of one second from its payment's receipt.
 */
const ID_SPAN = 1000 * 1024

/**
 * The server's event made superseding: its props carry the client's row as it stood (the
 * payment's values, and the raw event's id and props where the store still holds it), which
 * the log's readers hand to the consumers as `payment.supersedes`.
 */
async function supersedingOf(db: Db, e: NormEvent, s: StoredPayment): Promise<NormEvent> {
  const receivedAt = Number(s.received_at)
  const rows = await db.all<{ id: number | string; props: string }>(
    `SELECT id, props FROM ingest_events WHERE id >= ? AND id < ? AND received_at = ?
     AND game_id = ? AND env = ? AND payment_status = ? ORDER BY id`,
    [receivedAt * 1024, receivedAt * 1024 + ID_SPAN, receivedAt, e.gameId, e.env, e.payment!.status],
  )
  let id: number | null = null
  let props: Record<string, unknown> = {}
  for (const r of rows) {
    const p = parse(r.props)
    if (p.order_id === e.payment!.orderId) {
      id = Number(r.id)
      props = p
      break
    }
  }
  const superseded = {
    id,
    ts: Number(s.ts),
    user_id: s.user_id,
    amount_cents: Number(s.amount_cents),
    currency: s.currency,
    received_at: receivedAt,
    props,
  }
  const withProps = { ...e.props, superseded }
  const supersedes: LogEvent = supersededEvent(
    { id: 0, receivedAt: Date.now(), ...e, props: withProps } as LogEvent,
    e.payment!,
    superseded,
  )!
  return { ...e, props: withProps, payment: { ...e.payment!, supersedes } }
}

/** A superseding event back to a plain server payment (the client's row went meanwhile). */
function plain(e: NormEvent): NormEvent {
  const { superseded: _, ...props } = e.props
  const { supersedes: __, ...payment } = e.payment!
  return { ...e, props, payment }
}

function parse(text: string): Record<string, unknown> {
  try {
    const v = JSON.parse(text)
    return typeof v === 'object' && v !== null ? v : {}
  } catch {
    return {}
  }
}
