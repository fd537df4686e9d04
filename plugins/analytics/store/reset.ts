import type { Db } from '../../../core/db'
import { deleteInSlices, primaryKey } from '../../../core/db/slices'
import type { Pause } from '../../../core/event-log-types'
import { DAY, HOUR, floorTo } from '../lib/time'
import { type Zone, zone } from '../lib/zone'
import { mondayOf } from '../server/cohort'

/**
 * What a rebuild deletes (docs/analytics.md, "Rebuilding from a date"). A rebuild from a date X
 * recomputes each game from the start of ITS local date X (its days are its time zone's): the
 * event log delivers again the game's rows from that instant (`replayFrom`), and `reset` deletes
 * exactly what those rows contributed to, table by table, by one of these rules:
 *
 * - `day`: rows of local days >= X (day counters, day sketches, user-days, first sights whose
 *   first day is >= X, cohort cells of activity days >= X);
 * - `week`: rows of weeks starting on or after X (a week that began before X keeps its user-weeks
 *   and cohort-week cells whole: its days before X are not delivered again, and its days from X on
 *   add no user-week it does not already hold);
 * - `time`: rows keyed by an absolute time (minute, hour, event time) >= the game's cut.
 *
 * A game whose local date X does not start on a UTC hour (a zone such as Asia/Kolkata) cannot
 * split its hour counters there: it is rebuilt whole (all its rows deleted and delivered again).
 */
export type Rule = 'day' | 'week' | 'time'
export type Tables = ReadonlyArray<readonly [table: string, column: string, rule: Rule]>

/** What the analytics consumer derives from the log, with its reset rule. */
export const ANALYTICS_TABLES: Tables = [
  ['analytics_first_seen', 'first_day', 'day'],
  ['analytics_user_day', 'day', 'day'],
  ['analytics_user_day_log', 'day', 'day'],
  ['analytics_user_week', 'week', 'week'],
  ['analytics_daily', 'day', 'day'],
  ['analytics_online', 'minute', 'time'],
  ['analytics_day_sketch', 'day', 'day'],
  ['analytics_invocation_hour', 'hour', 'time'],
  ['analytics_invocation_hist', 'hour', 'time'],
  ['analytics_game_day', 'day', 'day'],
  ['analytics_game_hour', 'hour', 'time'],
  ['analytics_payer_day', 'day', 'day'],
  ['analytics_social_user', 'first_ts', 'time'],
  ['analytics_platform_user', 'day', 'day'],
  ['analytics_cohort_day', 'day', 'day'],
  ['analytics_cohort_week', 'week', 'week'],
  ['analytics_order', 'ts', 'time'],
]
/** Small tables that name every game the analytics consumer holds results of. */
const ANALYTICS_GAMES = [
  'analytics_daily',
  'analytics_game_day',
  'analytics_game_hour',
  'analytics_online',
  'analytics_invocation_hour',
]

/** The behavior consumer's tables. */
export const BEHAVIOR_TABLES: Tables = [
  ['analytics_behavior_day', 'day', 'day'],
  ['analytics_behavior_sketch', 'day', 'day'],
  ['analytics_event_span', 'hour', 'time'],
  ['analytics_death', 'ts', 'time'],
  ['analytics_transaction', 'ts', 'time'],
  ['analytics_behavior_order', 'ts', 'time'],
]
/** Every event of a game adds to its day's event counter. */
const BEHAVIOR_GAMES = ['analytics_behavior_day']

/**
 * The start of local date `day` (its UTC midnight key) in zone `z`, when that falls on a UTC hour;
 * undefined when it does not (offsets of a half or quarter hour).
 */
export function dayStart(z: Zone, day: number): number | undefined {
  for (let h = day - 15 * HOUR; h <= day + 15 * HOUR; h += HOUR)
    if (z.day(h) >= day) return z.day(h - 1) < day ? h : undefined
  return undefined
}

/** The first Monday on or after `day`. */
const weekFrom = (day: number) => {
  const monday = mondayOf(day)
  return monday === day ? day : monday + 7 * DAY
}

/**
 * Where each game's results are recomputed from in a rebuild from a date, per the game's zone;
 * shared by a consumer's `reset` and `replayFrom`, which must agree (after a restart too: both
 * follow from the date and the zone alone).
 */
export class RebuildCuts {
  private readonly cuts = new Map<string, number | undefined>()

  constructor(private readonly timezone: (gameId: string) => Promise<string | undefined>) {}

  /** The date of `from` (its UTC date, read as the game's local date) as a day key. */
  static day(from: number): number {
    return floorTo(from, DAY)
  }

  /** The instant the game's local date of `from` starts; undefined: the game is rebuilt whole. */
  async cut(gameId: string, from: number): Promise<number | undefined> {
    const k = `${from}\u0001${gameId}`
    if (this.cuts.has(k)) return this.cuts.get(k)
    const cut = dayStart(zone(await this.timezone(gameId)), RebuildCuts.day(from))
    if (this.cuts.size > 10_000) this.cuts.clear()
    this.cuts.set(k, cut)
    return cut
  }

  /** `LogConsumer.replayFrom`: a game rebuilt whole gets every row again. */
  async replayFrom(gameId: string, from: number): Promise<number> {
    return (await this.cut(gameId, from)) ?? Number.NEGATIVE_INFINITY
  }

  /** A game's time zone changed: its cuts are worked out again. */
  forget(): void {
    this.cuts.clear()
  }

  /**
   * Deletes what the rows `replayFrom` delivers again contributed to (everything when `from` is
   * undefined), game by game, in slices of the key (core/db/slices.ts) with `pause` between them:
   * each slice a statement of its own (`LogConsumer.reset`). `games` are tables that name every
   * game and environment holding results: their rows go last, so a reset cut short and run again
   * still finds every game and environment it had not finished.
   */
  async reset(db: Db, tables: Tables, games: readonly string[], from: number | undefined, pause: Pause) {
    if (from === undefined) {
      // PostgreSQL: TRUNCATE (one cheap statement) leaves no dead rows for the rebuild's inserts
      // to step over in every unique index, and writes no WAL per row (a 10 M-event log's
      // user-days are millions of rows).
      if (db.dialect === 'postgres') await db.run(`TRUNCATE ${tables.map(([t]) => t).join(', ')}`)
      else
        for (const [t] of tables) {
          await deleteInSlices(db, t, { where: '1 = 1', params: [], pinned: [] }, pause)
          await pause()
        }
      return
    }
    const day = RebuildCuts.day(from)
    const order = [
      ...tables.filter(([t]) => !games.includes(t)),
      ...tables.filter(([t]) => games.includes(t)),
    ]
    // Environment by environment: a key (game_id, env, day, ...) is then walked from the date on,
    // not from the game's first row (the first slice of a month's user-days from its middle held
    // the loop ~100 ms reading the half it keeps).
    for (const [gameId, env] of await streamsIn(db, games)) {
      const cut = await this.cut(gameId, from)
      for (const [t, col, rule] of order) {
        const stream = { where: 'game_id = ? AND env = ?', params: [gameId, env], pinned: ['game_id', 'env'] }
        if (cut === undefined) await deleteInSlices(db, t, stream, pause)
        else {
          const since = {
            where: `${col} >= ?`,
            params: [rule === 'day' ? day : rule === 'week' ? weekFrom(day) : cut],
          }
          // A key that goes on with the column (game_id, env, day, ...) is walked from the date on;
          // any other (a user's first day) key by key, deleting the rows from the date.
          const ordered = (await primaryKey(db, t))[2] === col
          await deleteInSlices(
            db,
            t,
            ordered
              ? {
                  ...stream,
                  where: `${stream.where} AND ${since.where}`,
                  params: [...stream.params, ...since.params],
                }
              : { ...stream, filter: since },
            pause,
          )
        }
        await pause()
      }
    }
  }
}

/**
 * The games and environments `tables` hold rows of, in order: each found by a seek of the key
 * (game_id, env lead every result table's), not by a walk of the table (`SELECT DISTINCT`).
 */
async function streamsIn(db: Db, tables: readonly string[]): Promise<Array<[string, string]>> {
  const found = new Map<string, [string, string]>()
  const next = async (sql: string, params: string[]) => (await db.get<{ v: string }>(sql, params))?.v
  for (const t of tables) {
    let game = await next(`SELECT game_id AS v FROM ${t} ORDER BY game_id LIMIT 1`, [])
    while (game !== undefined) {
      const g = game
      const env = (after?: string) =>
        next(
          `SELECT env AS v FROM ${t} WHERE game_id = ?${after === undefined ? '' : ' AND env > ?'} ORDER BY env LIMIT 1`,
          after === undefined ? [g] : [g, after],
        )
      for (let e = await env(); e !== undefined; e = await env(e)) found.set(`${g}\u0001${e}`, [g, e])
      game = await next(`SELECT game_id AS v FROM ${t} WHERE game_id > ? ORDER BY game_id LIMIT 1`, [g])
    }
  }
  return [...found.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([, s]) => s)
}

/** The analytics consumer's reset. */
export const resetAnalytics = (cuts: RebuildCuts, db: Db, from: number | undefined, pause: Pause) =>
  cuts.reset(db, ANALYTICS_TABLES, ANALYTICS_GAMES, from, pause)

/** The behavior consumer's reset. */
export const resetBehavior = (cuts: RebuildCuts, db: Db, from: number | undefined, pause: Pause) =>
  cuts.reset(db, BEHAVIOR_TABLES, BEHAVIOR_GAMES, from, pause)

/**
 * Per-user and per-minute detail past retention goes; day and hour counters stay. Logged
 * user-days are left to their merge, which counts them; the next purge takes them.
 */
export async function purgeAnalytics(
  db: Db,
  s: { gameId: string; env: string },
  cutoff: number,
): Promise<number> {
  const days = await db.run('DELETE FROM analytics_user_day WHERE game_id = ? AND env = ? AND day < ?', [
    s.gameId,
    s.env,
    floorTo(cutoff, DAY),
  ])
  const minutes = await db.run('DELETE FROM analytics_online WHERE game_id = ? AND env = ? AND minute < ?', [
    s.gameId,
    s.env,
    cutoff,
  ])
  // User-weeks wholly before the cutoff's week; the cohort counters stay.
  const weeks = await db.run('DELETE FROM analytics_user_week WHERE game_id = ? AND env = ? AND week < ?', [
    s.gameId,
    s.env,
    mondayOf(floorTo(cutoff, DAY)),
  ])
  return days + minutes + weeks
}
