import type { Db, Param } from '../../../core/db'
import { DAY, HOUR } from '../lib/time'

const n = (v: unknown) => Number(v ?? 0)
const date = (day: number) => new Date(day).toISOString().slice(0, 10)
/** Money as a number of the currency's main unit, to the cent (ad revenue: to the millionth). */
const money = (cents: number, adMicros = 0) => Math.round(cents * 10_000 + adMicros) / 1_000_000
const ratio = (a: number, b: number, digits = 4) =>
  b ? Math.round((a / b) * 10 ** digits) / 10 ** digits : 0

/** A scope of the game analytics: one game, optionally one environment, local days `from`..`to` (UTC midnights). */
export interface DayRange {
  gameId: string
  env?: string
  from: number
  to: number
}

function where(q: { gameId: string; env?: string }, alias = ''): { sql: string; params: Param[] } {
  const a = alias ? `${alias}.` : ''
  return q.env === undefined
    ? { sql: `${a}game_id = ?`, params: [q.gameId] }
    : { sql: `${a}game_id = ? AND ${a}env = ?`, params: [q.gameId, q.env] }
}

/**
 * Reads of the game analytics (`/api/analytics/...`), every one over rollups kept at ingest
 * (`analytics_game_day`, `analytics_game_hour`, the day counters and user sets); the
 * definitions are spec 1's: ARPU = total revenue / total users, ARPPU = total revenue / paying
 * users, eCPM = ad revenue / impressions x 1000, fill rate = filled / requested, bounce rate =
 * share of sessions with exactly one event, viral coefficient = new users invited per user.
 */
export function gameAnalytics(db: Db) {
  /** Day counters of one metric per day and dimension. */
  async function counters(q: DayRange, metrics: string[]) {
    const w = where(q)
    return db.all<{ day: number; metric: string; dim: string; n: number; total: number }>(
      `SELECT day, metric, dim, SUM(n) AS n, SUM(total) AS total FROM analytics_game_day
       WHERE ${w.sql} AND day >= ? AND day <= ? AND metric IN (${metrics.map(() => '?').join(', ')})
       GROUP BY day, metric, dim`,
      [...w.params, q.from, q.to, ...metrics],
    )
  }

  /** DAU per local day: the day counters. */
  async function dau(q: DayRange): Promise<Map<number, number>> {
    const w = where(q)
    const rows = await db.all<{ day: number; dau: number }>(
      `SELECT day, SUM(dau) AS dau FROM analytics_daily WHERE ${w.sql} AND day >= ? AND day <= ? GROUP BY day`,
      [...w.params, q.from, q.to],
    )
    return new Map(rows.map((r) => [n(r.day), n(r.dau)]))
  }

  const daysOf = (q: DayRange) => {
    const out: number[] = []
    for (let d = q.from; d <= q.to; d += DAY) out.push(d)
    return out
  }

  /** Revenue of the range: payments by kind (cents) and ad revenue (micros). */
  async function revenueParts(q: DayRange) {
    const rows = await counters(q, ['rev', 'ad_imp'])
    let iap = 0
    let sub = 0
    let ads = 0
    const byDay = new Map<number, { cents: number; micros: number }>()
    for (const r of rows) {
      const d = byDay.get(n(r.day)) ?? { cents: 0, micros: 0 }
      if (r.metric === 'ad_imp') {
        ads += n(r.total)
        d.micros += n(r.total)
      } else {
        if (r.dim.startsWith('subscription|')) sub += n(r.total)
        else iap += n(r.total)
        d.cents += n(r.total)
      }
      byDay.set(n(r.day), d)
    }
    return { iap, sub, ads, byDay, rows }
  }

  /** Ended sessions per day: count and duration; of those that said how many events, the events and the one-event ones. */
  async function sessionDays(q: DayRange) {
    const rows = await counters(q, ['sess', 'sess_ev'])
    const byDay = new Map<number, { sessions: number; duration: number; bounces: number; events: number }>()
    for (const r of rows) {
      const x = byDay.get(n(r.day)) ?? { sessions: 0, duration: 0, bounces: 0, events: 0 }
      if (r.metric === 'sess') {
        x.sessions += n(r.n)
        x.duration += n(r.total)
      } else {
        x.bounces += n(r.n)
        x.events += n(r.total)
      }
      byDay.set(n(r.day), x)
    }
    return { byDay, days: daysOf(q) }
  }

  return {
    async revenueOverview(q: DayRange) {
      const { iap, sub, ads } = await revenueParts(q)
      return {
        totalRevenue: money(iap + sub, ads),
        iapRevenue: money(iap),
        adRevenue: money(0, ads),
        subscriptionRevenue: money(sub),
        days: daysOf(q).length,
      }
    },

    async arpu(q: DayRange) {
      const [{ byDay }, users, payers] = await Promise.all([revenueParts(q), dau(q), counters(q, ['payers'])])
      const paying = new Map<number, number>()
      for (const r of payers) paying.set(n(r.day), (paying.get(n(r.day)) ?? 0) + n(r.n))
      return daysOf(q).map((day) => {
        const r = byDay.get(day) ?? { cents: 0, micros: 0 }
        const revenue = money(r.cents, r.micros)
        const totalUsers = users.get(day) ?? 0
        const payingUsers = paying.get(day) ?? 0
        return {
          date: date(day),
          arpu: ratio(revenue, totalUsers),
          arppu: ratio(revenue, payingUsers),
          payingUsers,
          totalUsers,
        }
      })
    },

    async byPlatform(q: DayRange) {
      const { rows } = await revenueParts(q)
      const w = where(q)
      // The users of the range on each platform: active (a session_start naming it) and paying
      // (a successful payment naming it), each user once per platform.
      const counts = await db.all<{ platform: string; payer: number; n: number }>(
        `SELECT platform, payer, COUNT(DISTINCT user_id) AS n FROM analytics_platform_user
         WHERE ${w.sql} AND day >= ? AND day <= ? GROUP BY platform, payer`,
        [...w.params, q.from, q.to],
      )
      const users = (platform: string, payer: number) =>
        n(counts.find((c) => c.platform === platform && n(c.payer) === payer)?.n)
      return ['ANDROID', 'IOS', 'WEB'].map((platform) => {
        const cents = rows
          .filter((r) => r.metric === 'rev' && r.dim.endsWith(`|${platform}`))
          .reduce((a, r) => a + n(r.total), 0)
        const revenue = money(cents)
        return {
          platform,
          revenue,
          arpu: ratio(revenue, users(platform, 0)),
          arppu: ratio(revenue, users(platform, 1)),
        }
      })
    },

    async adsByNetwork(q: DayRange) {
      const rows = await counters(q, ['ad_imp', 'ad_req'])
      const nets = new Map<
        string,
        { micros: number; impressions: number; requests: number; filled: number }
      >()
      for (const r of rows) {
        const x = nets.get(r.dim) ?? { micros: 0, impressions: 0, requests: 0, filled: 0 }
        if (r.metric === 'ad_imp') {
          x.micros += n(r.total)
          x.impressions += n(r.n)
        } else {
          x.requests += n(r.n)
          x.filled += n(r.total)
        }
        nets.set(r.dim, x)
      }
      return [...nets.entries()]
        .map(([network, x]) => ({
          network,
          revenue: money(0, x.micros),
          impressions: x.impressions,
          ecpm: ratio(x.micros / 1e6, x.impressions / 1000),
          fillRate: ratio(x.filled, x.requests),
          requests: x.requests,
          filled: x.filled,
        }))
        .sort((a, b) => b.revenue - a.revenue || a.network.localeCompare(b.network))
    },

    async adsOverview(q: DayRange) {
      const nets = await this.adsByNetwork(q)
      const micros = nets.reduce((a, x) => a + Math.round(x.revenue * 1e6), 0)
      const impressions = nets.reduce((a, x) => a + x.impressions, 0)
      const requests = nets.reduce((a, x) => a + x.requests, 0)
      const filled = nets.reduce((a, x) => a + x.filled, 0)
      return {
        totalRevenue: money(0, micros),
        totalImpressions: impressions,
        avgEcpm: ratio(micros / 1e6, impressions / 1000),
        avgFillRate: ratio(filled, requests),
        networkCount: nets.length,
      }
    },

    async sessionTrends(q: DayRange) {
      const { byDay, days } = await sessionDays(q)
      return days.map((day) => {
        const x = byDay.get(day)
        return {
          date: date(day),
          avgDuration: x ? ratio(x.duration, x.sessions, 2) : 0,
          avgEvents: x ? ratio(x.events, x.sessions, 2) : 0,
          bounceRate: x ? ratio(x.bounces, x.sessions) : 0,
        }
      })
    },

    async sessionsOverview(q: DayRange) {
      const { byDay, days } = await sessionDays(q)
      let sessions = 0
      let duration = 0
      let bounces = 0
      let events = 0
      for (const x of byDay.values()) {
        sessions += x.sessions
        duration += x.duration
        bounces += x.bounces
        events += x.events
      }
      return {
        avgSessionDuration: ratio(duration, sessions, 2),
        avgEventsPerSession: ratio(events, sessions, 2),
        avgBounceRate: ratio(bounces, sessions),
        days: days.length,
      }
    },

    /** Hours `[from, to)` in epoch ms, UTC. */
    async performance(q: { gameId: string; env?: string; from: number; to: number }) {
      const w = where(q)
      const rows = await db.all<{ metric: string; dim: string; n: number; total: number }>(
        `SELECT metric, dim, SUM(n) AS n, SUM(total) AS total FROM analytics_game_hour
         WHERE ${w.sql} AND hour >= ? AND hour < ? GROUP BY metric, dim`,
        [...w.params, Math.floor(q.from / HOUR) * HOUR, q.to],
      )
      const stat = () => ({ avgValue: 0, count: 0 })
      const out = { FPS: stat(), LAG: stat(), CRASH: stat(), MEMORY: stat(), LOAD_TIME: stat() }
      const perf: Record<string, { avgValue: number; count: number }> = out
      for (const r of rows) {
        if (r.metric === 'crash') out.CRASH.count += n(r.n)
        else if (r.dim !== 'CRASH' && perf[r.dim]) {
          const x = perf[r.dim]
          const sum = x.avgValue * x.count + n(r.total) / 1000
          x.count += n(r.n)
          x.avgValue = Math.round((sum / x.count) * 1000) / 1000
        }
      }
      return out
    },

    async crashes(q: { gameId: string; env?: string; from: number; to: number }) {
      const w = where(q)
      const rows = await db.all<{ dim: string; n: number; first: number; last: number }>(
        `SELECT dim, SUM(n) AS n, MIN(first_ts) AS first, MAX(last_ts) AS last FROM analytics_game_hour
         WHERE ${w.sql} AND hour >= ? AND hour < ? AND metric = 'crash' GROUP BY dim`,
        [...w.params, Math.floor(q.from / HOUR) * HOUR, q.to],
      )
      return rows
        .map((r) => ({
          crashHash: r.dim,
          count: n(r.n),
          firstSeen: new Date(n(r.first)).toISOString(),
          lastSeen: new Date(n(r.last)).toISOString(),
        }))
        .sort((a, b) => b.count - a.count || a.crashHash.localeCompare(b.crashHash))
    },

    async socialOverview(q: DayRange) {
      const [rows, users] = await Promise.all([counters(q, ['friend', 'guild', 'invite']), dau(q)])
      let friends = 0
      let guilds = 0
      const invitedByDay = new Map<number, number>()
      for (const r of rows) {
        if (r.metric === 'friend') friends += n(r.n)
        else if (r.metric === 'guild') guilds += n(r.n)
        else invitedByDay.set(n(r.day), (invitedByDay.get(n(r.day)) ?? 0) + n(r.total))
      }
      // Per active day: users invited per active user; averaged over the days that had users.
      const perDay = daysOf(q)
        .filter((d) => (users.get(d) ?? 0) > 0)
        .map((d) => (invitedByDay.get(d) ?? 0) / (users.get(d) ?? 1))
      const viral = perDay.length ? perDay.reduce((a, x) => a + x, 0) / perDay.length : 0
      return {
        totalFriendships: friends,
        totalGuilds: guilds,
        avgViralCoefficient: Math.round(viral * 10_000) / 10_000,
        days: daysOf(q).length,
      }
    },

    /**
     * Users first seen in the range, split by whether they ever did something social: the share
     * of each active on their seventh day after (D7). Lift: social over non-social, minus 1. Only
     * cohorts whose day 7 has come (`today`, the game's) count, as `/retention` leaves the cells
     * not reached yet out (null).
     */
    async retentionImpact(q: DayRange, today: number) {
      const f = where(q, 'f')
      const rows = await db.all<{ social: number; cohort: number; retained: number }>(
        `SELECT CASE WHEN s.user_id IS NULL THEN 0 ELSE 1 END AS social, COUNT(*) AS cohort,
           SUM(CASE WHEN EXISTS (SELECT 1 FROM analytics_user_day d WHERE d.game_id = f.game_id AND d.env = f.env
                 AND d.user_id = f.user_id AND d.day = f.first_day + ${7 * DAY}) THEN 1 ELSE 0 END) AS retained
         FROM analytics_first_seen f
         LEFT JOIN analytics_social_user s ON s.game_id = f.game_id AND s.env = f.env AND s.user_id = f.user_id
         WHERE ${f.sql} AND f.first_day >= ? AND f.first_day <= ?
         GROUP BY CASE WHEN s.user_id IS NULL THEN 0 ELSE 1 END`,
        [...f.params, q.from, Math.min(q.to, today - 7 * DAY)],
      )
      const rate = (social: number) => {
        const r = rows.find((x) => n(x.social) === social)
        return r && n(r.cohort) ? n(r.retained) / n(r.cohort) : 0
      }
      const s = rate(1)
      const ns = rate(0)
      const round = (x: number) => Math.round(x * 10_000) / 10_000
      return {
        socialUsersD7Retention: round(s),
        nonSocialUsersD7Retention: round(ns),
        retentionLift: ns ? round(s / ns - 1) : 0,
      }
    },
  }
}
