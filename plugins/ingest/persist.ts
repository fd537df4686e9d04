import type { Db, Param } from '../../core/db'
import { DAY, floorTo, insertMany } from './sql'

const EVENT_COLS = [
  'id',
  'received_at',
  'game_id',
  'env',
  'event',
  'ts',
  'user_id',
  'session_id',
  'amount_cents',
  'currency',
  'duration_ms',
  'network',
  'level',
  'props',
] as const
const PAYMENT_COLS = [
  'game_id',
  'env',
  'order_id',
  'status',
  'amount_cents',
  'currency',
  'user_id',
  'ts',
  'received_at',
]
const INVOCATION_COLS = [
  'id',
  'game_id',
  'env',
  'ts',
  'received_at',
  'function_id',
  'actor',
  'outcome',
  'duration_ms',
  'trace_id',
]

/**
 * The rows of one group commit, prepared by the writer: each table's values one row after
 * another, in its column order; upsert rows come sorted by key.
 */
export interface CommitRows {
  events: Param[]
  payments: Param[]
  invocations: Param[]
  hours: Param[]
  hist: Param[]
  firstSeen: Param[]
  userDays: Param[]
  online: Param[]
  exposures: Param[]
  userEvents: Param[]
}

/**
 * Writes one group commit in one transaction: raw rows, then the rollups. Concurrent commits
 * (PostgreSQL) lock rows in key order, so they never deadlock; counters only add, and an online
 * sketch is only replaced by a newer version of itself.
 */
export async function persist(db: Db, rows: CommitRows): Promise<void> {
  await db.tx(async (tx) => {
    // Rows many commits share (hour and histogram counters, the minute's sketch, then the daily
    // row below) come last: on PostgreSQL their row locks are then held for the shortest time
    // before COMMIT, while rows at keys no other commit touches go first. Every commit takes
    // them in the same order, table by table and key by key, so none deadlock.
    const [, paid, , fresh, active] = await Promise.all([
      insertMany(tx, 'ingest_events', EVENT_COLS, rows.events),
      insertMany(
        tx,
        'ingest_payments',
        PAYMENT_COLS,
        rows.payments,
        'ON CONFLICT (game_id, env, order_id, status) DO NOTHING RETURNING game_id, env, status, amount_cents, ts',
      ),
      insertMany(tx, 'ingest_invocations', INVOCATION_COLS, rows.invocations),
      insertMany(
        tx,
        'ingest_first_seen',
        ['game_id', 'env', 'user_id', 'first_ts'],
        rows.firstSeen,
        'ON CONFLICT (game_id, env, user_id) DO NOTHING RETURNING game_id, env, first_ts',
      ),
      insertMany(
        tx,
        'ingest_user_day',
        ['game_id', 'env', 'day', 'user_id'],
        rows.userDays,
        'ON CONFLICT (game_id, env, day, user_id) DO NOTHING RETURNING game_id, env, day',
      ),
      insertMany(
        tx,
        'ingest_exposures',
        ['game_id', 'env', 'experiment_id', 'user_id', 'variant', 'ts'],
        rows.exposures,
        `ON CONFLICT (game_id, env, experiment_id, user_id) DO UPDATE SET variant = excluded.variant, ts = excluded.ts
           WHERE excluded.ts < ingest_exposures.ts`,
      ),
      insertMany(
        tx,
        'ingest_user_events',
        ['game_id', 'env', 'user_id', 'event', 'last_ts'],
        rows.userEvents,
        'ON CONFLICT (game_id, env, user_id, event) DO UPDATE SET last_ts = excluded.last_ts WHERE excluded.last_ts > ingest_user_events.last_ts',
      ),
      insertMany(
        tx,
        'ingest_invocation_hour',
        ['game_id', 'env', 'hour', 'function_id', 'total', 'failed', 'duration_sum', 'duration_n'],
        rows.hours,
        `ON CONFLICT (game_id, env, hour, function_id) DO UPDATE SET total = ingest_invocation_hour.total + excluded.total,
           failed = ingest_invocation_hour.failed + excluded.failed, duration_sum = ingest_invocation_hour.duration_sum + excluded.duration_sum,
           duration_n = ingest_invocation_hour.duration_n + excluded.duration_n`,
      ),
      insertMany(
        tx,
        'ingest_invocation_hist',
        ['game_id', 'env', 'hour', 'bucket', 'n'],
        rows.hist,
        'ON CONFLICT (game_id, env, hour, bucket) DO UPDATE SET n = ingest_invocation_hist.n + excluded.n',
      ),
      insertMany(
        tx,
        'ingest_online',
        ['game_id', 'env', 'minute', 'online', 'sketch', 'version'],
        rows.online,
        `ON CONFLICT (game_id, env, minute) DO UPDATE SET online = excluded.online, sketch = excluded.sketch, version = excluded.version
           WHERE excluded.version > ingest_online.version`,
      ),
    ])
    // Daily counters from the rows that were really new: dau, new users, revenue, refunds, failed.
    const daily = new Map<string, [string, string, number, number, number, number, number, number]>()
    // Consecutive returned rows mostly share game, environment and day: the last counter row is reused.
    let last: [string, string, number, number, number, number, number, number] | undefined
    const bump = (g: unknown, env: unknown, ts: number, i: 3 | 4 | 5 | 6 | 7, by: number) => {
      const day = floorTo(ts, DAY)
      let d = last
      if (d === undefined || d[2] !== day || d[0] !== String(g) || d[1] !== String(env)) {
        const k = `${g}\u0001${env}\u0001${day}`
        d = daily.get(k)
        if (!d) {
          d = [String(g), String(env), day, 0, 0, 0, 0, 0]
          daily.set(k, d)
        }
        last = d
      }
      d[i] += by
    }
    for (const r of active) bump(r.game_id, r.env, Number(r.day), 3, 1)
    for (const r of fresh) bump(r.game_id, r.env, Number(r.first_ts), 4, 1)
    for (const r of paid) {
      if (r.status === 'success') bump(r.game_id, r.env, Number(r.ts), 5, Number(r.amount_cents))
      else if (r.status === 'refunded') bump(r.game_id, r.env, Number(r.ts), 6, Number(r.amount_cents))
      else bump(r.game_id, r.env, Number(r.ts), 7, 1)
    }
    const dailyRows = [...daily.entries()].sort(([a], [b]) => (a < b ? -1 : 1)).flatMap(([, v]) => v)
    await insertMany(
      tx,
      'ingest_daily',
      ['game_id', 'env', 'day', 'dau', 'new_users', 'revenue_cents', 'refunds_cents', 'failed'],
      dailyRows,
      `ON CONFLICT (game_id, env, day) DO UPDATE SET dau = ingest_daily.dau + excluded.dau, new_users = ingest_daily.new_users + excluded.new_users,
         revenue_cents = ingest_daily.revenue_cents + excluded.revenue_cents, refunds_cents = ingest_daily.refunds_cents + excluded.refunds_cents,
         failed = ingest_daily.failed + excluded.failed`,
    )
  })
}
