import { afterAll, beforeAll, expect, test } from 'bun:test'
import { type TestApp, forEachEngine, makeApp } from '../../test/helpers'
import { SECRET, game, signed } from '../ingest/testing'
import { experimentCounts } from './exposures'

// The exposures consumer of the event log (experiments' own tables); reads wait for it with drain().
forEachEngine((engine) => {
  let a: TestApp
  let gameId: string
  let admin: string
  const ev = (event: string, extra: Record<string, unknown> = {}) => ({
    event,
    ts: String(Date.now()),
    game_id: gameId,
    env: 'prod',
    ...extra,
  })
  beforeAll(async () => {
    a = await makeApp(engine, {
      plugins: {
        games: {},
        ingest: { signing_secret: SECRET, purge_interval_minutes: 0 },
        experiments: {},
        analytics: {},
      },
    })
    admin = await a.token('admin')
    const g = await a.req('POST', '/api/games', { token: admin, body: game })
    gameId = g.body.id
  })
  /** A running experiment of prod: exposures count only for an experiment of their game and environment. */
  const experiment = async (name: string) => {
    const variants = ['A', 'B', 'ctl'].map((v, i) => ({ name: v, weight: i ? 25 : 50 }))
    const e = await a.req('POST', '/api/experiments', {
      token: admin,
      body: { gameId, environment: 'prod', name, config: { variants } },
    })
    expect((await a.req('POST', `/api/experiments/${e.body.id}/publish`, { token: admin })).status).toBe(200)
    return e.body.id as string
  }
  afterAll(() => a.stop())

  test('experiment counts: first exposure wins, conversions at or after it', async () => {
    const E1 = await experiment('E1')
    const t0 = Date.now() - 10_000
    const at = (e: Record<string, unknown>, dt: number) => ({ ...e, ts: String(t0 + dt) })
    const r = await signed(a, '/api/ingest/events', [
      at(ev('experiment_exposure', { uid: 'x1', attrs: { exp: E1, variant: 'A' } }), 0),
      at(ev('experiment_exposure', { uid: 'x1', attrs: { exp: E1, variant: 'B' } }), 100),
      at(ev('experiment_exposure', { uid: 'x2', attrs: { exp: E1, variant: 'B' } }), 0),
      at(ev('purchase', { uid: 'x1' }), 50),
      at(ev('purchase', { uid: 'x2' }), -50),
    ])
    expect(r.status).toBe(200)
    await a.events.drain()
    const c = await experimentCounts(a.db, {
      gameId,
      environment: 'prod',
      experimentId: E1,
      metrics: ['purchase'],
    })
    expect(c).toEqual({
      variants: {
        A: { exposures: 1, conversions: { purchase: 1 } },
        B: { exposures: 1, conversions: { purchase: 0 } },
      },
    })
  })

  test('an exposure and a conversion in one commit count; a user exposed earlier keeps feeding conversions after a restart of the cache', async () => {
    const E2 = await experiment('E2')
    const t0 = Date.now() - 5_000
    const at = (e: Record<string, unknown>, dt: number) => ({ ...e, ts: String(t0 + dt) })
    expect(
      (
        await signed(a, '/api/ingest/events', [
          at(ev('experiment_exposure', { uid: 'y1', attrs: { exp: E2, variant: 'ctl' } }), 0),
          at(ev('win', { uid: 'y1' }), 10),
          at(ev('win', { uid: 'never-exposed' }), 10),
        ])
      ).status,
    ).toBe(200)
    // A later commit: y1 is known exposed (cached), so its event updates the conversion row.
    expect((await signed(a, '/api/ingest/events', [at(ev('level_up', { uid: 'y1' }), 20)])).status).toBe(200)
    await a.events.drain()
    const c = await experimentCounts(a.db, {
      gameId,
      environment: 'prod',
      experimentId: E2,
      metrics: ['win', 'level_up'],
    })
    expect(c).toEqual({ variants: { ctl: { exposures: 1, conversions: { win: 1, level_up: 1 } } } })
    const rows = await a.db.all<{ user_id: string }>(
      'SELECT DISTINCT user_id FROM experiments_user_events WHERE game_id = ? ORDER BY user_id',
      [gameId],
    )
    expect(rows.map((r) => r.user_id)).not.toContain('never-exposed')
  })

  test('a rebuild from a date (any of the four consumers through the route) keeps exposures and last times before it and finds those after it again', async () => {
    const E3 = await experiment('E3')
    const dayMs = 86_400_000
    const today = Math.floor(Date.now() / dayMs) * dayMs
    const from = today - dayMs
    const old = today - 3 * dayMs + 3_600_000
    const now = Date.now() - 1_000
    const at = (e: Record<string, unknown>, ts: number) => ({ ...e, ts: String(ts) })
    expect(
      (
        await signed(a, '/api/ingest/events', [
          at(ev('experiment_exposure', { uid: 'r1', attrs: { exp: E3, variant: 'A' } }), old),
          at(ev('buy', { uid: 'r1' }), now),
          at(ev('experiment_exposure', { uid: 'r2', attrs: { exp: E3, variant: 'B' } }), now - 10),
          at(ev('buy', { uid: 'r2' }), now),
        ])
      ).status,
    ).toBe(200)
    await a.events.drain()
    const counts = () =>
      experimentCounts(a.db, { gameId, environment: 'prod', experimentId: E3, metrics: ['buy'] })
    expect(await counts()).toEqual({
      variants: {
        A: { exposures: 1, conversions: { buy: 1 } },
        B: { exposures: 1, conversions: { buy: 1 } },
      },
    })
    // Damaged by hand: the exposure before the date is kept as it is (renamed here, so it shows);
    // the rows from the date on are recomputed (a wrong variant, conversions lost).
    await a.db.run("UPDATE experiments_exposures SET variant = 'kept' WHERE experiment_id = ? AND ts < ?", [
      E3,
      from,
    ])
    await a.db.run("UPDATE experiments_exposures SET variant = 'wrong' WHERE experiment_id = ? AND ts >= ?", [
      E3,
      from,
    ])
    await a.db.run('UPDATE experiments_user_events SET last_ts = 0 WHERE game_id = ? AND last_ts >= ?', [
      gameId,
      from,
    ])
    const date = new Date(from).toISOString().slice(0, 10)
    for (const name of ['analytics', 'behavior', 'realtime', 'exposures']) {
      const r = await a.req('POST', `/api/v1/analytics/consumers/${name}/rebuild`, {
        token: admin,
        body: { from: date },
      })
      expect(r.status).toBe(202)
    }
    await a.events.drain()
    expect(await counts()).toEqual({
      variants: {
        kept: { exposures: 1, conversions: { buy: 1 } },
        B: { exposures: 1, conversions: { buy: 1 } },
      },
    })
  })
})
