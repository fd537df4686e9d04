import type { Db, Param } from '../../../core/db'
import type { IngestService } from '../../ingest/types'
import { HyperLogLog } from '../lib/hll'
import { DAY } from '../lib/time'
import { type Dimension, sep } from './behavior-rollup'
import { eventList } from './events'
import { type FunnelOrder, type FunnelStep, funnel } from './funnel'
import { paths } from './paths'
import { rawReads } from './raw'

const n = (v: unknown) => Number(v ?? 0)
export const date = (day: number) => new Date(day).toISOString().slice(0, 10)
export const iso = (ms: number) => new Date(ms).toISOString()
export const round = (x: number, digits = 4) => Math.round(x * 10 ** digits) / 10 ** digits
const money = (cents: number) => Math.round(cents) / 100

/** One game and environment, local days `from`..`to` (UTC midnights of the game's dates). */
export interface DayScope {
  gameId: string
  env: string
  from: number
  to: number
}
/** One game and environment, client time `[from, to)` in epoch ms. */
export interface TimeScope {
  gameId: string
  env: string
  from: number
  to: number
}

/** Merged HyperLogLog count of sketch rows. */
function distinct(rows: Array<{ sketch: string }>): number {
  if (!rows.length) return 0
  const h = HyperLogLog.parse(rows[0].sketch)
  for (let i = 1; i < rows.length; i++) h.merge(HyperLogLog.parse(rows[i].sketch))
  return h.count()
}

/**
 * Behavior analytics (spec 1 "other endpoints", issue 17): event aggregates, feature adoption and
 * product trend from the behavior rollup's day counters and sketches; funnels, paths and event
 * details from raw events, walking only the id ranges where the range's events were stored
 * (`analytics_event_span`); transactions from the rollup's payment rows, by client time.
 */
export function behaviorAnalytics(db: Db, ingest: Pick<IngestService, 'scan' | 'timeline' | 'timelineText'>) {
  const counters = (q: DayScope, kinds: string[], names?: string[]) =>
    db.all<{
      day: number
      kind: string
      name: string
      n: number
      total: number
      first_ts: number
      last_ts: number
    }>(
      `SELECT day, kind, name, n, total, first_ts, last_ts FROM analytics_behavior_day
       WHERE game_id = ? AND env = ? AND day >= ? AND day <= ? AND kind IN (${kinds.map(() => '?').join(', ')})
       ${names ? `AND name IN (${names.map(() => '?').join(', ')})` : ''}`,
      [q.gameId, q.env, q.from, q.to, ...kinds, ...(names ?? [])],
    )
  const sketches = (q: DayScope, kinds: string[], names?: string[]) =>
    db.all<{ day: number; kind: string; name: string; users: number; sketch: string }>(
      `SELECT day, kind, name, users, sketch FROM analytics_behavior_sketch
       WHERE game_id = ? AND env = ? AND day >= ? AND day <= ? AND kind IN (${kinds.map(() => '?').join(', ')})
       ${names ? `AND name IN (${names.map(() => '?').join(', ')})` : ''}`,
      [q.gameId, q.env, q.from, q.to, ...kinds, ...(names ?? [])],
    )
  const byName = <R extends { name: string }>(rows: R[]) => {
    const out = new Map<string, R[]>()
    for (const r of rows) {
      const list = out.get(r.name)
      if (list) list.push(r)
      else out.set(r.name, [r])
    }
    return out
  }
  const raw = rawReads(db, ingest)

  return {
    /** Per event name of the range: count, distinct users, and both per day; the top `top` by count. */
    async aggregates(q: DayScope & { top: number; events?: string[] }) {
      const rows = await counters(q, ['event'], q.events)
      const totals = new Map<string, number>()
      let total = 0
      for (const r of rows) {
        totals.set(r.name, (totals.get(r.name) ?? 0) + n(r.n))
        total += n(r.n)
      }
      const top = [...totals.entries()].sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1)).slice(0, q.top)
      const names = top.map(([name]) => name)
      const sk = byName(names.length ? await sketches(q, ['event'], names) : [])
      const counts = byName(rows)
      return {
        startDate: date(q.from),
        endDate: date(q.to),
        totalEvents: total,
        distinctEvents: totals.size,
        events: top.map(([event, count]) => {
          const perDay = new Map((counts.get(event) ?? []).map((r) => [n(r.day), n(r.n)]))
          const usersPerDay = new Map((sk.get(event) ?? []).map((r) => [n(r.day), n(r.users)]))
          const days = []
          for (let d = q.from; d <= q.to; d += DAY)
            days.push({ date: date(d), count: perDay.get(d) ?? 0, users: usersPerDay.get(d) ?? 0 })
          return { event, count, users: distinct(sk.get(event) ?? []), days }
        }),
      }
    },

    /** Raw events of the range, newest first (client time, then id), paged; `total` counts every match. */
    events: (q: TimeScope & { event?: string; userId?: string; page: number; pageSize: number }) =>
      eventList(raw, q),
    paths: (q: Parameters<typeof paths>[1]) => paths(raw, q),
    funnel: (q: TimeScope & { steps: FunnelStep[]; window: number; order: FunnelOrder }) => funnel(raw, q),

    /**
     * Feature adoption of the range from `feature_use`: per feature its users (distinct over
     * the range), uses, share of the range's active users, first and last use. Active users:
     * those who logged in or started a session, and every feature user (so a share is at most 1).
     */
    async adoption(q: DayScope) {
      const [rows, sk, active] = await Promise.all([
        counters(q, ['feature']),
        sketches(q, ['feature']),
        db.all<{ sketch: string }>(
          'SELECT sketch FROM analytics_day_sketch WHERE game_id = ? AND env = ? AND day >= ? AND day <= ?',
          [q.gameId, q.env, q.from, q.to],
        ),
      ])
      const activeUsers = distinct([...active, ...sk])
      const bySketch = byName(sk)
      const features = [...byName(rows).entries()].map(([feature, list]) => {
        const users = distinct(bySketch.get(feature) ?? [])
        return {
          feature,
          users,
          uses: list.reduce((s, r) => s + n(r.n), 0),
          share: activeUsers ? round(users / activeUsers) : 0,
          firstUse: iso(Math.min(...list.map((r) => n(r.first_ts)))),
          lastUse: iso(Math.max(...list.map((r) => n(r.last_ts)))),
        }
      })
      features.sort((a, b) => b.users - a.users || b.uses - a.uses || (a.feature < b.feature ? -1 : 1))
      return { startDate: date(q.from), endDate: date(q.to), activeUsers, features }
    },

    /** One feature's users and uses per value of a dimension; share: of the feature's users. */
    async adoptionBreakdown(q: DayScope & { feature: string; dimension: Dimension }) {
      const kind = `feature.${q.dimension}`
      const prefix = `${q.feature}${sep}`
      const [rows, sk, all] = await Promise.all([
        counters(q, [kind]),
        sketches(q, [kind]),
        sketches(q, ['feature'], [q.feature]),
      ])
      const users = distinct(all)
      const bySketch = byName(sk.filter((r) => r.name.startsWith(prefix)))
      const values = [...byName(rows.filter((r) => r.name.startsWith(prefix))).entries()].map(
        ([name, list]) => {
          const u = distinct(bySketch.get(name) ?? [])
          return {
            value: name.slice(prefix.length),
            users: u,
            uses: list.reduce((s, r) => s + n(r.n), 0),
            share: users ? round(u / users) : 0,
          }
        },
      )
      values.sort((a, b) => b.users - a.users || b.uses - a.uses || (a.value < b.value ? -1 : 1))
      return {
        startDate: date(q.from),
        endDate: date(q.to),
        feature: q.feature,
        dimension: q.dimension,
        users,
        values,
      }
    },

    /** Successful revenue per product per day (refunds beside it); the top `top` products by revenue. */
    async productTrend(q: DayScope & { top: number }) {
      const rows = await counters(q, ['product', 'product.refund'])
      const products = new Map<
        string,
        { revenue: number; transactions: number; refunds: number; days: Map<number, [number, number]> }
      >()
      for (const r of rows) {
        let p = products.get(r.name)
        if (!p) {
          p = { revenue: 0, transactions: 0, refunds: 0, days: new Map() }
          products.set(r.name, p)
        }
        if (r.kind === 'product.refund') {
          p.refunds += n(r.total)
          continue
        }
        p.revenue += n(r.total)
        p.transactions += n(r.n)
        const d = p.days.get(n(r.day)) ?? [0, 0]
        d[0] += n(r.total)
        d[1] += n(r.n)
        p.days.set(n(r.day), d)
      }
      const top = [...products.entries()]
        .sort((a, b) => b[1].revenue - a[1].revenue || (a[0] < b[0] ? -1 : 1))
        .slice(0, q.top)
      return {
        startDate: date(q.from),
        endDate: date(q.to),
        products: top.map(([id, p]) => {
          const days = []
          for (let d = q.from; d <= q.to; d += DAY) {
            const x = p.days.get(d) ?? [0, 0]
            days.push({ date: date(d), revenue: money(x[0]), transactions: x[1] })
          }
          return {
            productId: id === '' ? null : id,
            revenue: money(p.revenue),
            transactions: p.transactions,
            refunds: money(p.refunds),
            days,
          }
        }),
      }
    },

    /** Payments of the range (each order and status once), newest first, paged. */
    async transactions(
      q: TimeScope & { status?: string; userId?: string; productId?: string; page: number; pageSize: number },
    ) {
      let where = 'game_id = ? AND env = ? AND ts >= ? AND ts < ?'
      const params: Param[] = [q.gameId, q.env, q.from, q.to]
      for (const [col, v] of [
        ['status', q.status],
        ['user_id', q.userId],
        ['product_id', q.productId],
      ] as const)
        if (v !== undefined) {
          where += ` AND ${col} = ?`
          params.push(v)
        }
      const [count, rows] = await Promise.all([
        db.get<{ n: number }>(`SELECT COUNT(*) AS n FROM analytics_transaction WHERE ${where}`, params),
        db.all<{
          ts: number
          order_id: string
          status: string
          amount_cents: number
          currency: string | null
          user_id: string | null
          product_id: string | null
          kind: string
          platform: string | null
        }>(
          `SELECT ts, order_id, status, amount_cents, currency, user_id, product_id, kind, platform FROM analytics_transaction
           WHERE ${where} ORDER BY ts DESC, order_id DESC, status DESC LIMIT ? OFFSET ?`,
          [...params, q.pageSize, q.page * q.pageSize],
        ),
      ])
      return {
        items: rows.map((r) => ({
          timestamp: iso(n(r.ts)),
          orderId: r.order_id,
          status: r.status,
          amount: money(n(r.amount_cents)),
          amountCents: n(r.amount_cents),
          currency: r.currency,
          userId: r.user_id,
          productId: r.product_id,
          kind: r.kind,
          platform: r.platform,
        })),
        total: n(count?.n),
        page: q.page,
        pageSize: q.pageSize,
      }
    },
  }
}
