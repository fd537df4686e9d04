import type { Db, Row } from '../../../core/db'
import { insertRows as insertMany } from '../../../core/db/bulk'
import { DAY } from '../lib/time'

/**
 * Retention from counters kept at ingest (issue 17; migration 006). A cohort is the users first
 * seen on a local day (`analytics_first_seen.first_day`, fixed once stored). Each user-day that is
 * new, and later than its user's first day, adds one to `analytics_cohort_day (cohort, day)`; each
 * user-week that is new (`analytics_user_week`, weeks from Monday) and later than the user's first
 * week adds one to `analytics_cohort_week (cohort week, week)`. The keys of the user-day and
 * user-week sets decide what is new, so concurrent commits (PostgreSQL) count a user once.
 *
 * The counters say exactly what the join of first sights with user-days said (the test keeps that
 * query as the oracle), in a few hundred rows instead of a row per user-day.
 */

/** The Monday (local date, UTC midnight ms) of a day column, in SQL both engines run. */
export const weekOf = (col: string) => `(${col} - ((${col} / ${DAY} + 3) % 7) * ${DAY})`
/** The same in JS. */
export const mondayOf = (day: number) => day - ((day / DAY + 3) % 7) * DAY

/** A counter row at an existing key adds to it. */
const bump = (t: string, unit: 'day' | 'week') =>
  `ON CONFLICT (game_id, env, cohort, ${unit}) DO UPDATE SET n = ${t}.n + excluded.n`

/**
 * Adds to the cohort counters the user-days and user-weeks found new (`days` and `weeks`, the rows
 * two inserts returned: on SQLite in the merge of the user-day log, on PostgreSQL in a commit's
 * early part, see `write.ts`), each
 * later than its user's first day (week), given the first day of every merged user (`firstDays`,
 * keyed by game, environment and user, looked up once; the first sights of logged users are
 * stored by then, in the same or an earlier commit). One pass in JS: counting in SQL looked up
 * every logged row's first sight, user-day and user-week twice over, and a merge took 25-35 ms.
 */
export async function countMergedCohorts(
  tx: Db,
  days: Row[],
  weeks: Row[],
  firstDays: Map<string, number>,
): Promise<void> {
  type Counter = [string, string, number, number, number]
  /** Per cohort and later day (week): the rows later than their user's first day (week). */
  const count = (rows: Row[], unit: 'day' | 'week', cohortOf: (firstDay: number) => number) => {
    const counts = new Map<string, Counter>()
    for (const r of rows) {
      const g = String(r.game_id)
      const env = String(r.env)
      const first = firstDays.get(`${g}\u0001${env}\u0001${r.user_id}`)
      if (first === undefined) continue
      const cohort = cohortOf(first)
      const at = Number(r[unit])
      if (at <= cohort) continue
      const k = `${g}\u0001${env}\u0001${cohort}\u0001${at}`
      const c = counts.get(k)
      if (c) c[4]++
      else counts.set(k, [g, env, cohort, at, 1])
    }
    // Key order (days are epoch ms of equal length, so their text sorts as their value).
    return [...counts.entries()].sort(([a], [b]) => (a < b ? -1 : 1)).flatMap(([, c]) => c)
  }
  const counters = (unit: 'day' | 'week', rows: Row[], cohortOf: (firstDay: number) => number) => {
    const t = `analytics_cohort_${unit}`
    return insertMany(
      tx,
      { name: t, bigint: ['cohort', unit, 'n'] },
      ['game_id', 'env', 'cohort', unit, 'n'],
      count(rows, unit, cohortOf),
      bump(t, unit),
    )
  }
  // Sent together (pipelined on PostgreSQL): the two tables share no row.
  await Promise.all([counters('day', days, (first) => first), counters('week', weeks, mondayOf)])
}

/**
 * The first day of the user of a row of `t`: a lookup by the first sights' key, per row. A join
 * left the planner free to hash the whole table or to walk another index, and with statistics
 * behind a fast-growing table it did both (seconds per commit).
 */
export const firstDay = (t: string) =>
  `(SELECT f.first_day FROM analytics_first_seen f WHERE f.game_id = ${t}.game_id AND f.env = ${t}.env AND f.user_id = ${t}.user_id)`

export interface CohortScope {
  gameId: string
  env: string
}

const n = (v: unknown) => Number(v ?? 0)

/** Reads of the counters. */
export function cohorts(db: Db) {
  /**
   * Users first seen per local day `from`..`to` (the cohorts' sizes): the day counter of new
   * users, which counts each first sight the commit stored, in the same transaction.
   */
  async function sizes(q: CohortScope, from: number, to: number): Promise<Map<number, number>> {
    const rows = await db.all<{ day: number; n: number }>(
      'SELECT day, new_users AS n FROM analytics_daily WHERE game_id = ? AND env = ? AND day >= ? AND day <= ? AND new_users > 0',
      [q.gameId, q.env, from, to],
    )
    return new Map(rows.map((r) => [n(r.day), n(r.n)]))
  }

  /** Per cohort `from`..`to` (days, or Mondays) and later day (week): users back. Key: `cohort|later`. */
  async function back(q: CohortScope, unit: 'day' | 'week', from: number, to: number) {
    const table = unit === 'day' ? 'analytics_cohort_day' : 'analytics_cohort_week'
    const rows = await db.all<{ cohort: number; later: number; n: number }>(
      `SELECT cohort, ${unit} AS later, n FROM ${table} WHERE game_id = ? AND env = ? AND cohort >= ? AND cohort <= ?`,
      [q.gameId, q.env, from, to],
    )
    const out = new Map<string, number>()
    for (const r of rows) {
      const k = `${n(r.cohort)}|${n(r.later)}`
      out.set(k, (out.get(k) ?? 0) + n(r.n))
    }
    return out
  }

  return {
    sizes,
    back,
    /** D1: of the users first seen on days `from`..`to`, how many were active the day after. */
    async d1(q: CohortScope, from: number, to: number): Promise<{ cohort: number; back: number }> {
      const [size, counts] = await Promise.all([sizes(q, from, to), back(q, 'day', from, to)])
      let cohort = 0
      let returned = 0
      for (const [day, users] of size) {
        cohort += users
        returned += counts.get(`${day}|${day + DAY}`) ?? 0
      }
      return { cohort, back: returned }
    },
  }
}
