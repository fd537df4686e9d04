import { afterAll, beforeAll, expect, test } from 'bun:test'
import { type Db, migrate } from '../../../core/db'
import { type TestApp, forEachEngine, makeApp, rawDb } from '../../../test/helpers'
import m002 from '../../experiments/migrations/002_take_exposures.sql' with { type: 'text' }
import { ingestMigrations } from '../../ingest/migrations'
import { SECRET, game, signed } from '../../ingest/testing'
import { migrations } from '../migrations'

// Ingest and analytics apart (issue 16 point 5): the rollups move with their data, ingest works
// without analytics, and the extension point refuses a late rollup.
forEachEngine((engine) => {
  test('an existing install keeps every rollup row: the tables ingest kept pass to analytics and experiments', async () => {
    const raw = await rawDb(engine)
    const db: Db = raw.db
    try {
      await migrate(db, [{ plugin: 'ingest', migrations: ingestMigrations }])
      const day = Date.UTC(2026, 0, 5)
      await db.run('INSERT INTO ingest_user_day (game_id, env, day, user_id) VALUES (?, ?, ?, ?)', [
        'g',
        'prod',
        day,
        'u1',
      ])
      await db.run(
        'INSERT INTO ingest_user_day_log (id, game_id, env, day, user_id) VALUES (?, ?, ?, ?, ?)',
        [7, 'g', 'prod', day, 'u2'],
      )
      await db.run('INSERT INTO ingest_first_seen (game_id, env, user_id, first_ts) VALUES (?, ?, ?, ?)', [
        'g',
        'prod',
        'u1',
        day + 5,
      ])
      await db.run(
        'INSERT INTO ingest_daily (game_id, env, day, dau, new_users, revenue_cents, refunds_cents, failed) VALUES (?, ?, ?, ?, ?, ?, ?, ?)',
        ['g', 'prod', day, 3, 2, 1234, 56, 1],
      )
      await db.run(
        'INSERT INTO ingest_online (game_id, env, minute, online, sketch, version) VALUES (?, ?, ?, ?, ?, ?)',
        ['g', 'prod', day, 9, 's:', 4],
      )
      await db.run(
        'INSERT INTO ingest_invocation_hour (game_id, env, hour, function_id, total, failed, duration_sum, duration_n) VALUES (?, ?, ?, ?, ?, ?, ?, ?)',
        ['g', 'prod', day, 'spawn', 10, 2, 300, 10],
      )
      await db.run(
        'INSERT INTO ingest_invocation_hist (game_id, env, hour, bucket, n) VALUES (?, ?, ?, ?, ?)',
        ['g', 'prod', day, 71, 10],
      )
      await db.run(
        'INSERT INTO ingest_exposures (game_id, env, experiment_id, user_id, variant, ts) VALUES (?, ?, ?, ?, ?, ?)',
        ['g', 'prod', 'E', 'u1', 'B', day],
      )
      await db.run(
        'INSERT INTO ingest_user_events (game_id, env, user_id, event, last_ts) VALUES (?, ?, ?, ?, ?)',
        ['g', 'prod', 'u1', 'buy', day + 9],
      )

      await migrate(db, [
        { plugin: 'ingest', migrations: ingestMigrations },
        { plugin: 'experiments', migrations: [{ id: 2, name: 'take_exposures', sql: m002 }] },
        { plugin: 'analytics', migrations },
      ])
      const one = (sql: string) => db.get<Record<string, unknown>>(sql)
      const num = (r: Record<string, unknown> | undefined) =>
        r && Object.fromEntries(Object.entries(r).map(([k, v]) => [k, typeof v === 'string' ? v : Number(v)]))
      expect(num(await one('SELECT user_id, day FROM analytics_user_day'))).toEqual({ user_id: 'u1', day })
      expect(num(await one('SELECT id, user_id FROM analytics_user_day_log'))).toEqual({
        id: 7,
        user_id: 'u2',
      })
      // Migration 002: a first sight from before keeps the UTC day it was counted on.
      expect(num(await one('SELECT user_id, first_ts, first_day FROM analytics_first_seen'))).toEqual({
        user_id: 'u1',
        first_ts: day + 5,
        first_day: day,
      })
      expect(
        num(await one('SELECT dau, new_users, revenue_cents, refunds_cents, failed FROM analytics_daily')),
      ).toEqual({
        dau: 3,
        new_users: 2,
        revenue_cents: 1234,
        refunds_cents: 56,
        failed: 1,
      })
      expect(num(await one('SELECT online, version FROM analytics_online'))).toEqual({
        online: 9,
        version: 4,
      })
      expect(num(await one('SELECT total, failed, duration_sum FROM analytics_invocation_hour'))).toEqual({
        total: 10,
        failed: 2,
        duration_sum: 300,
      })
      expect(num(await one('SELECT bucket, n FROM analytics_invocation_hist'))).toEqual({ bucket: 71, n: 10 })
      expect(num(await one('SELECT variant FROM experiments_exposures'))).toEqual({ variant: 'B' })
      expect(num(await one('SELECT last_ts FROM experiments_user_events'))).toEqual({ last_ts: day + 9 })
      // The keys came along: a repeated key is still refused.
      await expect(
        db.run('INSERT INTO analytics_first_seen (game_id, env, user_id, first_ts) VALUES (?, ?, ?, ?)', [
          'g',
          'prod',
          'u1',
          1,
        ]),
      ).rejects.toThrow()
      // And ingest's ledger is untouched: its migrations are still its own.
      const ledger = await db.all<{ plugin: string; n: number }>(
        'SELECT plugin, COUNT(*) AS n FROM liveops_migrations GROUP BY plugin ORDER BY plugin',
      )
      expect(ledger.map((r) => [r.plugin, Number(r.n)])).toEqual([
        ['analytics', migrations.length],
        ['experiments', 1],
        ['ingest', ingestMigrations.length],
      ])
    } finally {
      await raw.done()
    }
  })

  let a: TestApp
  beforeAll(async () => {
    a = await makeApp(engine, {
      plugins: { games: {}, ingest: { signing_secret: SECRET, purge_interval_minutes: 0 } },
    })
  })
  afterAll(() => a.stop())

  test('without analytics ingest still stores events, and the analytics routes answer 404', async () => {
    const admin = await a.token('admin')
    const g = await a.req('POST', '/api/games', { token: admin, body: game })
    const r = await signed(a, '/api/ingest/events', [
      { event: 'login', uid: 'alone-1', ts: String(Date.now()), game_id: g.body.id, env: 'prod' },
    ])
    expect(r.status).toBe(200)
    const stored = await a.db.get<{ n: number }>(
      'SELECT COUNT(*) AS n FROM ingest_events WHERE game_id = ?',
      [g.body.id],
    )
    expect(Number(stored?.n)).toBe(1)
    for (const path of ['warehouse/dau', 'warehouse/online', 'warehouse/revenue', 'invocations/summary']) {
      const w = await a.req('GET', `/api/v1/analytics/${path}?gameId=${g.body.id}&env=prod`, { token: admin })
      expect([path, w.status]).toEqual([path, 404])
    }
  })
})
