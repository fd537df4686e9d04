import { afterAll, beforeAll, expect, test } from 'bun:test'
import { join } from 'node:path'
import { type TestApp, forEachEngine, makeApp, until } from '../../../test/helpers'
import { DAY, SECRET, game } from '../testing'

/*
 * Ingestion refuses event times outside max_event_age_days before and max_event_future_s after
 * their receipt, but rows stored before it with times decades away (1970, 9999) stayed, and the
 * rollup days they made were never purged. Ingest migration 011 asks for a one-time clean-up,
 * which the start runs with the configured window (store/far-dated.ts).
 */
const plugins = {
  games: {},
  ingest: { signing_secret: SECRET, purge_interval_minutes: 0 },
  analytics: {},
  experiments: {},
}
const Y9999 = Date.UTC(9999, 11, 31)

forEachEngine((engine) => {
  let a: TestApp
  let gameId: string
  beforeAll(async () => {
    a = await makeApp(engine, { plugins })
    const admin = await a.token('admin')
    gameId = (await a.req('POST', '/api/games', { token: admin, body: game })).body.id
  })
  afterAll(() => a.stop())

  const ids = async (table: string, col: string) =>
    (
      await a.db.all<{ v: number }>(`SELECT ${col} AS v FROM ${table} WHERE game_id = ? ORDER BY ${col}`, [
        gameId,
      ])
    ).map((r) => Number(r.v))

  test('raw rows outside the window of their receipt, and results no event inside it could make, go once at start', async () => {
    const now = Date.now()
    const today = Math.floor(now / DAY) * DAY
    // Stored before the window existed (seq 0: counted long ago), and one inside it, 300 days old.
    const raw: Array<[number, number, number]> = [
      [1, now, 0],
      [2, now, Y9999],
      [3, now, now - 300 * DAY],
      [4, now - 2 * DAY, now - 2 * DAY + 3_600_000],
      [5, now, now + 3 * DAY],
    ]
    for (const [id, receivedAt, ts] of raw)
      await a.db.run(
        `INSERT INTO ingest_events (id, received_at, game_id, env, event, ts, props, seq)
         VALUES (?, ?, ?, 'prod', 'login', ?, '{}', 0)`,
        [id, receivedAt, gameId, ts],
      )
    await a.db.run(
      `INSERT INTO ingest_payments (game_id, env, order_id, status, amount_cents, ts, received_at)
       VALUES (?, 'prod', 'o-1970', 'success', 100, 0, ?), (?, 'prod', 'o-now', 'success', 100, ?, ?)`,
      [gameId, now, gameId, now, now],
    )
    const days = [0, today - 600 * DAY, today - 30 * DAY, today, Y9999]
    for (const day of days)
      await a.db.run(
        'INSERT INTO analytics_daily (game_id, env, day, dau, new_users) VALUES (?, ?, ?, 1, 1)',
        [gameId, 'prod', day],
      )
    await a.db.run(
      `INSERT INTO analytics_first_seen (game_id, env, user_id, first_ts, first_day)
       VALUES (?, 'prod', 'u-old', 5, 0), (?, 'prod', 'u-now', ?, ?)`,
      [gameId, gameId, now, today],
    )
    await a.db.run(
      `INSERT INTO experiments_exposures (game_id, env, experiment_id, user_id, variant, ts)
       VALUES (?, 'prod', 'x', 'u-old', 'a', ?), (?, 'prod', 'x', 'u-now', 'a', ?)`,
      [gameId, Y9999, gameId, now],
    )
    // As an upgraded store has it: migration 011 asked for the clean-up (this app's start did it on none).
    await until(async () => !(await a.db.get('SELECT name FROM ingest_sweeps')))
    await a.db.run("INSERT INTO ingest_sweeps (name) VALUES ('far_dated')")

    const b = await makeApp(engine, {
      plugins,
      store: a,
      config: engine === 'sqlite' ? { database: { url: join(a.dataDir, 'test.sqlite') } } : {},
    })
    try {
      await until(async () => !(await a.db.get('SELECT name FROM ingest_sweeps')), {
        what: 'the far-dated clean-up done',
        ms: 20_000,
      })
    } finally {
      await b.stop()
    }
    expect(await ids('ingest_events', 'id')).toEqual([3, 4])
    expect(await ids('ingest_payments', 'ts')).toEqual([now])
    // A day the store existed for (within the age window of its first migration) stays, however old.
    expect(await ids('analytics_daily', 'day')).toEqual([today - 30 * DAY, today])
    expect(await ids('analytics_first_seen', 'first_ts')).toEqual([now])
    expect(await ids('experiments_exposures', 'ts')).toEqual([now])
  })
})
