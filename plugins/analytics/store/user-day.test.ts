import { expect, test } from 'bun:test'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { migrate } from '../../../core/db'
import { openSqlite } from '../../../core/db/sqlite'
import { forEachEngine, until } from '../../../test/helpers'
import { ingestMigrations } from '../../ingest/migrations'
import type { CommitRows } from '../../ingest/persist/persist'
import { persist } from '../../ingest/persist/persist'
import { PersistThread } from '../../ingest/persist/persist-thread'
import { purge } from '../../ingest/store/store'
import { migratedStore } from '../../ingest/testing'
import { DAY, floorTo } from '../lib/time'
import { warehouseStore } from '../warehouse/warehouse'
import { AnalyticsRollup } from './rollup'
import { analyticsCommit, analyticsTables } from './testing'
import { USER_DAY_IDLE_KEPT, USER_DAY_IDLE_MERGE_ROWS, USER_DAY_LOG_KEPT, USER_DAY_MERGE_ROWS } from './write'

// User-days through the commit path with no writer cache in front of it, so every duplicate
// reaches the store: each user counts once per day, whether its row still waits in the log
// (SQLite) or was merged, and whether its duplicate is logged before or after the merge.

const NOW = Date.UTC(2026, 10, 20, 12)
const TODAY = floorTo(NOW, DAY)

const commitOf = (users: string[]): CommitRows =>
  analyticsCommit(NOW, { userDays: users.flatMap((u) => ['g', 'prod', TODAY, u]) })
const many = (prefix: string, n: number) => Array.from({ length: n }, (_, i) => `${prefix}${i}`)

forEachEngine((engine) => {
  const store = migratedStore(engine, [analyticsTables])

  const dau = async () =>
    (await warehouseStore(store.db).dau({ gameId: 'g', env: 'prod', days: 1 }, NOW)).points[0].dau
  const rows = async (table: string) =>
    Number((await store.db.get<{ n: number }>(`SELECT COUNT(*) AS n FROM ${table}`))?.n)

  test('each user counts once a day, across the log, its merge and duplicates on either side', async () => {
    await persist(store.db, commitOf(['a', 'b', 'c']))
    expect(await dau()).toBe(3)
    // Logged twice before any merge.
    await persist(store.db, commitOf(['b', 'c', 'd', 'd']))
    expect(await dau()).toBe(4)

    // Enough rows for a merge: all but the newest USER_DAY_LOG_KEPT move into analytics_user_day
    // (SQLite; PostgreSQL never logs): the 7 rows above (4 users) and the first x's.
    await persist(store.db, commitOf(many('x', USER_DAY_MERGE_ROWS)))
    expect(await dau()).toBe(4 + USER_DAY_MERGE_ROWS)
    const merged = 7 + USER_DAY_MERGE_ROWS - USER_DAY_LOG_KEPT
    expect(await rows('analytics_user_day')).toBe(engine === 'sqlite' ? merged - 3 : 4 + USER_DAY_MERGE_ROWS)
    expect(await rows('analytics_user_day_log')).toBe(engine === 'sqlite' ? USER_DAY_LOG_KEPT : 0)

    // A user already merged, logged again, and a new one: only the new one counts, before...
    await persist(store.db, commitOf(['a', 'y']))
    expect(await dau()).toBe(5 + USER_DAY_MERGE_ROWS)
    if (engine === 'sqlite') expect(await rows('analytics_user_day_log')).toBe(USER_DAY_LOG_KEPT + 2)
    // ...and after the next merge, which takes 'a' again (and 'y'): the key drops it.
    await persist(store.db, commitOf(many('z', USER_DAY_MERGE_ROWS)))
    expect(await dau()).toBe(5 + 2 * USER_DAY_MERGE_ROWS)
    const logged = await rows('analytics_user_day_log')
    expect(logged).toBe(engine === 'sqlite' ? USER_DAY_LOG_KEPT : 0)
    // The day counter holds the merged users; the logged ones (new z's) are added by the read.
    const daily = await store.db.get<{ dau: number }>(
      'SELECT dau FROM analytics_daily WHERE game_id = ? AND day = ?',
      ['g', TODAY],
    )
    expect(Number(daily?.dau)).toBe(5 + 2 * USER_DAY_MERGE_ROWS - logged)
    expect(await rows('analytics_user_day')).toBe(5 + 2 * USER_DAY_MERGE_ROWS - logged)
  })

  test('retention purges stored user-days and leaves logged ones to their merge, which counts them', async () => {
    await persist(store.db, commitOf(['late']))
    expect(await dau()).toBe(6 + 2 * USER_DAY_MERGE_ROWS)
    // One user-week per merged user (all in this week); logged users get theirs at their merge.
    const logged = await rows('analytics_user_day_log')
    const weeks = await rows('analytics_user_week')
    expect(weeks).toBe(6 + 2 * USER_DAY_MERGE_ROWS - logged)
    await purge(store.db, [{ gameId: 'g', name: 'prod', retentionDays: 7 }], NOW + 8 * DAY, [
      new AnalyticsRollup(undefined),
    ])
    expect(await rows('analytics_user_day')).toBe(0)
    expect(await rows('analytics_user_day_log')).toBe(logged)
    // The day counters outlive the purge.
    expect(await dau()).toBe(6 + 2 * USER_DAY_MERGE_ROWS)
    // User-weeks go once their whole week is before the cutoff (a cutoff within the week keeps it).
    expect(await rows('analytics_user_week')).toBe(weeks)
    await purge(store.db, [{ gameId: 'g', name: 'prod', retentionDays: 7 }], NOW + 15 * DAY, [
      new AnalyticsRollup(undefined),
    ])
    expect(await rows('analytics_user_week')).toBe(0)
  })
})

test('the SQLite persist thread merges the log between commits, below the size a commit merges at', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'liveops-user-day-'))
  const file = join(dir, 'e.sqlite')
  const db = openSqlite(file)
  const thread = new PersistThread({ url: file })
  try {
    await migrate(db, [{ plugin: 'ingest', migrations: ingestMigrations }, analyticsTables])
    const n = USER_DAY_IDLE_MERGE_ROWS + 100
    expect(n).toBeLessThan(USER_DAY_MERGE_ROWS)
    await thread.persist(commitOf(many('u', n)))
    const count = async (table: string) =>
      Number((await db.get<{ n: number }>(`SELECT COUNT(*) AS n FROM ${table}`))?.n)
    // Nothing else queued: the thread moves all but the newest USER_DAY_IDLE_KEPT on its own.
    await until(async () => (await count('analytics_user_day_log')) === USER_DAY_IDLE_KEPT)
    expect(await count('analytics_user_day')).toBe(n - USER_DAY_IDLE_KEPT)
    const daily = await db.get<{ dau: number }>(
      'SELECT dau FROM analytics_daily WHERE game_id = ? AND day = ?',
      ['g', TODAY],
    )
    expect(Number(daily?.dau)).toBe(n - USER_DAY_IDLE_KEPT)
    expect((await warehouseStore(db).dau({ gameId: 'g', env: 'prod', days: 1 }, NOW)).points[0].dau).toBe(n)
  } finally {
    await thread.close()
    await db.close()
    rmSync(dir, { recursive: true, force: true })
  }
})

test('a failing merge between commits is reported to the server, and the commits still land', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'liveops-user-day-'))
  const file = join(dir, 'e.sqlite')
  const db = openSqlite(file)
  const warnings: string[] = []
  const thread = new PersistThread({ url: file }, 1, 'normal', (message, error) =>
    warnings.push(`${message}: ${error}`),
  )
  try {
    await migrate(db, [{ plugin: 'ingest', migrations: ingestMigrations }, analyticsTables])
    // The merge's target is gone; the log, which commits write, is not.
    await db.exec('ALTER TABLE analytics_user_day RENAME TO analytics_user_day_away')
    await thread.persist(commitOf(many('u', USER_DAY_IDLE_MERGE_ROWS)))
    await until(() => warnings.length > 0)
    expect(warnings[0]).toMatch(/^rollup upkeep 'analytics' failed: .*analytics_user_day/)
    await thread.persist(commitOf(['late']))
    expect(Number((await db.get<{ n: number }>('SELECT COUNT(*) AS n FROM analytics_user_day_log'))?.n)).toBe(
      USER_DAY_IDLE_MERGE_ROWS + 1,
    )
  } finally {
    await thread.close()
    await db.close()
    rmSync(dir, { recursive: true, force: true })
  }
})
