import type { Db } from '../../../core/db'
import { DAY } from '../lib/time'

/**
 * The retention and D1 queries the cohort counters replaced (server.ts until analytics migration
 * 006): the join of first sights with user-days. Kept as the oracle of `cohort.test.ts` and the
 * baseline of `scripts/bench/analytics.ts`; the server does not use them.
 */

/** The retention query before the cohort counters (server.ts until migration 006), verbatim in its logic. */
export async function oracleRetention(
  db: Db,
  q: { gameId: string; env: string; from: number; to: number; interval: 'day' | 'week'; size: number },
  today: number,
) {
  const unit = q.interval === 'week' ? 7 * DAY : DAY
  const start = (day: number) => (q.interval === 'week' ? day - ((day / DAY + 3) % 7) * DAY : day)
  const first = start(q.from)
  const last = start(q.to)
  const to = last + unit * (q.size + 1) - DAY
  const p = [q.gameId, q.env, first, to]
  const active =
    'SELECT game_id, env, day, user_id FROM analytics_user_day WHERE game_id = ? AND env = ? AND day >= ? AND day <= ?'
  const cohortRows = await db.all<{ first_day: number; n: number }>(
    'SELECT first_day, COUNT(*) AS n FROM analytics_first_seen WHERE game_id = ? AND env = ? AND first_day >= ? AND first_day <= ? GROUP BY first_day',
    [q.gameId, q.env, first, last + unit - DAY],
  )
  const rows = await db.all<{ first_day: number; day: number; user_id: string }>(
    `SELECT f.first_day, a.day, f.user_id FROM analytics_first_seen f
     JOIN (${active}) a ON a.game_id = f.game_id AND a.env = f.env AND a.user_id = f.user_id AND a.day > f.first_day
     WHERE f.game_id = ? AND f.env = ? AND f.first_day >= ? AND f.first_day <= ?`,
    [...p, q.gameId, q.env, first, last + unit - DAY],
  )
  const size = new Map<number, number>()
  for (const c of cohortRows)
    size.set(start(Number(c.first_day)), (size.get(start(Number(c.first_day))) ?? 0) + Number(c.n))
  const users = new Map<string, Set<string>>()
  for (const r of rows) {
    const c = start(Number(r.first_day))
    const k = `${c}|${(start(Number(r.day)) - c) / unit}`
    if (k.endsWith('|0')) continue
    const s = users.get(k) ?? new Set<string>()
    users.set(k, s)
    s.add(r.user_id)
  }
  const out = []
  for (let c = first; c <= last; c += unit) {
    const total = size.get(c) ?? 0
    const counts: Array<number | null> = []
    for (let k = 1; k <= q.size; k++)
      counts.push(c + k * unit <= today ? (users.get(`${c}|${k}`)?.size ?? 0) : null)
    out.push({ cohort: new Date(c).toISOString().slice(0, 10), users: total, counts })
  }
  return out
}

/** The D1 of the overview before the counters: first seen on days `from`..`to`, active the day after. */
export async function oracleD1(db: Db, gameId: string, env: string, from: number, to: number) {
  const r = await db.get<{ cohort: number; back: number }>(
    `SELECT COUNT(*) AS cohort, SUM(CASE WHEN EXISTS (SELECT 1 FROM analytics_user_day d WHERE d.game_id = f.game_id
          AND d.env = f.env AND d.user_id = f.user_id AND d.day = f.first_day + ${DAY}) THEN 1 ELSE 0 END) AS back
     FROM analytics_first_seen f WHERE f.game_id = ? AND f.env = ? AND f.first_day >= ? AND f.first_day <= ?`,
    [gameId, env, from, to],
  )
  return { cohort: Number(r?.cohort ?? 0), back: Number(r?.back ?? 0) }
}
