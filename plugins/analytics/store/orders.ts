import type { Db, Param, Row } from '../../../core/db'
import { type Table, insertRows } from '../../../core/db/bulk'

/**
 * Which refunds count, for the consumers that count money (analytics' day counters, behavior's
 * product counters): a refund counts only against a success of its game, environment and order
 * seen before it in the event log (`log_id`), for at most that success's amount; any other
 * refund (an order never paid, or paid later) counts nothing. Anyone holding the signing secret
 * could otherwise refund any order for any amount (audit 19 M1). Each consumer keeps its own
 * record of successes (migration 010), written in the transaction that moves its cursor, so a
 * rebuild from the log counts the same.
 */
export type OrderTable = 'analytics_order' | 'analytics_behavior_order'

const COLS = ['game_id', 'env', 'order_id', 'ts', 'log_id', 'amount_cents']
const table = (name: OrderTable): Table => ({ name, bigint: ['ts', 'log_id', 'amount_cents'] })
/** Rows looked up per statement (three parameters of the stream, then one per order). */
const LOOKUP = 500

/**
 * The batch's payments (`Stored.payments`), each refund with `counted_cents`: what it takes off
 * revenue (0 when it counts nothing). Stores the batch's successes in `name` first.
 */
export async function countRefunds(tx: Db, name: OrderTable, paid: Row[]): Promise<Row[]> {
  const successes: Param[][] = []
  const refunds: Row[] = []
  for (const r of paid)
    if (r.status === 'success')
      successes.push([
        String(r.game_id),
        String(r.env),
        String(r.order_id),
        Number(r.ts),
        Number(r.id),
        Number(r.amount_cents),
      ])
    else if (r.status === 'refunded') refunds.push(r)
  // Key order, the order every commit inserts in.
  successes.sort((a, b) => (key(a[0], a[1], a[2]) < key(b[0], b[1], b[2]) ? -1 : 1))
  const stored = insertRows(
    tx,
    table(name),
    COLS,
    successes.flat(),
    'ON CONFLICT (game_id, env, order_id) DO NOTHING',
  )
  await stored
  if (!refunds.length) return paid
  const known = await lookUp(tx, name, refunds)
  const counted = new Map<Row, number>()
  for (const r of refunds) {
    const s = known.get(key(r.game_id, r.env, r.order_id))
    counted.set(r, s && s.logId < Number(r.id) ? Math.min(Number(r.amount_cents), s.amount) : 0)
  }
  return paid.map((r) => (counted.has(r) ? { ...r, counted_cents: counted.get(r)! } : r))
}

const key = (g: unknown, env: unknown, order: unknown) => `${g}\u0001${env}\u0001${order}`

/** The stored successes of the refunds' orders, by key, a statement per stream and `LOOKUP` orders. */
async function lookUp(tx: Db, name: OrderTable, refunds: Row[]) {
  const byStream = new Map<string, { g: string; env: string; orders: Set<string> }>()
  for (const r of refunds) {
    const k = `${r.game_id}\u0001${r.env}`
    let s = byStream.get(k)
    if (!s) {
      s = { g: String(r.game_id), env: String(r.env), orders: new Set() }
      byStream.set(k, s)
    }
    s.orders.add(String(r.order_id))
  }
  const known = new Map<string, { logId: number; amount: number }>()
  for (const { g, env, orders } of byStream.values()) {
    const all = [...orders]
    for (let i = 0; i < all.length; i += LOOKUP) {
      const part = all.slice(i, i + LOOKUP)
      const rows = await tx.all<{ order_id: string; log_id: number; amount_cents: number }>(
        `SELECT order_id, log_id, amount_cents FROM ${name} WHERE game_id = ? AND env = ?
         AND order_id IN (${part.map(() => '?').join(', ')})`,
        [g, env, ...part],
      )
      for (const r of rows)
        known.set(key(g, env, r.order_id), { logId: Number(r.log_id), amount: Number(r.amount_cents) })
    }
  }
  return known
}
