import { expect, test } from 'bun:test'
import { forEachEngine } from '../../../test/helpers'
import { migratedStore } from '../../ingest/testing'
import { DAY, HOUR } from '../lib/time'
import { zone } from '../lib/zone'
import { ANALYTICS_TABLES, RebuildCuts, dayStart, resetAnalytics } from './reset'
import { analyticsTables } from './testing'

// Rebuilding from a date: where each game's day starts, and what `reset` deletes per game.

const X = Date.UTC(2026, 10, 5) // Thursday 2026-11-05
const DST = Date.UTC(2026, 10, 1) // New York leaves daylight saving time that day

test("the start of a game's date: its local midnight, when that is on a UTC hour", () => {
  expect(dayStart(zone('UTC'), X)).toBe(X)
  expect(dayStart(zone('America/New_York'), X)).toBe(X + 5 * HOUR)
  // Midnight of the DST day is still EDT (the clocks go back at 02:00 local).
  expect(dayStart(zone('America/New_York'), DST)).toBe(DST + 4 * HOUR)
  expect(dayStart(zone('Asia/Tokyo'), X)).toBe(X - 9 * HOUR)
  expect(dayStart(zone('Pacific/Kiritimati'), X)).toBe(X - 14 * HOUR)
  // Half- and quarter-hour zones: no UTC hour starts their day.
  expect(dayStart(zone('Asia/Kolkata'), X)).toBeUndefined()
  expect(dayStart(zone('Asia/Kathmandu'), X)).toBeUndefined()
})

forEachEngine((engine) => {
  const store = migratedStore(engine, [analyticsTables])
  const zones: Record<string, string> = { utc: 'UTC', ny: 'America/New_York', india: 'Asia/Kolkata' }

  test('reset from a date: per game, days from the date, weeks from the next Monday, times from its cut; a half-hour zone whole', async () => {
    const db = store.db
    const games = Object.keys(zones)
    const put = (sql: string, rows: unknown[][]) => Promise.all(rows.map((r) => db.run(sql, r as never[])))
    for (const g of games) {
      await put(
        "INSERT INTO analytics_daily (game_id, env, day, dau, new_users, revenue_cents, refunds_cents, failed) VALUES (?, 'prod', ?, 1, 0, 0, 0, 0)",
        [
          [g, X - DAY],
          [g, X],
        ],
      )
      // Weeks: Monday 2026-11-02 holds X; the next starts 2026-11-09.
      await put("INSERT INTO analytics_user_week (game_id, env, week, user_id) VALUES (?, 'prod', ?, 'u')", [
        [g, X - 3 * DAY],
        [g, X + 4 * DAY],
      ])
      // Hours around each game's cut (NY: 05:00 UTC on X).
      await put(
        "INSERT INTO analytics_game_hour (game_id, env, hour, metric, dim, n, total, first_ts, last_ts) VALUES (?, 'prod', ?, 'crash', '', 1, 0, 0, 0)",
        [
          [g, X + 4 * HOUR],
          [g, X + 5 * HOUR],
        ],
      )
    }
    const cuts = new RebuildCuts(async (g) => zones[g])
    await resetAnalytics(cuts, db, X + 7 * HOUR, async () => {})
    const left = async (table: string, col: string, g: string) =>
      (
        await db.all<{ v: number }>(`SELECT ${col} AS v FROM ${table} WHERE game_id = ? ORDER BY ${col}`, [g])
      ).map((r) => Number(r.v))
    expect(await left('analytics_daily', 'day', 'utc')).toEqual([X - DAY])
    expect(await left('analytics_daily', 'day', 'ny')).toEqual([X - DAY])
    expect(await left('analytics_user_week', 'week', 'utc')).toEqual([X - 3 * DAY])
    expect(await left('analytics_user_week', 'week', 'ny')).toEqual([X - 3 * DAY])
    // UTC's day starts at 00:00: both hours go; New York's at 05:00: the 04:00 hour stays.
    expect(await left('analytics_game_hour', 'hour', 'utc')).toEqual([])
    expect(await left('analytics_game_hour', 'hour', 'ny')).toEqual([X + 4 * HOUR])
    for (const [t] of ANALYTICS_TABLES)
      expect(await db.all(`SELECT 1 FROM ${t} WHERE game_id = 'india'`)).toEqual([])
    // And the log delivers again what was deleted: each game's rows from its cut, India's all.
    expect(await cuts.replayFrom('utc', X + 7 * HOUR)).toBe(X)
    expect(await cuts.replayFrom('ny', X + 7 * HOUR)).toBe(X + 5 * HOUR)
    expect(await cuts.replayFrom('india', X + 7 * HOUR)).toBe(Number.NEGATIVE_INFINITY)
  })

  test('a reset cut short at any pause and run again leaves exactly what one whole reset leaves', async () => {
    const db = store.db
    const cuts = new RebuildCuts(async (g) => (g === 'ny' ? 'America/New_York' : 'UTC'))
    // 'late' has results from X on only, in two environments: once an environment's rows of the
    // tables naming the games are gone, a second run finds it no more, so those go after its other
    // tables' rows.
    // The rows of each stream (the other tables stay empty throughout).
    const rows: Array<[string, string, unknown[]]> = [
      [
        'analytics_daily',
        '(game_id, env, day, dau, new_users, revenue_cents, refunds_cents, failed)',
        [X, 1, 0, 0, 0, 0],
      ],
      ['analytics_user_week', '(game_id, env, week, user_id)', [X + 4 * DAY, 'u']],
      ['analytics_cohort_week', '(game_id, env, cohort, week, n)', [X + 4 * DAY, X + 4 * DAY, 1]],
      ['analytics_order', '(game_id, env, order_id, ts, log_id, amount_cents)', ['o1', X + 6 * HOUR, 1, 100]],
      [
        'analytics_game_hour',
        '(game_id, env, hour, metric, dim, n, total, first_ts, last_ts)',
        [X + 5 * HOUR, 'crash', '', 1, 0, 0, 0],
      ],
    ]
    const seed = async () => {
      for (const [t] of rows) await db.run(`DELETE FROM ${t}`)
      for (const [g, env] of [
        ['late', 'dev'],
        ['late', 'prod'],
        ['ny', 'prod'],
      ])
        for (const [t, cols, vals] of rows) {
          const all = [g, env, ...vals] as never[]
          await db.run(`INSERT INTO ${t} ${cols} VALUES (${all.map(() => '?').join(', ')})`, all)
        }
      // New York keeps rows from before its cut.
      await db.run(
        "INSERT INTO analytics_daily (game_id, env, day, dau, new_users, revenue_cents, refunds_cents, failed) VALUES ('ny', 'prod', ?, 1, 0, 0, 0, 0)",
        [X - DAY],
      )
    }
    const snapshot = async () => {
      const out: Record<string, unknown[]> = {}
      for (const [t] of rows) out[t] = await db.all(`SELECT * FROM ${t} ORDER BY game_id, env`)
      return JSON.stringify(out)
    }
    await seed()
    let pauses = 0
    await resetAnalytics(cuts, db, X, async () => void pauses++)
    const whole = await snapshot()
    expect(whole).toContain('"ny"')
    expect(whole).not.toContain('"late"')
    for (let k = 1; k <= pauses; k++) {
      await seed()
      let n = 0
      await expect(
        resetAnalytics(cuts, db, X, async () => {
          if (++n === k) throw new Error('killed')
        }),
      ).rejects.toThrow('killed')
      await resetAnalytics(cuts, db, X, async () => {})
      expect({ k, left: await snapshot() }).toEqual({ k, left: whole })
    }
  })
})
