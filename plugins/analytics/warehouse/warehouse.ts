import type { Db, Param } from '../../../core/db'
import { DAY, HOUR, MINUTE, floorTo, histValue } from '../lib/time'
import { zone } from '../lib/zone'

const date = (ms: number) => new Date(ms).toISOString().slice(0, 10)
const n = (v: unknown) => Number(v ?? 0)

/** `game_id = ? [AND env = ?]`: built, not `? IS NULL`, because PostgreSQL cannot type a bare NULL parameter. */
export function scope(gameId: string, env: string | undefined): { where: string; params: Param[] } {
  return env === undefined
    ? { where: 'game_id = ?', params: [gameId] }
    : { where: 'game_id = ? AND env = ?', params: [gameId, env] }
}

/**
 * Reads of the warehouse and invocation endpoints: every one reads rollups, never raw events.
 * Days are the game's (its time zone); minutes and hours are absolute.
 */
export function warehouseStore(
  db: Db,
  timezone: (gameId: string) => Promise<string | undefined> = async () => undefined,
) {
  /** Today in the game's time zone (its days), as the rollups key it. */
  const today = async (gameId: string, now: number) => zone(await timezone(gameId)).today(now)
  return {
    async dau(q: { gameId: string; env?: string; days: number }, now = Date.now()) {
      const to = await today(q.gameId, now)
      const from = to - (q.days - 1) * DAY
      const { where, params } = scope(q.gameId, q.env)
      const rows = await db.all<{ env: string; day: number; dau: number; new_users: number }>(
        `SELECT env, day, SUM(dau) AS dau, SUM(new_users) AS new_users FROM analytics_daily
         WHERE ${where} AND day >= ? GROUP BY env, day`,
        [...params, from],
      )
      const envs = q.env !== undefined ? [q.env] : [...new Set(rows.map((r) => r.env))].sort()
      const byKey = new Map(rows.map((r) => [`${r.env}|${n(r.day)}`, r]))
      const points = []
      for (let day = from; day <= to; day += DAY)
        for (const env of envs) {
          const r = byKey.get(`${env}|${day}`)
          points.push({ date: date(day), gameId: q.gameId, env, dau: n(r?.dau), newUsers: n(r?.new_users) })
        }
      return { points }
    },

    async revenue(q: { gameId: string; env?: string; days: number }, now = Date.now()) {
      const to = await today(q.gameId, now)
      const from = to - (q.days - 1) * DAY
      const { where, params } = scope(q.gameId, q.env)
      const rows = await db.all<{ day: number; r: number; f: number; x: number }>(
        `SELECT day, SUM(revenue_cents) AS r, SUM(refunds_cents) AS f, SUM(failed) AS x FROM analytics_daily WHERE ${where} AND day >= ? GROUP BY day`,
        [...params, from],
      )
      const byDay = new Map(rows.map((r) => [n(r.day), r]))
      const points = []
      for (let day = from; day <= to; day += DAY) {
        const r = byDay.get(day)
        points.push({ date: date(day), revenueCents: n(r?.r), refundsCents: n(r?.f), failed: n(r?.x) })
      }
      return { points }
    },

    /** Per-minute estimates of each environment, summed (spec: "merged by sum"). */
    async online(q: { gameId: string; env?: string; minutes: number }, now = Date.now()) {
      const from = floorTo(now, MINUTE) - (q.minutes - 1) * MINUTE
      const { where, params } = scope(q.gameId, q.env)
      const rows = await db.all<{ minute: number; online: number }>(
        `SELECT minute, SUM(online) AS online FROM analytics_online WHERE ${where} AND minute >= ? GROUP BY minute`,
        [...params, from],
      )
      const byMinute = new Map(rows.map((r) => [n(r.minute), n(r.online)]))
      const points = []
      for (let m = from; m <= floorTo(now, MINUTE); m += MINUTE)
        points.push({ minute: new Date(m).toISOString(), online: byMinute.get(m) ?? 0 })
      return { points }
    },

    async summary(q: { gameId: string; env?: string; hours: number }, now = Date.now()) {
      const from = floorTo(now, HOUR) - (q.hours - 1) * HOUR
      const { where, params } = scope(q.gameId, q.env)
      const fns = await db.all<{
        function_id: string
        total: number
        failed: number
        ds: number
        dn: number
      }>(
        `SELECT function_id, SUM(total) AS total, SUM(failed) AS failed, SUM(duration_sum) AS ds, SUM(duration_n) AS dn
         FROM analytics_invocation_hour WHERE ${where} AND hour >= ? GROUP BY function_id`,
        [...params, from],
      )
      const hist = await db.all<{ bucket: number; n: number }>(
        `SELECT bucket, SUM(n) AS n FROM analytics_invocation_hist WHERE ${where} AND hour >= ? GROUP BY bucket ORDER BY bucket`,
        [...params, from],
      )
      const total = fns.reduce((a, r) => a + n(r.total), 0)
      const failed = fns.reduce((a, r) => a + n(r.failed), 0)
      const ds = fns.reduce((a, r) => a + n(r.ds), 0)
      const dn = fns.reduce((a, r) => a + n(r.dn), 0)
      const counted = hist.reduce((a, r) => a + n(r.n), 0)
      let p95 = 0
      let seen = 0
      for (const r of hist) {
        seen += n(r.n)
        if (seen >= Math.ceil(counted * 0.95)) {
          p95 = Math.round(histValue(n(r.bucket)) * 100) / 100
          break
        }
      }
      const round = (x: number) => Math.round(x * 100) / 100
      return {
        total,
        failed,
        successRate: total ? (total - failed) / total : 1,
        avgDurationMs: dn ? round(ds / dn) : 0,
        p95DurationMs: p95,
        topFunctions: fns
          .map((r) => ({
            functionId: r.function_id,
            total: n(r.total),
            failed: n(r.failed),
            avgDurationMs: n(r.dn) ? round(n(r.ds) / n(r.dn)) : 0,
          }))
          .sort((a, b) => b.total - a.total || a.functionId.localeCompare(b.functionId))
          .slice(0, 10),
      }
    },

    async trend(
      q: { gameId: string; env?: string; interval: 'hour' | 'day'; limit?: number },
      now = Date.now(),
    ) {
      const unit = q.interval === 'day' ? DAY : HOUR
      const count = q.limit ?? (q.interval === 'day' ? 14 : 24)
      const from = floorTo(now, unit) - (count - 1) * unit
      const { where, params } = scope(q.gameId, q.env)
      const rows = await db.all<{ hour: number; total: number; failed: number }>(
        `SELECT hour, SUM(total) AS total, SUM(failed) AS failed FROM analytics_invocation_hour WHERE ${where} AND hour >= ? GROUP BY hour`,
        [...params, from],
      )
      const byBucket = new Map<number, { total: number; failed: number }>()
      for (const r of rows) {
        const b = floorTo(n(r.hour), unit)
        const x = byBucket.get(b) ?? { total: 0, failed: 0 }
        x.total += n(r.total)
        x.failed += n(r.failed)
        byBucket.set(b, x)
      }
      const points = []
      for (let b = from; b <= floorTo(now, unit); b += unit)
        points.push({ bucket: new Date(b).toISOString(), ...(byBucket.get(b) ?? { total: 0, failed: 0 }) })
      return { points }
    },
  }
}
