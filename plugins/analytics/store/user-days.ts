import type { Db, Param, Row } from '../../../core/db'
import type { Table } from '../../../core/db/bulk'
import { rowsByKeys } from '../../../core/db/keyed'
import { countMergedCohorts, mondayOf, weekOf } from '../server/cohort'
import type { FirstDayCache } from './rollup-parts'

/**
 * User-days and user-weeks of the analytics consumer (`write.ts`): each user active on a local
 * day (week) once, inserted in key order; the rows that were new come back, and the day and
 * cohort counters count them.
 */

export const USER_DAYS = {
  table: { name: 'analytics_user_day', bigint: ['day'] } as Table,
  cols: ['game_id', 'env', 'day', 'user_id'],
  tail: 'ON CONFLICT (game_id, env, day, user_id) DO NOTHING RETURNING game_id, env, day, user_id',
}

export const USER_WEEKS = {
  table: { name: 'analytics_user_week', bigint: ['week'] } as Table,
  cols: ['game_id', 'env', 'week', 'user_id'],
  tail: 'ON CONFLICT (game_id, env, week, user_id) DO NOTHING RETURNING game_id, env, week, user_id',
}

/** The distinct user-weeks of new user-days, in key order. */
export function weeksOf(days: Row[]): Param[] {
  const weeks = new Map<string, Param[]>()
  for (const r of days) {
    const week = mondayOf(Number(r.day))
    const [g, env, user] = [String(r.game_id), String(r.env), String(r.user_id)]
    weeks.set(`${g}\u0001${env}\u0001${String(week).padStart(16, '0')}\u0001${user}`, [g, env, week, user])
  }
  return [...weeks.entries()].sort(([a], [b]) => (a < b ? -1 : 1)).flatMap(([, v]) => v)
}

/**
 * The first day of each user of `days` (first sights are stored before user-days in every
 * batch): those the consumer's cache `known` holds from it, the others looked up by stream
 * (core/db/keyed.ts) and noted in `known`.
 */
export async function firstDaysOf(tx: Db, days: Row[], known?: FirstDayCache): Promise<Map<string, number>> {
  const out = new Map<string, number>()
  const byStream = new Map<string, { gameId: string; env: string; users: Set<string> }>()
  for (const r of days) {
    if (known) {
      const day = known.get(String(r.game_id), String(r.env), String(r.user_id))
      if (day !== undefined) {
        out.set(`${r.game_id}\u0001${r.env}\u0001${r.user_id}`, day)
        continue
      }
    }
    const k = `${r.game_id}\u0001${r.env}`
    let st = byStream.get(k)
    if (!st) {
      st = { gameId: String(r.game_id), env: String(r.env), users: new Set() }
      byStream.set(k, st)
    }
    st.users.add(String(r.user_id))
  }
  for (const { gameId, env, users } of byStream.values())
    for (const r of await rowsByKeys<{ user_id: string; first_day: number }>(tx, {
      table: 'analytics_first_seen',
      cols: ['user_id', 'first_day'],
      scope: [
        ['game_id', gameId],
        ['env', env],
      ],
      key: 'user_id',
      keys: [...users],
    })) {
      out.set(`${gameId}\u0001${env}\u0001${r.user_id}`, Number(r.first_day))
      known?.set(gameId, env, String(r.user_id), Number(r.first_day))
    }
  return out
}

const USER_DAY_COLS = USER_DAYS.cols.join(', ')

/**
 * Upgrades: before wave 3 the rollups of SQLite and MySQL appended each new user-day to
 * `analytics_user_day_log` and merged it into `analytics_user_day` in chunks of thousands, so a
 * store stopped then can hold rows never merged. The first batch moves them over (with their
 * weeks, in key order), counts what was new into the cohort counters and returns the new
 * user-days for the day counters; every later batch finds the log empty in one lookup of its key.
 */
export async function mergeLeftoverUserDays(tx: Db): Promise<Row[]> {
  const left = await tx.get<{ id: number }>('SELECT id FROM analytics_user_day_log ORDER BY id DESC LIMIT 1')
  if (!left) return []
  const upTo = [left.id]
  const firstDays = new Map<string, number>()
  for (const r of await tx.all(
    `SELECT DISTINCT l.game_id, l.env, l.user_id, f.first_day FROM analytics_user_day_log l
     JOIN analytics_first_seen f ON f.game_id = l.game_id AND f.env = l.env AND f.user_id = l.user_id
     WHERE l.id <= ?`,
    upTo,
  ))
    firstDays.set(`${r.game_id}\u0001${r.env}\u0001${r.user_id}`, Number(r.first_day))
  const added = await tx.all(
    `INSERT INTO analytics_user_day (${USER_DAY_COLS}) SELECT ${USER_DAY_COLS} FROM analytics_user_day_log WHERE id <= ?
     ORDER BY ${USER_DAY_COLS} ${USER_DAYS.tail}`,
    upTo,
  )
  const weeks = await tx.all(
    `INSERT INTO analytics_user_week (game_id, env, week, user_id)
     SELECT DISTINCT game_id, env, ${weekOf('day')}, user_id FROM analytics_user_day_log WHERE id <= ?
     ORDER BY 1, 2, 3, 4 ${USER_WEEKS.tail}`,
    upTo,
  )
  await countMergedCohorts(tx, added, weeks, firstDays)
  await tx.run('DELETE FROM analytics_user_day_log WHERE id <= ?', upTo)
  return added
}
