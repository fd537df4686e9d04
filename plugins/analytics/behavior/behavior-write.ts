import type { Db, Param, Row } from '../../../core/db'
import { type Table, insertRows as insertMany } from '../../../core/db/bulk'
import { type Stored, signOf } from '../../../core/derive'
import { addCapped, cappedSql } from '../../../core/event-bounds'
import { REPLACING, TAKEN_OFF } from '../game/game-rollup'
import { countRefunds } from '../store/orders'
import type { BehaviorRows } from './behavior-rollup'

/**
 * The write half of the behavior consumer (`behavior-rollup.ts`), run in the transaction that
 * moves its cursor in the event log.
 */

const table = (name: string, bigint: string[]): Table => ({ name, bigint })

const UPSERT = {
  counters: {
    table: table('analytics_behavior_day', ['day', 'n', 'total', 'first_ts', 'last_ts']),
    cols: ['game_id', 'env', 'day', 'kind', 'name', 'n', 'total', 'first_ts', 'last_ts'],
    tail: `ON CONFLICT (game_id, env, day, kind, name) DO UPDATE SET n = analytics_behavior_day.n + excluded.n,
      total = ${cappedSql('analytics_behavior_day.total', 'excluded.total')},
      first_ts = CASE WHEN excluded.first_ts < analytics_behavior_day.first_ts THEN excluded.first_ts ELSE analytics_behavior_day.first_ts END,
      last_ts = CASE WHEN excluded.last_ts > analytics_behavior_day.last_ts THEN excluded.last_ts ELSE analytics_behavior_day.last_ts END`,
  },
  sketches: {
    table: table('analytics_behavior_sketch', ['day', 'users', 'version']),
    cols: ['game_id', 'env', 'day', 'kind', 'name', 'users', 'sketch', 'version'],
    tail: `ON CONFLICT (game_id, env, day, kind, name) DO UPDATE SET users = excluded.users, sketch = excluded.sketch,
      version = excluded.version WHERE excluded.version > analytics_behavior_sketch.version`,
  },
  spans: {
    table: table('analytics_event_span', ['hour', 'received', 'first_id', 'last_id', 'n']),
    cols: ['game_id', 'env', 'hour', 'received', 'first_id', 'last_id', 'n'],
    tail: `ON CONFLICT (game_id, env, hour, received) DO UPDATE SET n = analytics_event_span.n + excluded.n,
      first_id = CASE WHEN excluded.first_id < analytics_event_span.first_id THEN excluded.first_id ELSE analytics_event_span.first_id END,
      last_id = CASE WHEN excluded.last_id > analytics_event_span.last_id THEN excluded.last_id ELSE analytics_event_span.last_id END`,
  },
  deaths: {
    table: table('analytics_death', ['ts', 'id', 'x', 'y']),
    cols: ['game_id', 'env', 'map', 'ts', 'id', 'x', 'y', 'level', 'user_id'],
    tail: 'ON CONFLICT (game_id, env, map, ts, id) DO NOTHING',
  },
  transactions: {
    table: table('analytics_transaction', ['ts', 'amount_cents']),
    cols: [
      'game_id',
      'env',
      'ts',
      'order_id',
      'status',
      'amount_cents',
      'currency',
      'user_id',
      'product_id',
      'kind',
      'platform',
    ],
    tail: 'ON CONFLICT (game_id, env, ts, order_id, status) DO NOTHING',
  },
} as const

const upsert = (tx: Db, which: keyof typeof UPSERT, params: Param[]) => {
  const u = UPSERT[which]
  return insertMany(tx, u.table, u.cols, params, u.tail)
}

/**
 * Writes a commit's behavior rows. Payments are matched with the rows ingest stored as new (an
 * order and status sent twice counts once): each becomes a transaction row and adds to its
 * product's day counter, merged with the commit's other counters so one upsert takes every
 * counter row in key order (concurrent commits on PostgreSQL lock this table in one order).
 */
export async function writeBehavior(tx: Db, rows: BehaviorRows, stored: Stored): Promise<void> {
  // What needs nothing from the payments is sent at once (pipelined on PostgreSQL).
  const sharing = [upsert(tx, 'sketches', rows.sketches), upsert(tx, 'spans', rows.spans)]
  let counters = rows.counters
  let transactions: Param[] = []
  if (stored.hasPayments && rows.payments.length) {
    // Refunds count only against a success of their order seen before (store/orders.ts).
    const paid = await countRefunds(tx, 'analytics_behavior_order', await stored.payments)
    const found = matchPayments(rows.payments, paid)
    transactions = found.transactions
    if (found.counters.size) counters = mergeCounters(counters, found.counters)
    // The clients' transactions a server's superseded (before the inserts: the server's may have
    // the same key): the list shows the server's alone.
    for (let i = 0; i < found.removed.length; i += 5)
      await tx.run(
        'DELETE FROM analytics_transaction WHERE game_id = ? AND env = ? AND ts = ? AND order_id = ? AND status = ?',
        found.removed.slice(i, i + 5),
      )
  }
  await Promise.all([
    ...sharing,
    upsert(tx, 'counters', counters),
    upsert(tx, 'deaths', rows.deaths),
    upsert(tx, 'transactions', transactions),
  ])
}

const W = 9
type Counter = [n: number, total: number, first: number, last: number]
const keyOf = (game: unknown, env: unknown, day: number, kind: string, name: string) =>
  `${game}\u0001${env}\u0001${String(day).padStart(16, '0')}\u0001${kind}\u0001${name}`

/** The new payments (`paid`, as ingest stored them) with what their events said: transactions and product counters. */
function matchPayments(meta: Param[], paid: Row[]) {
  const byOrder = new Map<string, Param[]>()
  for (let i = 0; i < meta.length; i += W)
    byOrder.set(
      `${meta[i]}\u0001${meta[i + 1]}\u0001${meta[i + 2]}\u0001${meta[i + 3]}`,
      meta.slice(i, i + W),
    )
  const transactions: Param[] = []
  const removed: Param[] = []
  const gone = new Set<string>()
  /** Where the server's rows that replace a client's start in `transactions`. */
  const replacing = new Set<number>()
  const counters = new Map<string, Counter>()
  const role = (r: Row) => (signOf(r) < 0 ? TAKEN_OFF : r.replaces ? REPLACING : '')
  const rows = paid
    .map((r) => ({
      r,
      m: byOrder.get(`${r.game_id}\u0001${r.env}\u0001${r.order_id}\u0001${r.status}${role(r)}`),
    }))
    .filter((x): x is { r: Row; m: Param[] } => x.m !== undefined)
    .sort((a, b) => Number(a.r.ts) - Number(b.r.ts))
  for (const { r, m } of rows) {
    const [, , , , day, product, kind, platform, currency] = m
    const cents = Number(r.amount_cents)
    const ts = Number(r.ts)
    const sign = signOf(r)
    const at = [String(r.game_id), String(r.env), ts, String(r.order_id), String(r.status)]
    // Taken off: its transaction row goes, stored before or (a rebuild's) in this very batch.
    if (sign < 0) {
      removed.push(...at)
      gone.add(at.join('\u0001'))
    } else if (r.replaces) replacing.add(transactions.length)
    if (sign >= 0)
      transactions.push(
        String(r.game_id),
        String(r.env),
        ts,
        String(r.order_id),
        String(r.status),
        cents,
        currency === '' ? null : currency,
        r.user_id == null ? null : String(r.user_id),
        product === '' ? null : product,
        kind,
        platform === '' ? null : platform,
      )
    if ((r.status !== 'success' && r.status !== 'refunded') || sign === 0) continue
    // A refund of an order not paid before it, kept as a transaction, counts in no product.
    const counted = (r.status === 'refunded' ? Number(r.counted_cents ?? 0) : cents) * sign
    if (counted === 0) continue
    const k = keyOf(
      r.game_id,
      r.env,
      Number(day),
      r.status === 'success' ? 'product' : 'product.refund',
      String(product),
    )
    const c = counters.get(k)
    if (!c) counters.set(k, [sign, counted, ts, ts])
    else {
      c[0] += sign
      c[1] = addCapped(c[1], counted)
      c[2] = Math.min(c[2], ts)
      c[3] = Math.max(c[3], ts)
    }
  }
  // One key per transaction row: sorted so concurrent commits insert in one order.
  // A client's row taken off in this batch is not inserted (a server's of the same key is).
  const kept = gone.size ? withoutGone(transactions, gone, replacing) : transactions
  return { transactions: sortRows(kept, 11), counters, removed }
}

function withoutGone(rows: Param[], gone: Set<string>, replacing: Set<number>): Param[] {
  const out: Param[] = []
  for (let i = 0; i < rows.length; i += 11)
    if (replacing.has(i) || !gone.has(rows.slice(i, i + 5).join('\u0001'))) out.push(...rows.slice(i, i + 11))
  return out
}

function mergeCounters(rows: Param[], more: Map<string, Counter>): Param[] {
  const all = new Map<string, Param[]>()
  for (let i = 0; i < rows.length; i += W)
    all.set(
      keyOf(rows[i], rows[i + 1], Number(rows[i + 2]), String(rows[i + 3]), String(rows[i + 4])),
      rows.slice(i, i + W),
    )
  for (const [k, c] of more) {
    const [game, env, day, kind, ...name] = k.split('\u0001')
    all.set(k, [game, env, Number(day), kind, name.join('\u0001'), ...c])
  }
  return [...all.keys()].sort().flatMap((k) => all.get(k)!)
}

function sortRows(params: Param[], width: number): Param[] {
  const out: Param[][] = []
  for (let i = 0; i < params.length; i += width) out.push(params.slice(i, i + width))
  const key = (r: Param[]) =>
    `${r[0]}\u0001${r[1]}\u0001${String(r[2]).padStart(16, '0')}\u0001${r[3]}\u0001${r[4]}`
  out.sort((a, b) => (key(a) < key(b) ? -1 : 1))
  return out.flat()
}
