import type { Db, Param, Row } from '../../../core/db'
import { type Table, insertRows } from '../../../core/db/bulk'
import { rowsByKeys } from '../../../core/db/keyed'
import { signOf } from '../../../core/derive'

/**
 * Which refunds count, for the consumers that count money (analytics' day counters, behavior's
 * product counters): a refund counts only against a success of its game, environment and order
 * seen before it in the event log (`log_id`), for at most that success's amount; any other
 * refund (an order never paid, or paid later) counts nothing. Anyone holding the signing secret
 * could otherwise refund any order for any amount (audit 19 M1). Each consumer keeps its own
 * record of successes (migration 010), written in the transaction that moves its cursor, so a
 * rebuild from the log counts the same. A server's success that supersedes a client's
 * (`LogPayment.supersedes`) replaces the record's amount; the record keeps what its order's refund
 * counted (migration 011), so a server's refund that supersedes a client's takes that off.
 */
export type OrderTable = 'analytics_order' | 'analytics_behavior_order'

const COLS = ['game_id', 'env', 'order_id', 'ts', 'log_id', 'amount_cents']
const table = (name: OrderTable): Table => ({
  name,
  bigint: ['ts', 'log_id', 'amount_cents', 'refund_cents'],
})

/**
 * The batch's payments (`Stored.payments`), each refund with `counted_cents`: what it takes off
 * revenue (0 when it counts nothing). Stores the batch's successes in `name` first.
 */
export async function countRefunds(tx: Db, name: OrderTable, paid: Row[]): Promise<Row[]> {
  const successes: Param[][] = []
  const replacing: Param[][] = []
  const refunds: Row[] = []
  const refundAt: number[] = []
  /** Orders whose success the server's replaced in this batch: where, and the amount before. */
  const replacedAt = new Map<string, { at: number; before: number }>()
  paid.forEach((r, i) => {
    if (r.status === 'success') {
      const row = [
        String(r.game_id),
        String(r.env),
        String(r.order_id),
        Number(r.ts),
        Number(r.id),
        Number(r.amount_cents),
      ]
      // The client's success a server's replaces (core/derive.ts `paymentsOf`): the record takes
      // the server's amount (its first time and log position stay), so later refunds cap by it.
      if (signOf(r) < 0)
        replacedAt.set(key(r.game_id, r.env, r.order_id), { at: i, before: Number(r.amount_cents) })
      else if (r.replaces) {
        replacing.push(row)
        const k = key(r.game_id, r.env, r.order_id)
        const x = replacedAt.get(k)
        if (x) x.at = i
      } else successes.push(row)
    } else if (r.status === 'refunded') {
      refunds.push(r)
      refundAt.push(i)
    }
  })
  // Key order, the order every commit inserts in.
  const byKey = (a: Param[], b: Param[]) => (key(a[0], a[1], a[2]) < key(b[0], b[1], b[2]) ? -1 : 1)
  successes.sort(byKey)
  await insertRows(tx, table(name), COLS, successes.flat(), 'ON CONFLICT (game_id, env, order_id) DO NOTHING')
  if (replacing.length)
    await insertRows(
      tx,
      table(name),
      COLS,
      replacing.sort(byKey).flat(),
      'ON CONFLICT (game_id, env, order_id) DO UPDATE SET amount_cents = excluded.amount_cents',
    )
  if (!refunds.length) return paid
  const known = await lookUp(tx, name, refunds)
  const counted = new Map<Row, number>()
  /** The records whose counted refund this batch set: each order's one refund (its key holds one). */
  const changed = new Map<string, Param[]>()
  for (let j = 0; j < refunds.length; j++) {
    const r = refunds[j]
    const k = key(r.game_id, r.env, r.order_id)
    const s = known.get(k)
    if (!s) counted.set(r, 0)
    // A client's refund a server's supersedes: what it counted comes off.
    else if (signOf(r) < 0) counted.set(r, s.refund)
    else {
      // A refund before the server's success in this batch met the client's amount.
      const x = replacedAt.get(k)
      const cap = x && refundAt[j] < x.at ? x.before : s.amount
      const c = s.logId < Number(r.id) ? Math.min(Number(r.amount_cents), cap) : 0
      counted.set(r, c)
      s.refund = c
      changed.set(k, [String(r.game_id), String(r.env), String(r.order_id), s.ts, s.logId, s.amount, c])
    }
  }
  // Kept so that a server's refund superseding this one takes off what it counted.
  if (changed.size)
    await insertRows(
      tx,
      table(name),
      [...COLS, 'refund_cents'],
      [...changed.keys()].sort().flatMap((k) => changed.get(k)!),
      'ON CONFLICT (game_id, env, order_id) DO UPDATE SET refund_cents = excluded.refund_cents',
    )
  return paid.map((r) => (counted.has(r) ? { ...r, counted_cents: counted.get(r)! } : r))
}

const key = (g: unknown, env: unknown, order: unknown) => `${g}\u0001${env}\u0001${order}`

/** The stored successes of the refunds' orders, by key (core/db/keyed.ts: an index lookup a key). */
async function lookUp(tx: Db, name: OrderTable, refunds: Row[]) {
  const byStream = new Map<string, { g: string; env: string; orders: string[] }>()
  for (const r of refunds) {
    const k = `${r.game_id}\u0001${r.env}`
    let s = byStream.get(k)
    if (!s) {
      s = { g: String(r.game_id), env: String(r.env), orders: [] }
      byStream.set(k, s)
    }
    s.orders.push(String(r.order_id))
  }
  const known = new Map<string, { ts: number; logId: number; amount: number; refund: number }>()
  for (const { g, env, orders } of byStream.values()) {
    const rows = await rowsByKeys<{
      order_id: string
      ts: number
      log_id: number
      amount_cents: number
      refund_cents: number
    }>(tx, {
      table: name,
      cols: ['order_id', 'ts', 'log_id', 'amount_cents', 'refund_cents'],
      scope: [
        ['game_id', g],
        ['env', env],
      ],
      key: 'order_id',
      keys: orders,
    })
    for (const r of rows)
      known.set(key(g, env, r.order_id), {
        ts: Number(r.ts),
        logId: Number(r.log_id),
        amount: Number(r.amount_cents),
        refund: Number(r.refund_cents),
      })
  }
  return known
}
