import { afterAll, afterEach, beforeAll, describe, expect, setSystemTime, test } from 'bun:test'
import { type TestApp, forEachEngine, makeApp } from '../../../test/helpers'
import { DAY, SECRET, game, signed } from '../../ingest/testing'
import { HOUR, MINUTE, floorTo } from '../lib/time'

// The query defaults of the warehouse reads (moved from ingest, issue 16).
forEachEngine((engine) => {
  describe('query defaults of spec section 8, at the edges of their windows', () => {
    // An app of its own: the reads' shared one (warehouse-fixture.ts) counts every row of its store.
    let d: TestApp
    let tok: string
    let gid: string
    beforeAll(async () => {
      d = await makeApp(engine, {
        plugins: { games: {}, ingest: { signing_secret: SECRET, purge_interval_minutes: 0 }, analytics: {} },
      })
      tok = await d.token('admin')
      const g = await d.req('POST', '/api/games', { token: tok, body: game })
      expect(g.status).toBe(201)
      gid = g.body.id
    })
    afterAll(() => d.stop())

    /**
     * Seeding and reading must see one window: the clock is held (bun:test's setSystemTime, read
     * by the app in this process too) at now, or just past the next `unit` boundary when that is
     * near, until the test ends. Ids stay ordered when it is let go (the writer never goes back).
     */
    const steady = (unit: number) => {
      const now = Date.now()
      const left = unit - (now % unit)
      setSystemTime(new Date(left < 3000 ? now + left + 50 : now))
    }
    afterEach(() => setSystemTime())
    const at = (ts: number, event: string, extra: Record<string, unknown> = {}) => ({
      event,
      ts: String(ts),
      game_id: gid,
      env: 'prod',
      ...extra,
    })
    const get = (q: string) => d.req('GET', `/api/v1/analytics/${q}`, { token: tok })
    const sum = (points: Record<string, number>[], k: string) => points.reduce((a, p) => a + p[k], 0)

    test('dau: days defaults to 14', async () => {
      steady(DAY)
      // The first millisecond of the oldest day of 14, and the last one before it.
      const first = floorTo(Date.now(), DAY) - 13 * DAY
      const r = await signed(d, '/api/ingest/events', [
        at(first, 'login', { uid: 'dau-in' }),
        at(first - 1, 'login', { uid: 'dau-out' }),
      ])
      expect(r.status).toBe(200)
      const def = await get(`warehouse/dau?gameId=${gid}&env=prod`)
      expect(def.status).toBe(200)
      expect(def.body.points).toHaveLength(14)
      expect(def.body.points[0].date).toBe(new Date(first).toISOString().slice(0, 10))
      expect(sum(def.body.points, 'dau')).toBe(1)
      // Both were stored: one more day counts the other.
      expect(sum((await get(`warehouse/dau?gameId=${gid}&env=prod&days=15`)).body.points, 'dau')).toBe(2)
    }, 10_000)

    test('revenue: days defaults to 14', async () => {
      steady(DAY)
      const first = floorTo(Date.now(), DAY) - 13 * DAY
      const pay = (ts: number, order: string, cents: number) =>
        at(ts, 'payment', {
          uid: order,
          order_id: order,
          status: 'success',
          amount_cents: cents,
          currency: 'USD',
        })
      const r = await signed(d, '/api/ingest/payments', [
        pay(first, 'rev-in', 100),
        pay(first - 1, 'rev-out', 1000),
      ])
      expect(r.status).toBe(200)
      const def = await get(`warehouse/revenue?gameId=${gid}&env=prod`)
      expect(def.status).toBe(200)
      expect(def.body.points).toHaveLength(14)
      expect(sum(def.body.points, 'revenueCents')).toBe(100)
      expect(
        sum((await get(`warehouse/revenue?gameId=${gid}&env=prod&days=15`)).body.points, 'revenueCents'),
      ).toBe(1100)
    }, 10_000)

    test('online: minutes defaults to 60', async () => {
      steady(MINUTE)
      const first = floorTo(Date.now(), MINUTE) - 59 * MINUTE
      const r = await signed(d, '/api/ingest/events', [
        at(first, 'heartbeat', { uid: 'on-in' }),
        at(first - 1, 'heartbeat', { uid: 'on-out' }),
      ])
      expect(r.status).toBe(200)
      const def = await get(`warehouse/online?gameId=${gid}&env=prod`)
      expect(def.status).toBe(200)
      expect(def.body.points).toHaveLength(60)
      expect(def.body.points[0]).toEqual({ minute: new Date(first).toISOString(), online: 1 })
      expect(sum(def.body.points, 'online')).toBe(1)
      expect(
        sum((await get(`warehouse/online?gameId=${gid}&env=prod&minutes=61`)).body.points, 'online'),
      ).toBe(2)
    }, 10_000)

    test('invocation summary: hours defaults to 24', async () => {
      steady(HOUR)
      const first = floorTo(Date.now(), HOUR) - 23 * HOUR
      const inv = (ts: number, fn: string) =>
        at(ts, 'function.invoke', { attrs: { functionId: fn, outcome: 'success', durationMs: 5 } })
      const r = await signed(d, '/api/ingest/events', [inv(first, 'in-window'), inv(first - 1, 'before')])
      expect(r.status).toBe(200)
      const def = await get(`invocations/summary?gameId=${gid}&env=prod`)
      expect(def.status).toBe(200)
      expect(def.body).toMatchObject({ total: 1, topFunctions: [{ functionId: 'in-window', total: 1 }] })
      expect((await get(`invocations/summary?gameId=${gid}&env=prod&hours=25`)).body.total).toBe(2)
    }, 10_000)
  })
})
