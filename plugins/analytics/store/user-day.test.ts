import { expect, test } from 'bun:test'
import { forEachEngine } from '../../../test/helpers'
import { purge } from '../../ingest/store/store'
import { migratedStore } from '../../ingest/testing'
import { DAY, floorTo } from '../lib/time'
import { warehouseStore } from '../warehouse/warehouse'
import { AnalyticsRollup } from './rollup'
import type { AnalyticsRows } from './rollup-parts'
import { analyticsTables } from './testing'
import { earlyAnalytics, writeAnalytics } from './write'

// User-days through the consumer's write half with no cache in front of it, so every duplicate
// reaches the store: each user counts once per day, within a batch and across batches; user-days
// an older version left in its log (SQLite, MySQL) are counted once by the next batch.

const NOW = Date.UTC(2026, 10, 20, 12)
const TODAY = floorTo(NOW, DAY)

const rowsOf = (users: string[]): AnalyticsRows => ({
  firstSeen: [],
  userDays: users.flatMap((u) => ['g', 'prod', TODAY, u]),
  hours: [],
  hist: [],
  online: [],
  activeDays: [],
  gameDays: [],
  gameHours: [],
  payments: [],
  social: [],
  platforms: [],
})
const many = (prefix: string, n: number) => Array.from({ length: n }, (_, i) => `${prefix}${i}`)

forEachEngine((engine) => {
  const store = migratedStore(engine, [analyticsTables])
  const batch = (users: string[]) =>
    store.db.tx(async (tx) => {
      const rows = rowsOf(users)
      const early = earlyAnalytics(tx, rows)
      await Promise.all([
        early,
        writeAnalytics(tx, rows, { payments: Promise.resolve([]), hasPayments: false }, early),
      ])
    })
  const dau = async () =>
    (await warehouseStore(store.db).dau({ gameId: 'g', env: 'prod', days: 1 }, NOW)).points[0].dau
  const rows = async (table: string) =>
    Number((await store.db.get<{ n: number }>(`SELECT COUNT(*) AS n FROM ${table}`))?.n)

  test('each user counts once a day, within a batch and across batches; the day counter agrees', async () => {
    await batch(['a', 'b', 'c'])
    expect(await dau()).toBe(3)
    await batch(['b', 'c', 'd', 'd'])
    expect(await dau()).toBe(4)
    await batch(many('x', 3000))
    await batch(['a', 'y', ...many('x', 10)])
    expect(await dau()).toBe(3005)
    expect(await rows('analytics_user_day')).toBe(3005)
    const daily = await store.db.get<{ dau: number }>(
      'SELECT dau FROM analytics_daily WHERE game_id = ? AND day = ?',
      ['g', TODAY],
    )
    expect(Number(daily?.dau)).toBe(3005)
  })

  test.skipIf(engine === 'postgres')(
    'user-days an older version logged and never merged are counted once by the next batch, with their cohorts',
    async () => {
      const yesterday = TODAY - DAY
      await store.db.run(
        'INSERT INTO analytics_first_seen (game_id, env, user_id, first_ts, first_day) VALUES (?, ?, ?, ?, ?)',
        ['g', 'prod', 'old', yesterday, yesterday],
      )
      // 'old' twice (logged by two commits), and 'a', stored already today.
      for (const [id, user] of [
        [1, 'old'],
        [2, 'old'],
        [3, 'a'],
      ] as const)
        await store.db.run(
          'INSERT INTO analytics_user_day_log (id, game_id, env, day, user_id) VALUES (?, ?, ?, ?, ?)',
          [id, 'g', 'prod', TODAY, user],
        )
      await batch(['old', 'z'])
      expect(await dau()).toBe(3007)
      expect(await rows('analytics_user_day_log')).toBe(0)
      const back = await store.db.get<{ n: number }>(
        'SELECT n FROM analytics_cohort_day WHERE game_id = ? AND env = ? AND cohort = ? AND day = ?',
        ['g', 'prod', yesterday, TODAY],
      )
      expect(Number(back?.n)).toBe(1)
      await batch(['old'])
      expect(await dau()).toBe(3007)
    },
  )

  test('retention purges user-days and, once their week is past, user-weeks; day counters stay', async () => {
    // Two more users where the log test ran.
    const total = engine === 'postgres' ? 3005 : 3007
    expect(await rows('analytics_user_week')).toBe(total)
    const rollup = new AnalyticsRollup()
    const purgers = [
      (db: typeof store.db, env: { gameId: string; env: string }, cutoff: number) =>
        rollup.purge(db, env, cutoff),
    ]
    await purge(store.db, [{ gameId: 'g', name: 'prod', retentionDays: 7 }], NOW + 8 * DAY, purgers)
    expect(await rows('analytics_user_day')).toBe(0)
    expect(await dau()).toBe(total)
    // A cutoff within the week keeps its user-weeks.
    expect(await rows('analytics_user_week')).toBe(total)
    await purge(store.db, [{ gameId: 'g', name: 'prod', retentionDays: 7 }], NOW + 15 * DAY, purgers)
    expect(await rows('analytics_user_week')).toBe(0)
  })
})
