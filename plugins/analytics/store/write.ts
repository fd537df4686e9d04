import type { Db, Param, Row } from '../../../core/db'
import {
  type Table,
  insertRows as insertMany,
  jsonRows,
  tableSelect as jsonSelect,
} from '../../../core/db/bulk'
import { type Stored, signOf } from '../../../core/derive'
import { addCapped, cappedSql } from '../../../core/event-bounds'
import { REPLACING, TAKEN_OFF } from '../game/game-rollup'
import { DAY, floorTo } from '../lib/time'
import { countMergedCohorts, firstDay, weekOf } from '../server/cohort'
import { countRefunds } from './orders'
import type { AnalyticsRows } from './rollup-parts'
import { USER_DAYS, USER_WEEKS, firstDaysOf, mergeLeftoverUserDays, weeksOf } from './user-days'

/**
 * The write half of the analytics consumer (see `rollup.ts`), run in the transaction that moves
 * its cursor in the event log.
 */

const table = (name: string, bigint: string[]): Table => ({ name, bigint })

/**
 * Counters add (totals, revenue among them, saturate at `SUM_MAX`: core/event-bounds.ts); the
 * first and last time seen move outward (CASE: portable where MIN/MAX of two values are not).
 */
const counterTail = (t: string, unit: string) =>
  `ON CONFLICT (game_id, env, ${unit}, metric, dim) DO UPDATE SET n = ${t}.n + excluded.n, total = ${cappedSql(`${t}.total`, 'excluded.total')},
   first_ts = CASE WHEN excluded.first_ts < ${t}.first_ts THEN excluded.first_ts ELSE ${t}.first_ts END,
   last_ts = CASE WHEN excluded.last_ts > ${t}.last_ts THEN excluded.last_ts ELSE ${t}.last_ts END`

/** Each rollup table: its columns and what a row at an existing key does. */
const UPSERT = {
  firstSeen: {
    table: table('analytics_first_seen', ['first_ts', 'first_day']),
    cols: ['game_id', 'env', 'user_id', 'first_ts', 'first_day'],
    tail: 'ON CONFLICT (game_id, env, user_id) DO NOTHING RETURNING game_id, env, user_id, first_day',
  },
  gameDays: {
    table: table('analytics_game_day', ['day', 'n', 'total', 'first_ts', 'last_ts']),
    cols: ['game_id', 'env', 'day', 'metric', 'dim', 'n', 'total', 'first_ts', 'last_ts'],
    tail: counterTail('analytics_game_day', 'day'),
  },
  gameHours: {
    table: table('analytics_game_hour', ['hour', 'n', 'total', 'first_ts', 'last_ts']),
    cols: ['game_id', 'env', 'hour', 'metric', 'dim', 'n', 'total', 'first_ts', 'last_ts'],
    tail: counterTail('analytics_game_hour', 'hour'),
  },
  payerDays: {
    table: table('analytics_payer_day', ['day']),
    cols: ['game_id', 'env', 'day', 'user_id'],
    tail: 'ON CONFLICT (game_id, env, day, user_id) DO NOTHING RETURNING game_id, env, day',
  },
  social: {
    table: table('analytics_social_user', ['first_ts']),
    cols: ['game_id', 'env', 'user_id', 'first_ts'],
    tail: `ON CONFLICT (game_id, env, user_id) DO UPDATE SET first_ts = excluded.first_ts
           WHERE excluded.first_ts < analytics_social_user.first_ts`,
  },
  platforms: {
    table: table('analytics_platform_user', ['day', 'payer']),
    cols: ['game_id', 'env', 'day', 'platform', 'payer', 'user_id'],
    tail: 'ON CONFLICT (game_id, env, day, platform, payer, user_id) DO NOTHING',
  },
  userDays: USER_DAYS,
  userWeeks: USER_WEEKS,
  hours: {
    table: table('analytics_invocation_hour', ['hour', 'total', 'failed', 'duration_sum', 'duration_n']),
    cols: ['game_id', 'env', 'hour', 'function_id', 'total', 'failed', 'duration_sum', 'duration_n'],
    tail: `ON CONFLICT (game_id, env, hour, function_id) DO UPDATE SET total = analytics_invocation_hour.total + excluded.total,
           failed = analytics_invocation_hour.failed + excluded.failed, duration_sum = ${cappedSql('analytics_invocation_hour.duration_sum', 'excluded.duration_sum')},
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
  activeDays: {
    table: table('analytics_day_sketch', ['day', 'active', 'version']),
    cols: ['game_id', 'env', 'day', 'active', 'sketch', 'version'],
    tail: `ON CONFLICT (game_id, env, day) DO UPDATE SET active = excluded.active, sketch = excluded.sketch, version = excluded.version
           WHERE excluded.version > analytics_day_sketch.version`,
  },
  daily: {
    table: table('analytics_daily', ['day', 'dau', 'new_users', 'revenue_cents', 'refunds_cents', 'failed']),
    cols: ['game_id', 'env', 'day', 'dau', 'new_users', 'revenue_cents', 'refunds_cents', 'failed'],
    tail: `ON CONFLICT (game_id, env, day) DO UPDATE SET dau = analytics_daily.dau + excluded.dau, new_users = analytics_daily.new_users + excluded.new_users,
         revenue_cents = ${cappedSql('analytics_daily.revenue_cents', 'excluded.revenue_cents')},
         refunds_cents = ${cappedSql('analytics_daily.refunds_cents', 'excluded.refunds_cents')},
         failed = analytics_daily.failed + excluded.failed`,
  },
} as const

type Upserted = keyof typeof UPSERT
const upsert = (tx: Db, which: Upserted, params: Param[]) => {
  const u = UPSERT[which]
  return insertMany(tx, u.table, u.cols, params, u.tail)
}

/** Rows many commits share (hour and histogram counters, the minute's sketch) go last. */
const shared = (tx: Db, rows: AnalyticsRows) => [
  upsert(tx, 'social', rows.social),
  upsert(tx, 'platforms', rows.platforms),
  upsert(tx, 'gameHours', rows.gameHours),
  upsert(tx, 'hours', rows.hours),
  upsert(tx, 'hist', rows.hist),
  upsert(tx, 'online', rows.online),
  upsert(tx, 'activeDays', rows.activeDays),
]

/**
 * Writes a batch's analytics rows. Counters only add, and a sketch is replaced by its newer
 * version; one instance runs the consumer at a time, so nothing else writes these rows meanwhile.
 */
export async function writeAnalytics(tx: Db, rows: AnalyticsRows, stored: Stored, early: Promise<Early>) {
  if (tx.dialect === 'postgres') return writePg(tx, rows, stored, early)
  const leftover = await mergeLeftoverUserDays(tx)
  const [{ fresh }, days] = await Promise.all([
    early,
    upsert(tx, 'userDays', sortRows(rows.userDays, 4)),
    ...shared(tx, rows),
  ])
  const weeks = days.length ? await upsert(tx, 'userWeeks', weeksOf(days)) : []
  // The first sights this batch stored: their first days are known now. A rolled-back batch
  // makes the consumer forget every cache (core/event-log.ts).
  const known = rows.firstDays
  if (known)
    for (const r of fresh) known.set(String(r.game_id), String(r.env), String(r.user_id), Number(r.first_day))
  await countMergedCohorts(tx, days, weeks, await firstDaysOf(tx, days, known))
  const paid = withDays(rows, await countRefunds(tx, 'analytics_order', await stored.payments))
  await gameDays(tx, rows, paid)
  await upsert(tx, 'daily', dayCounters(leftover.length ? [...leftover, ...days] : days, fresh, paid))
}

/**
 * Each user's own rows, returned when new: first sights; on PostgreSQL also user-days and
 * user-weeks.
 */
export function earlyAnalytics(tx: Db, rows: AnalyticsRows): Promise<Early> {
  return tx.dialect === 'postgres'
    ? earlyPg(tx, rows)
    : upsert(tx, 'firstSeen', rows.firstSeen).then((fresh) => ({ fresh }))
}

/**
 * What the early part stored that was new: first sights (game, environment, first day); on
 * PostgreSQL also user-days and user-weeks, each with its user's first day.
 */
export interface Early {
  fresh: Row[]
  days?: Row[]
  weeks?: Row[]
}

type DayCounter = [string, string, number, number, number, number, number, number]

/**
 * Day counter rows in key order from the rows that were really new: user-days (dau), first
 * sights (new users), and payments (revenue, refunds, failed).
 */
function dayCounters(active: Row[], fresh: Row[] = [], paid: ReturnType<typeof withDays> = []): Param[] {
  const daily = new Map<string, DayCounter>()
  // Consecutive returned rows mostly share game, environment and day: the last counter row is reused.
  let last: DayCounter | undefined
  const bump = (g: unknown, env: unknown, day: number, i: 3 | 4 | 5 | 6 | 7, by: number) => {
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
    d[i] = addCapped(d[i], by)
  }
  for (const r of active) bump(r.game_id, r.env, Number(r.day), 3, 1)
  for (const r of fresh) bump(r.game_id, r.env, Number(r.first_day), 4, 1)
  for (const r of paid) {
    // A client's payment a server's supersedes is taken off (-1), a kept one counts nothing (0).
    if (r.sign === 0) continue
    if (r.status === 'success') bump(r.game_id, r.env, r.day, 5, r.sign * Number(r.amount_cents))
    // A refund counts what it takes off a success of its order seen before it (store/orders.ts).
    else if (r.status === 'refunded') {
      if (r.counted > 0) bump(r.game_id, r.env, r.day, 6, r.sign * r.counted)
    } else bump(r.game_id, r.env, r.day, 7, r.sign)
  }
  return [...daily.entries()].sort(([a], [b]) => (a < b ? -1 : 1)).flatMap(([, v]) => v)
}

/**
 * PostgreSQL: the user-days that were new and the user-weeks they made new, each with its user's
 * first day, in one statement (data-modifying CTEs hand the inserted rows on). It follows the
 * commit's first-sight insert on the connection, so its snapshot holds the first sight of every
 * user of the commit, including one a concurrent commit stored (that insert waited for it).
 */
let earlySql: string | undefined
function userDaysSql(): string {
  const u = UPSERT.userDays
  earlySql ??= `WITH active AS (
      INSERT INTO ${u.table.name} (${u.cols.join(', ')}) ${jsonSelect(u.table, u.cols)} ${u.tail}),
    weeks AS (
      INSERT INTO analytics_user_week (game_id, env, week, user_id)
      SELECT DISTINCT game_id, env, ${weekOf('day')}, user_id FROM active ORDER BY 1, 2, 3, 4
      ON CONFLICT (game_id, env, week, user_id) DO NOTHING RETURNING game_id, env, week, user_id)
    SELECT game_id, env, day, NULL::bigint AS week, user_id, ${firstDay('active')} AS first_day FROM active
    UNION ALL SELECT game_id, env, NULL, week, user_id, ${firstDay('weeks')} FROM weeks`
  return earlySql
}

/** PostgreSQL's early part: first sights, then user-days and user-weeks (pipelined, in this order). */
async function earlyPg(tx: Db, rows: AnalyticsRows): Promise<Early> {
  const [fresh, back] = await Promise.all([
    upsert(tx, 'firstSeen', rows.firstSeen),
    rows.userDays.length ? tx.all(userDaysSql(), [jsonRows(rows.userDays)]) : [],
  ])
  const days: Row[] = []
  const weeks: Row[] = []
  for (const r of back) (r.week == null ? days : weeks).push(r)
  return { fresh, days, weeks }
}

/**
 * `writeAnalytics` on PostgreSQL, under ingest's rollup lock: the rows every commit shares (hour
 * counters, the minute's and the day's sketch) at once, then the counters of what the early part
 * found new (day counters, cohort counters) and of the new payments as soon as those answered.
 * Counted in JS as on SQLite, so the statements under the lock only add to counter rows.
 *
 * Every statement is sent as early as it can be: the early part and the payments answer before
 * the lock is granted (they precede it on the connection), so under the lock the statements run
 * back to back with no round trip between them. Their order under the lock does not matter: no
 * other commit touches these rows without the lock, which is held to COMMIT.
 */
async function writePg(tx: Db, rows: AnalyticsRows, stored: Stored, early: Promise<Early>): Promise<void> {
  const sharing = shared(tx, rows)
  // Awaited below; should what comes first fail (a lost connection fails every statement of the
  // transaction), their failures are not left unhandled, which would end the process.
  for (const p of sharing) p.catch(() => undefined)
  const [{ fresh, days = [], weeks = [] }, paid] = await Promise.all([
    early,
    stored.hasPayments
      ? stored.payments.then((p) => countRefunds(tx, 'analytics_order', p)).then((p) => withDays(rows, p))
      : [],
  ])
  const firstDays = new Map<string, number>()
  for (const r of [...days, ...weeks])
    if (r.first_day != null)
      firstDays.set(`${r.game_id}\u0001${r.env}\u0001${r.user_id}`, Number(r.first_day))
  await Promise.all([
    ...sharing,
    gameDays(tx, rows, paid),
    countMergedCohorts(tx, days, weeks, firstDays),
    upsert(tx, 'daily', dayCounters(days, fresh, paid)),
  ])
}

/** A new payment with what the commit's events said of it: its local day, kind and platform. */
interface Paid {
  game_id: string
  env: string
  status: string
  amount_cents: number
  /** A refund's amount counted against its order (`countRefunds`); a payment's own amount otherwise. */
  counted: number
  /** 1 counts it; -1 takes off a client's payment a server's superseded; 0 counts nothing (`Stored`). */
  sign: number
  user_id: string | null
  ts: number
  day: number
  kind: string
  platform: string
}

/** The new payments, each with its local day, kind and platform (sent by the event-loop half). */
function withDays(rows: AnalyticsRows, paid: Row[]): Paid[] {
  if (!paid.length) return []
  const meta = new Map<string, [number, string, string]>()
  const p = rows.payments
  for (let i = 0; i < p.length; i += 7)
    meta.set(`${p[i]}\u0001${p[i + 1]}\u0001${p[i + 2]}\u0001${p[i + 3]}`, [
      Number(p[i + 4]),
      String(p[i + 5]),
      String(p[i + 6]),
    ])
  return paid.map((r) => {
    const sign = signOf(r)
    const role = sign < 0 ? TAKEN_OFF : r.replaces ? REPLACING : ''
    const m = meta.get(`${r.game_id}\u0001${r.env}\u0001${r.order_id}\u0001${r.status}${role}`)
    return {
      sign,
      game_id: String(r.game_id),
      env: String(r.env),
      status: String(r.status),
      amount_cents: Number(r.amount_cents),
      counted: Number(r.counted_cents ?? r.amount_cents),
      user_id: r.user_id == null ? null : String(r.user_id),
      ts: Number(r.ts),
      day: m?.[0] ?? floorTo(Number(r.ts), DAY),
      kind: m?.[1] ?? 'iap',
      platform: m?.[2] ?? '',
    }
  })
}

/**
 * The game-analytics day counters: the event-loop half's, plus revenue by kind and platform and
 * paying users from the payments that turned out new, merged per key, in key order.
 */
async function gameDays(tx: Db, rows: AnalyticsRows, paid: Paid[]): Promise<void> {
  const success = paid.filter((r) => r.status === 'success' && r.sign !== 0)
  if (!success.length) {
    await upsert(tx, 'gameDays', rows.gameDays)
    return
  }
  const payers: Param[] = []
  const platformPayers: Param[] = []
  // A payer taken off stays a payer of that day: the sets cannot tell whether another payment
  // made them one (docs/analytics.md, "Superseding payments").
  for (const r of success)
    if (r.user_id && r.sign > 0) {
      payers.push(r.game_id, r.env, r.day, r.user_id)
      // The users who paid on a platform that day (ARPPU by platform).
      if (r.platform) platformPayers.push(r.game_id, r.env, r.day, r.platform, 1, r.user_id)
    }
  const [newPayers] = await Promise.all([
    upsert(tx, 'payerDays', sortRows(payers, 4)),
    upsert(tx, 'platforms', sortRows(platformPayers, 6)),
  ])
  const merged = new Map<string, Param[]>()
  const add = (
    g: string,
    env: string,
    day: number,
    metric: string,
    dim: string,
    n: number,
    total: number,
    ts: number,
  ) => {
    const k = `${g}\u0001${env}\u0001${String(day).padStart(16, '0')}\u0001${metric}\u0001${dim}`
    const v = merged.get(k)
    if (!v) merged.set(k, [g, env, day, metric, dim, n, total, ts, ts])
    else {
      v[5] = Number(v[5]) + n
      v[6] = addCapped(Number(v[6]), total)
    }
  }
  // The event-loop half's rows are one per key already: kept whole, first and last time included.
  const d = rows.gameDays
  for (let i = 0; i < d.length; i += 9) {
    const k = `${d[i]}\u0001${d[i + 1]}\u0001${String(d[i + 2]).padStart(16, '0')}\u0001${d[i + 3]}\u0001${d[i + 4]}`
    merged.set(k, d.slice(i, i + 9))
  }
  for (const r of success)
    add(r.game_id, r.env, r.day, 'rev', `${r.kind}|${r.platform}`, r.sign, r.sign * r.amount_cents, r.ts)
  for (const r of newPayers)
    add(String(r.game_id), String(r.env), Number(r.day), 'payers', '', 1, 0, Number(r.day))
  const out = [...merged.entries()].sort(([a], [b]) => (a < b ? -1 : 1)).flatMap(([, v]) => v)
  await upsert(tx, 'gameDays', out)
}

/** Rows of `width` values sorted by their text key (the lock order every commit keeps). */
function sortRows(params: Param[], width: number): Param[] {
  const rows: Param[][] = []
  for (let i = 0; i < params.length; i += width) rows.push(params.slice(i, i + width))
  const key = (r: Param[]) =>
    r.map((v) => (typeof v === 'number' ? String(v).padStart(16, '0') : String(v))).join('\u0001')
  rows.sort((a, b) => (key(a) < key(b) ? -1 : 1))
  return rows.flat()
}
