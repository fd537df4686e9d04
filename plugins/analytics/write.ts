import type { Db, Row } from '../../core/db'
import { type Stored, defineRollupWriter } from '../ingest/rollup'
import { type Table, insertMany, jsonRows, jsonSelect } from '../ingest/sql'
import type { AnalyticsRows } from './rollup'
import { DAY, floorTo } from './time'

/**
 * The write half of the analytics rollup (see `rollup.ts`), run in ingest's commit transaction,
 * on the persist thread or the event loop. Imported statically by `plugins/rollups.ts`.
 */

const table = (name: string, bigint: string[]): Table => ({ name, bigint })

/** Each rollup table: its columns and what a row at an existing key does. */
const UPSERT = {
  firstSeen: {
    table: table('analytics_first_seen', ['first_ts']),
    cols: ['game_id', 'env', 'user_id', 'first_ts'],
    tail: 'ON CONFLICT (game_id, env, user_id) DO NOTHING RETURNING game_id, env, first_ts',
  },
  userDays: {
    table: table('analytics_user_day', ['day']),
    cols: ['game_id', 'env', 'day', 'user_id'],
    tail: 'ON CONFLICT (game_id, env, day, user_id) DO NOTHING RETURNING game_id, env, day',
  },
  userDayLog: {
    table: table('analytics_user_day_log', ['day']),
    cols: ['game_id', 'env', 'day', 'user_id'],
    tail: '',
  },
  hours: {
    table: table('analytics_invocation_hour', ['hour', 'total', 'failed', 'duration_sum', 'duration_n']),
    cols: ['game_id', 'env', 'hour', 'function_id', 'total', 'failed', 'duration_sum', 'duration_n'],
    tail: `ON CONFLICT (game_id, env, hour, function_id) DO UPDATE SET total = analytics_invocation_hour.total + excluded.total,
           failed = analytics_invocation_hour.failed + excluded.failed, duration_sum = analytics_invocation_hour.duration_sum + excluded.duration_sum,
           duration_n = analytics_invocation_hour.duration_n + excluded.duration_n`,
  },
  hist: {
    table: table('analytics_invocation_hist', ['hour', 'bucket', 'n']),
    cols: ['game_id', 'env', 'hour', 'bucket', 'n'],
    tail: 'ON CONFLICT (game_id, env, hour, bucket) DO UPDATE SET n = analytics_invocation_hist.n + excluded.n',
  },
  online: {
    table: table('analytics_online', ['minute', 'online', 'version']),
    cols: ['game_id', 'env', 'minute', 'online', 'sketch', 'version'],
    tail: `ON CONFLICT (game_id, env, minute) DO UPDATE SET online = excluded.online, sketch = excluded.sketch, version = excluded.version
           WHERE excluded.version > analytics_online.version`,
  },
  daily: {
    table: table('analytics_daily', ['day', 'dau', 'new_users', 'revenue_cents', 'refunds_cents', 'failed']),
    cols: ['game_id', 'env', 'day', 'dau', 'new_users', 'revenue_cents', 'refunds_cents', 'failed'],
    tail: `ON CONFLICT (game_id, env, day) DO UPDATE SET dau = analytics_daily.dau + excluded.dau, new_users = analytics_daily.new_users + excluded.new_users,
         revenue_cents = analytics_daily.revenue_cents + excluded.revenue_cents, refunds_cents = analytics_daily.refunds_cents + excluded.refunds_cents,
         failed = analytics_daily.failed + excluded.failed`,
  },
} as const

type Upserted = keyof typeof UPSERT
const upsert = (tx: Db, which: Upserted, params: AnalyticsRows[keyof AnalyticsRows]) => {
  const u = UPSERT[which]
  return insertMany(tx, u.table, u.cols, params, u.tail)
}

/** Rows many commits share (hour and histogram counters, the minute's sketch) go last. */
const shared = (tx: Db, rows: AnalyticsRows) => [
  upsert(tx, 'hours', rows.hours),
  upsert(tx, 'hist', rows.hist),
  upsert(tx, 'online', rows.online),
]

/**
 * Writes a commit's analytics rows. Rows many commits share (hour and histogram counters, the
 * minute's sketch, then the day counters) come last: on PostgreSQL their row locks are then
 * held for the shortest time before COMMIT. Every commit takes them in the same order, table by
 * table and key by key, so concurrent commits never deadlock; counters only add, and an online
 * sketch is only replaced by a newer version of itself.
 */
export const writeAnalytics = defineRollupWriter<AnalyticsRows>(async (tx, rows, stored) => {
  if (tx.dialect === 'postgres') return writePg(tx, rows, stored)
  const [fresh] = await Promise.all([
    upsert(tx, 'firstSeen', rows.firstSeen),
    upsert(tx, 'userDayLog', rows.userDays),
    ...shared(tx, rows),
  ])
  const active = await mergeUserDays(tx)
  const paid = await stored.payments
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
  await upsert(tx, 'daily', dailyRows)
})

/**
 * Log rows that make a merge: each merge writes every page of the days it touches once, and DAU
 * reads look each logged row up. Writer alone, bytes written per event: 416 at 1,024, 392 at
 * 2,048, 380 at 4,096 (574 without the log); the read of a full log took 12 ms at 4,096.
 */
export const USER_DAY_MERGE_ROWS = 2048

const USER_DAY_COLS = UPSERT.userDays.cols.join(', ')

/**
 * SQLite: once `analytics_user_day_log` holds `USER_DAY_MERGE_ROWS` rows, moves them into
 * `analytics_user_day` in key order, in the commit's transaction, and returns the user-days that
 * were new (their game, environment and day) for the day counters. Duplicates (a user-day
 * already stored, or logged twice) are dropped by the key.
 */
async function mergeUserDays(tx: Db): Promise<Row[]> {
  const span = await tx.get<{ lo: number | null; hi: number | null }>(
    'SELECT MIN(id) AS lo, MAX(id) AS hi FROM analytics_user_day_log',
  )
  if (span?.hi == null || span.lo == null || span.hi - span.lo + 1 < USER_DAY_MERGE_ROWS) return []
  const added = await tx.all(
    `INSERT INTO analytics_user_day (${USER_DAY_COLS}) SELECT ${USER_DAY_COLS} FROM analytics_user_day_log WHERE id <= ?
     ORDER BY ${USER_DAY_COLS} ${UPSERT.userDays.tail}`,
    [span.hi],
  )
  await tx.run('DELETE FROM analytics_user_day_log WHERE id <= ?', [span.hi])
  return added
}

/** A counted upsert as a CTE body: its RETURNING lists the new rows the day counters add up. */
const inserted = (which: 'firstSeen' | 'userDays') => {
  const u = UPSERT[which]
  return `INSERT INTO ${u.table.name} (${u.cols.join(', ')}) ${jsonSelect(u.table, u.cols)} ${u.tail}`
}
/** The new payments the commit stored, as rows of a JSON array parameter. */
const PAID = table('paid', ['amount_cents', 'ts'])
const PAID_COLS = ['game_id', 'env', 'status', 'amount_cents', 'ts']
let countedSql: string | undefined

/**
 * PostgreSQL: first-seen and user-day rows and the day counters they feed in one statement.
 * Data-modifying CTEs hand the rows that were really new straight to the daily upsert, so a
 * commit needs no round trip to read them back first; the commit's new payments come in as a
 * third parameter. Days are UTC, floored as `floorTo` does.
 */
function counted(): string {
  const d = UPSERT.daily
  countedSql ??= `WITH fresh AS (${inserted('firstSeen')}),
    active AS (${inserted('userDays')}),
    paid AS (${jsonSelect(PAID, PAID_COLS)}),
    counts AS (
      SELECT game_id, env, day, 1 AS dau, 0 AS new_users, 0 AS revenue_cents, 0 AS refunds_cents, 0 AS failed FROM active
      UNION ALL SELECT game_id, env, floor(first_ts / ${DAY}.0)::bigint * ${DAY}, 0, 1, 0, 0, 0 FROM fresh
      UNION ALL SELECT game_id, env, floor(ts / ${DAY}.0)::bigint * ${DAY}, 0, 0,
        CASE WHEN status = 'success' THEN amount_cents ELSE 0 END,
        CASE WHEN status = 'refunded' THEN amount_cents ELSE 0 END,
        CASE WHEN status = 'success' OR status = 'refunded' THEN 0 ELSE 1 END FROM paid)
    INSERT INTO ${d.table.name} (${d.cols.join(', ')})
    SELECT game_id, env, day, SUM(dau), SUM(new_users), SUM(revenue_cents), SUM(refunds_cents), SUM(failed)
      FROM counts GROUP BY game_id, env, day ORDER BY game_id, env, day
    ${d.tail}`
  return countedSql
}

/** `writeAnalytics` on PostgreSQL: every statement sent at once, pipelined on the transaction's connection. */
async function writePg(tx: Db, rows: AnalyticsRows, stored: Stored): Promise<void> {
  const count = async () => {
    const paid = stored.hasPayments ? await stored.payments : []
    if (!rows.firstSeen.length && !rows.userDays.length && !paid.length) return
    const paidParams = paid.flatMap((r) => PAID_COLS.map((c) => r[c] as string | number))
    await tx.run(counted(), [jsonRows(rows.firstSeen), jsonRows(rows.userDays), jsonRows(paidParams)])
  }
  await Promise.all([...shared(tx, rows), count()])
}
