import { afterAll, beforeAll, expect, test } from 'bun:test'
import { type TestApp, forEachEngine, makeApp } from '../../../test/helpers'
import { SECRET, game, signed } from '../../ingest/testing'

// Sampling filters (issue 17 point 3): saved per game and environment, followed by ingestion at once.
forEachEngine((engine) => {
  let a: TestApp
  let admin: string
  let gameId: string
  const ev = (event: string, uid: string, env = 'staging') => ({
    event,
    uid,
    ts: String(Date.now()),
    game_id: gameId,
    env,
  })
  const stored = async (env: string, event?: string) =>
    Number(
      (
        await a.db.get<{ n: number }>(
          `SELECT COUNT(*) AS n FROM ingest_events WHERE game_id = ? AND env = ?${event ? ' AND event = ?' : ''}`,
          event ? [gameId, env, event] : [gameId, env],
        )
      )?.n,
    )
  const put = (body: unknown, token: string | null = admin, env = 'staging') =>
    a.req('PUT', `/api/v1/analytics/filters?gameId=${gameId}&env=${env}`, { token, body })

  beforeAll(async () => {
    a = await makeApp(engine, {
      plugins: { games: {}, ingest: { signing_secret: SECRET, purge_interval_minutes: 0 }, analytics: {} },
    })
    admin = await a.token('admin')
    gameId = (await a.req('POST', '/api/games', { token: admin, body: game })).body.id
  })
  afterAll(() => a.stop())

  test('none stored: rate 1, nothing dropped', async () => {
    const r = await a.req('GET', `/api/v1/analytics/filters?gameId=${gameId}&env=staging`, { token: admin })
    expect(r.body).toEqual({ gameId, env: 'staging', samplingRate: 1, dropEvents: [], updatedAt: null })
  })

  test('dropEvents: the next request stores no tap; other events and other environments as before', async () => {
    const r = await put({ dropEvents: ['tap', 'tap', 'swipe'] })
    expect(r.status).toBe(200)
    expect(r.body).toMatchObject({ samplingRate: 1, dropEvents: ['tap', 'swipe'] })
    expect(
      (await signed(a, '/api/ingest/events', [ev('tap', 'f1'), ev('login', 'f1'), ev('tap', 'f2', 'prod')]))
        .status,
    ).toBe(200)
    expect(await stored('staging', 'tap')).toBe(0)
    expect(await stored('staging', 'login')).toBe(1)
    expect(await stored('prod', 'tap')).toBe(1)
  })

  test('samplingRate 0 keeps no user; a partial update keeps dropEvents; payments are still stored', async () => {
    const r = await put({ samplingRate: 0 })
    expect(r.body).toMatchObject({
      samplingRate: 0,
      dropEvents: ['tap', 'swipe'],
      updatedAt: expect.any(String),
    })
    const before = await stored('staging')
    expect((await signed(a, '/api/ingest/events', [ev('login', 'f3'), ev('level_up', 'f4')])).status).toBe(
      200,
    )
    expect(await stored('staging')).toBe(before)
    const pay = { ...ev('payment', 'f3'), order_id: 'fo-1', status: 'success', amount_cents: 100 }
    expect((await signed(a, '/api/ingest/payments', [pay])).status).toBe(200)
    expect(await stored('staging', 'payment')).toBe(1)
    // Back to 1: kept again at once.
    await put({ samplingRate: 1 })
    expect((await signed(a, '/api/ingest/events', [ev('login', 'f5')])).status).toBe(200)
    expect(await stored('staging', 'login')).toBe(2)
  })

  test('bad input 400 naming the field, nothing saved; viewer 403; no token 401; unknown environment 404', async () => {
    const bad = await put({ samplingRate: 2 })
    expect(bad.status).toBe(400)
    expect(JSON.stringify(bad.body)).toContain('samplingRate')
    expect((await put({ dropEvents: 'tap' })).status).toBe(400)
    const unknown = await put({ samplingRate: 0.5, other: 1 })
    expect([unknown.status, unknown.body.message]).toEqual([400, expect.stringContaining('body.other')])
    const now = await a.req('GET', `/api/v1/analytics/filters?gameId=${gameId}&env=staging`, { token: admin })
    expect(now.body).toMatchObject({ samplingRate: 1, dropEvents: ['tap', 'swipe'] })
    expect((await put({ samplingRate: 0.5 }, await a.token('viewer'))).status).toBe(403)
    expect((await put({ samplingRate: 0.5 }, null)).status).toBe(401)
    expect((await put({ samplingRate: 0.5 }, admin, 'qa')).status).toBe(404)
  })

  test('GET then PUT with exactly what it answered succeeds and changes nothing; another scope in the body is a 400', async () => {
    expect((await put({ samplingRate: 1, dropEvents: ['tap', 'swipe'] })).status).toBe(200)
    const got = await a.req('GET', `/api/v1/analytics/filters?gameId=${gameId}&env=staging`, { token: admin })
    expect(got.body).toMatchObject({ gameId, env: 'staging', samplingRate: 1, dropEvents: ['tap', 'swipe'] })
    const back = await put(got.body)
    expect(back.status).toBe(200)
    expect(back.body).toMatchObject({ gameId, env: 'staging', samplingRate: 1, dropEvents: ['tap', 'swipe'] })
    // Edited and sent back: the edit is saved.
    expect((await put({ ...back.body, samplingRate: 0.25 })).body.samplingRate).toBe(0.25)
    await put({ samplingRate: 1 })
    const other = await put({ ...got.body, env: 'prod' })
    expect([other.status, other.body.message]).toEqual([400, expect.stringContaining('body.env')])
    const game = await put({ ...got.body, gameId: 'someone-else' })
    expect([game.status, game.body.message]).toEqual([400, expect.stringContaining('body.gameId')])
  })
})
