import type { Db } from '../../../core/db'
import { HyperLogLog } from '../lib/hll'
import { DAY } from '../lib/time'
import { cohorts, mondayOf } from './cohort'

const n = (v: unknown) => Number(v ?? 0)
const date = (day: number) => new Date(day).toISOString().slice(0, 10)
const round = (x: number, digits = 4) => Math.round(x * 10 ** digits) / 10 ** digits

/** One game and environment, local days `from`..`to` (UTC midnights of the game's dates). */
export interface Scope {
  gameId: string
  env: string
  from: number
  to: number
}

/**
 * The server analytics reads of spec 1 ("other endpoints") over the rollups: KPI overview with
 * the previous period, and cohort retention. Counters answer what they can (DAU, new users,
 * revenue), day sketches distinct users over a period, cohort counters retention (`cohort.ts`).
 */
export function serverAnalytics(db: Db) {
  const cohort = cohorts(db)
  /**
   * Distinct active users of local days `from`..`to`: the days' HyperLogLog sketches merged
   * (exact for a few users, within about 1.6% beyond).
   */
  async function distinctActive(q: Scope, from: number, to: number): Promise<number> {
    const rows = await db.all<{ sketch: string }>(
      'SELECT sketch FROM analytics_day_sketch WHERE game_id = ? AND env = ? AND day >= ? AND day <= ?',
      [q.gameId, q.env, from, to],
    )
    if (!rows.length) return 0
    const h = HyperLogLog.parse(rows[0].sketch)
    for (let i = 1; i < rows.length; i++) h.merge(HyperLogLog.parse(rows[i].sketch))
    return h.count()
  }

  async function period(q: Scope) {
    const days = (q.to - q.from) / DAY + 1
    const [daily, active, mau, payers, d1] = await Promise.all([
      db.get<{ dau: number; fresh: number; revenue: number }>(
        `SELECT SUM(dau) AS dau, SUM(new_users) AS fresh, SUM(revenue_cents) AS revenue FROM analytics_daily
         WHERE game_id = ? AND env = ? AND day >= ? AND day <= ?`,
        [q.gameId, q.env, q.from, q.to],
      ),
      distinctActive(q, q.from, q.to),
      // MAU: distinct users of the 30 days ending with the period.
      distinctActive(q, q.to - 29 * DAY, q.to),
      db.get<{ n: number }>(
        'SELECT COUNT(DISTINCT user_id) AS n FROM analytics_payer_day WHERE game_id = ? AND env = ? AND day >= ? AND day <= ?',
        [q.gameId, q.env, q.from, q.to],
      ),
      // D1: of the users first seen in the period (up to its day before last), those active the next day.
      q.to > q.from ? cohort.d1(q, q.from, q.to - DAY) : { cohort: 0, back: 0 },
    ])
    const revenue = n(daily?.revenue) / 100
    const paying = n(payers?.n)
    return {
      dau: round(n(daily?.dau) / days, 2),
      mau,
      newUsers: n(daily?.fresh),
      revenue: round(revenue, 2),
      arpu: active ? round(revenue / active) : 0,
      arppu: paying ? round(revenue / paying) : 0,
      payingUsers: paying,
      d1Retention: d1.cohort ? round(d1.back / d1.cohort) : 0,
    }
  }

  /** Per local day: successful revenue, refunds and failed payments (cents), transactions, paying users. */
  async function paymentDays(q: Scope) {
    const p = [q.gameId, q.env, q.from, q.to]
    const [daily, game] = await Promise.all([
      db.all<{ day: number; revenue: number; refunds: number; failed: number }>(
        `SELECT day, revenue_cents AS revenue, refunds_cents AS refunds, failed FROM analytics_daily
         WHERE game_id = ? AND env = ? AND day >= ? AND day <= ?`,
        p,
      ),
      db.all<{ day: number; metric: string; n: number }>(
        `SELECT day, metric, SUM(n) AS n FROM analytics_game_day WHERE game_id = ? AND env = ? AND day >= ? AND day <= ?
         AND metric IN ('rev', 'payers') GROUP BY day, metric`,
        p,
      ),
    ])
    const out = new Map<
      number,
      { revenue: number; refunds: number; failed: number; transactions: number; users: number }
    >()
    for (let d = q.from; d <= q.to; d += DAY)
      out.set(d, { revenue: 0, refunds: 0, failed: 0, transactions: 0, users: 0 })
    for (const r of daily) {
      const x = out.get(n(r.day))
      if (!x) continue
      x.revenue += n(r.revenue)
      x.refunds += n(r.refunds)
      x.failed += n(r.failed)
    }
    for (const r of game) {
      const x = out.get(n(r.day))
      if (!x) continue
      if (r.metric === 'rev') x.transactions += n(r.n)
      else x.users += n(r.n)
    }
    return out
  }

  return {
    /** Payments of a period: successful revenue, refunds, failed payments, transactions, paying users. */
    async payments(q: Scope) {
      const [days, payers] = await Promise.all([
        paymentDays(q),
        db.get<{ n: number }>(
          'SELECT COUNT(DISTINCT user_id) AS n FROM analytics_payer_day WHERE game_id = ? AND env = ? AND day >= ? AND day <= ?',
          [q.gameId, q.env, q.from, q.to],
        ),
      ])
      let revenue = 0
      let refunds = 0
      let failed = 0
      let transactions = 0
      for (const x of days.values()) {
        revenue += x.revenue
        refunds += x.refunds
        failed += x.failed
        transactions += x.transactions
      }
      const paying = n(payers?.n)
      return {
        startDate: date(q.from),
        endDate: date(q.to),
        revenue: revenue / 100,
        refunds: refunds / 100,
        failed,
        transactions,
        payingUsers: paying,
        arppu: paying ? round(revenue / 100 / paying) : 0,
        avgTransaction: transactions ? round(revenue / 100 / transactions) : 0,
      }
    },

    /** The same per local day; `users`: paying users of that day. */
    async paymentsDaily(q: Scope) {
      const days = await paymentDays(q)
      return [...days.entries()].map(([d, x]) => ({
        date: date(d),
        revenue: x.revenue / 100,
        refunds: x.refunds / 100,
        transactions: x.transactions,
        users: x.users,
      }))
    },

    /** The period and the one as long just before it. */
    async overview(q: Scope) {
      const length = q.to - q.from + DAY
      const prev = { ...q, from: q.from - length, to: q.to - length }
      const [now, before] = await Promise.all([period(q), period(prev)])
      const out: Record<string, { value: number; previous: number }> = {}
      for (const k of Object.keys(now) as Array<keyof typeof now>)
        out[k] = { value: now[k], previous: before[k] }
      return {
        startDate: date(q.from),
        endDate: date(q.to),
        previousStartDate: date(prev.from),
        previousEndDate: date(prev.to),
        metrics: out as Record<keyof typeof now, { value: number; previous: number }>,
      }
    },

    /**
     * Cohorts of first sight (per day, or per week from each Monday) and, for offsets 1..`size`,
     * the share of each cohort active that many days (weeks) after. Offsets not reached yet are null.
     */
    async retention(q: Scope & { interval: 'day' | 'week'; size: number }, today: number) {
      const unit = q.interval === 'week' ? 7 * DAY : DAY
      // Weeks start on Monday.
      const start = (day: number) => (q.interval === 'week' ? mondayOf(day) : day)
      const first = start(q.from)
      const last = start(q.to)
      const [sizes, seen] = await Promise.all([
        cohort.sizes(q, first, last + unit - DAY),
        cohort.back(q, q.interval, first, last),
      ])
      // Per cohort: its users (a week's cohort is its days' together).
      const size = new Map<number, number>()
      for (const [day, users] of sizes) size.set(start(day), (size.get(start(day)) ?? 0) + users)
      const rows = []
      for (let c = first; c <= last; c += unit) {
        const total = size.get(c) ?? 0
        const counts: Array<number | null> = []
        const shares: Array<number | null> = []
        for (let k = 1; k <= q.size; k++) {
          const reached = c + k * unit <= today
          const v = reached ? (seen.get(`${c}|${c + k * unit}`) ?? 0) : null
          counts.push(v)
          shares.push(v === null ? null : total ? round(v / total) : 0)
        }
        rows.push({ cohort: date(c), users: total, counts, retention: shares })
      }
      return { interval: q.interval, size: q.size, cohorts: rows }
    },
  }
}
