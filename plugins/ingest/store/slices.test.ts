import { expect, test } from 'bun:test'
import type { Db, Param } from '../../../core/db'
import { insertMany } from '../../../core/db/bulk'
import { deleteInSlices } from '../../../core/db/slices'
import { forEachEngine } from '../../../test/helpers'
import { migrations as analyticsMigrations } from '../../analytics/migrations'
import { migratedStore } from '../testing'

/*
 * A deleted game's rows went in one DELETE per table: on SQLite ~415 ms of the event loop for a
 * game of a few million events, every request of every game waiting (audit, wave 3). They go in
 * slices now, each a statement of its own over a range of the key.
 */
forEachEngine((engine) => {
  const store = migratedStore(engine, [{ plugin: 'analytics', migrations: analyticsMigrations }])

  /** `db` whose writes' changed rows are recorded, each statement's count. */
  const counted = (db: Db) => {
    const runs: number[] = []
    const spy = new Proxy(db, {
      get(target, key) {
        if (key === 'run')
          return async (sql: string, params?: Param[]) => {
            const n = await target.run(sql, params)
            runs.push(n)
            return n
          }
        const v = Reflect.get(target, key)
        return typeof v === 'function' ? v.bind(target) : v
      },
    }) as Db
    return { spy, runs }
  }
  const count = async (table: string, where: string, params: Param[]) =>
    Number(
      (await store.db.get<{ n: number }>(`SELECT COUNT(*) AS n FROM ${table} WHERE ${where}`, params))?.n,
    )

  test('a game’s rows go in slices of at most the slice size, within its key; other rows stay', async () => {
    const db = store.db
    const params: Param[] = []
    // Two environments and days of the game going, one of the game staying, interleaved in the key.
    for (const [g, n] of [
      ['g-gone', 1050],
      ['g-kept', 60],
      ['g-a', 40],
    ] as const)
      for (let i = 0; i < n; i++) params.push(g, i % 2 ? 'prod' : 'dev', (i % 7) * 86_400_000, `u${i}`)
    for (let i = 0; i < params.length; i += 400 * 4)
      await insertMany(
        db,
        'analytics_user_day',
        ['game_id', 'env', 'day', 'user_id'],
        params.slice(i, i + 400 * 4),
      )
    const { spy, runs } = counted(db)
    let pauses = 0
    const n = await deleteInSlices(
      spy,
      'analytics_user_day',
      { where: 'game_id = ?', params: ['g-gone'], pinned: ['game_id'] },
      async () => {
        pauses++
      },
      100,
    )
    expect(n).toBe(1050)
    expect(Math.max(...runs)).toBeLessThanOrEqual(100)
    expect(runs.length).toBeGreaterThanOrEqual(11)
    expect(pauses).toBe(runs.length - 1)
    expect(await count('analytics_user_day', 'game_id = ?', ['g-gone'])).toBe(0)
    expect(await count('analytics_user_day', 'game_id = ?', ['g-kept'])).toBe(60)
    expect(await count('analytics_user_day', 'game_id = ?', ['g-a'])).toBe(40)
  })

  test('a filter the key does not order: each slice walks the slice size of keys, deleting the matching rows of them', async () => {
    const db = store.db
    const params: Param[] = []
    // Within the game the key goes by environment and day: the rows to go (user ids ending in 7)
    // are spread over all of it, 100 of 1,000.
    for (let i = 0; i < 1000; i++) params.push('g-f', i % 2 ? 'prod' : 'dev', (i % 7) * 86_400_000, `u${i}`)
    for (let i = 0; i < params.length; i += 400 * 4)
      await insertMany(
        db,
        'analytics_user_day',
        ['game_id', 'env', 'day', 'user_id'],
        params.slice(i, i + 400 * 4),
      )
    const { spy, runs } = counted(db)
    const n = await deleteInSlices(
      spy,
      'analytics_user_day',
      {
        where: 'game_id = ?',
        params: ['g-f'],
        pinned: ['game_id'],
        filter: { where: "user_id LIKE '%7'", params: [] },
      },
      async () => {},
      100,
    )
    expect(n).toBe(100)
    // Ten slices of 100 keys each (a slice looking for 100 matches would have read all 1,000 keys).
    expect(runs.length).toBeGreaterThanOrEqual(10)
    expect(Math.max(...runs)).toBeLessThan(100)
    expect(await count('analytics_user_day', "game_id = ? AND user_id LIKE '%7'", ['g-f'])).toBe(0)
    expect(await count('analytics_user_day', 'game_id = ?', ['g-f'])).toBe(900)
  })

  test('a table keyed by id is walked whole by id, each slice deleting its rows of the stream; a stopped walk resumes', async () => {
    const db = store.db
    const params: Param[] = []
    for (let i = 1; i <= 900; i++) params.push(i, i % 3 ? 'g-gone' : 'g-kept', i % 2 ? 'prod' : 'dev', 1, i)
    for (let i = 0; i < params.length; i += 300 * 5)
      await insertMany(
        db,
        'analytics_user_day_log',
        ['id', 'game_id', 'env', 'day', 'user_id'],
        params.slice(i, i + 300 * 5),
      )
    const scope = { where: 'game_id = ? AND env = ?', params: ['g-gone', 'prod'], pinned: ['game_id', 'env'] }
    const { spy, runs } = counted(db)
    // Stopped after the third slice (the app stopping): what went is committed.
    let pauses = 0
    const stop = new Error('stopped')
    await expect(
      deleteInSlices(
        spy,
        'analytics_user_day_log',
        scope,
        async () => {
          if (++pauses === 3) throw stop
        },
        100,
      ),
    ).rejects.toBe(stop)
    const left = await count('analytics_user_day_log', 'game_id = ? AND env = ?', ['g-gone', 'prod'])
    expect(left).toBeGreaterThan(0)
    expect(left).toBeLessThan(300)
    // Taken up again, it finishes; each slice spans 100 ids, so deletes at most 100 rows.
    expect(await deleteInSlices(spy, 'analytics_user_day_log', scope, async () => {}, 100)).toBe(left)
    expect(Math.max(...runs)).toBeLessThanOrEqual(100)
    expect(runs.length).toBeGreaterThanOrEqual(9)
    expect(await count('analytics_user_day_log', 'game_id = ? AND env = ?', ['g-gone', 'prod'])).toBe(0)
    expect(await count('analytics_user_day_log', 'game_id = ? AND env = ?', ['g-gone', 'dev'])).toBe(300)
    expect(await count('analytics_user_day_log', 'game_id = ?', ['g-kept'])).toBe(300)
  })
})
