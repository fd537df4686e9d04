import { afterAll, afterEach, beforeAll, describe, expect, setSystemTime, test } from 'bun:test'
import { join } from 'node:path'
import postgres from 'postgres'
import { PG_URL, type TestApp, forEachEngine, makeApp } from '../../../test/helpers'
import { ingestMigrations } from '../../ingest/migrations'
import { DAY, SECRET, game, ingestApp, signed } from '../../ingest/testing'
import { HOUR, MINUTE, floorTo } from '../lib/time'

// Warehouse reads, invocations and the warehouse store configuration (moved from ingest, issue 16).
forEachEngine((engine) => {
  let a: TestApp
  let admin: string
  let gameId: string
  const ev = (event: string, extra: Record<string, unknown> = {}) => ({
    event,
    ts: String(Date.now()),
    game_id: gameId,
    env: 'prod',
    ...extra,
  })

  beforeAll(async () => {
    ;({ a, admin, gameId } = await ingestApp(engine))
    // A login in every environment, a payment and some plain events.
    const logins = ['dev', 'prod', 'staging'].map((env) => ev('login', { env, uid: `w-${env}` }))
    const taps = Array.from({ length: 10 }, (_, i) => ev('tap', { uid: `t${i}` }))
    expect((await signed(a, '/api/ingest/events', [...logins, ...taps])).status).toBe(200)
    const pay = ev('payment', { order_id: 'w-1', status: 'success', amount_cents: 499, currency: 'USD' })
    expect((await signed(a, '/api/ingest/payments', [pay])).status).toBe(200)
  })
  afterAll(() => a.stop())

  describe('invocations', () => {
    beforeAll(async () => {
      const inv = (fn: string, outcome: string, durationMs: number, i: number) =>
        ev('function.invoke', {
          attrs: { functionId: fn, actor: `actor-${i}`, outcome, durationMs, traceId: `t-${i}` },
        })
      const list = []
      for (let i = 0; i < 40; i++) list.push(inv('spawn', i % 4 === 0 ? 'failure' : 'success', 10 + i, i))
      for (let i = 0; i < 10; i++) list.push(inv('loot', 'success', 100, 100 + i))
      expect((await signed(a, '/api/ingest/events', list)).status).toBe(200)
    })

    test('summary: totals, success rate, average, p95 within 5%, top functions', async () => {
      const r = await a.req('GET', `/api/v1/analytics/invocations/summary?gameId=${gameId}&env=prod`, {
        token: admin,
      })
      expect(r.status).toBe(200)
      expect(r.body).toMatchObject({ total: 50, failed: 10, successRate: 0.8 })
      expect(r.body.avgDurationMs).toBeCloseTo((40 * 10 + (39 * 40) / 2 + 1000) / 50, 1)
      expect(Math.abs(r.body.p95DurationMs - 100) / 100).toBeLessThan(0.05)
      expect(r.body.topFunctions).toEqual([
        { functionId: 'spawn', total: 40, failed: 10, avgDurationMs: 29.5 },
        { functionId: 'loot', total: 10, failed: 0, avgDurationMs: 100 },
      ])
    })

    test('trend per hour and per day', async () => {
      const h = await a.req('GET', `/api/v1/analytics/invocations/trend?gameId=${gameId}&env=prod`, {
        token: admin,
      })
      expect(h.status).toBe(200)
      expect(h.body.points).toHaveLength(24)
      expect(h.body.points.at(-1)).toMatchObject({ total: 50, failed: 10 })
      const d = await a.req(
        'GET',
        `/api/v1/analytics/invocations/trend?gameId=${gameId}&env=prod&interval=day`,
        { token: admin },
      )
      expect(d.body.points).toHaveLength(14)
      expect(d.body.points.at(-1).bucket).toBe(`${new Date().toISOString().slice(0, 10)}T00:00:00.000Z`)
      const bad = await a.req(
        'GET',
        `/api/v1/analytics/invocations/trend?gameId=${gameId}&env=prod&interval=week`,
        { token: admin },
      )
      expect(bad.status).toBe(400)
    })

    test('list: filters, paging, pageSize at most 100', async () => {
      const r = await a.req(
        'GET',
        `/api/v1/analytics/invocations?gameId=${gameId}&env=prod&functionId=spawn&outcome=failure&pageSize=3&page=1`,
        { token: admin },
      )
      expect(r.status).toBe(200)
      expect(r.body).toMatchObject({ total: 10, page: 1, pageSize: 3 })
      expect(r.body.items).toHaveLength(3)
      expect(r.body.items[0]).toMatchObject({
        functionId: 'spawn',
        outcome: 'failure',
        actor: expect.stringMatching(/^actor-/),
        traceId: expect.stringMatching(/^t-/),
      })
      expect(new Date(r.body.items[0].timestamp).toISOString()).toBe(r.body.items[0].timestamp)
      const over = await a.req(
        'GET',
        `/api/v1/analytics/invocations?gameId=${gameId}&env=prod&pageSize=101`,
        { token: admin },
      )
      expect(over.status).toBe(400)
      expect(over.body.details.field).toBe('query.pageSize')
      const noEnv = await a.req('GET', `/api/v1/analytics/invocations?gameId=${gameId}`, { token: admin })
      expect(noEnv.status).toBe(400)
    })
  })

  describe('warehouse endpoints', () => {
    test('defaults: 14 days, 60 minutes; maxima enforced with 400 in the analytics error body', async () => {
      const dau = await a.req('GET', `/api/v1/analytics/warehouse/dau?gameId=${gameId}&env=prod`, {
        token: admin,
      })
      expect(dau.body.points).toHaveLength(14)
      const online = await a.req('GET', `/api/v1/analytics/warehouse/online?gameId=${gameId}`, {
        token: admin,
      })
      expect(online.body.points).toHaveLength(60)
      expect(online.body.points[59].minute).toBe(
        new Date(Math.floor(Date.now() / 60_000) * 60_000).toISOString(),
      )
      for (const q of [
        'warehouse/dau?days=91',
        'warehouse/dau?days=0',
        'warehouse/revenue?days=91',
        'warehouse/online?minutes=1441',
        'invocations/summary?env=prod&hours=721',
      ]) {
        const [path, qs] = q.split('?')
        const r = await a.req('GET', `/api/v1/analytics/${path}?gameId=${gameId}&${qs}`, { token: admin })
        expect([q, r.status]).toEqual([q, 400])
        expect(r.body).toMatchObject({
          error: 'bad_request',
          details: { field: expect.stringMatching(/^query\./) },
        })
      }
      const noGame = await a.req('GET', '/api/v1/analytics/warehouse/dau', { token: admin })
      expect(noGame.status).toBe(400)
      expect(noGame.body.details.field).toBe('query.gameId')
    })

    test('without env every environment gets its own DAU points', async () => {
      const r = await a.req('GET', `/api/v1/analytics/warehouse/dau?gameId=${gameId}&days=1`, {
        token: admin,
      })
      expect(r.body.points.map((p: { env: string }) => p.env)).toEqual(['dev', 'prod', 'staging'])
    })

    test('unknown game or environment: 404 naming it on every read; no token 401', async () => {
      const reads = [
        'warehouse/dau?days=2',
        'warehouse/online?minutes=5',
        'warehouse/revenue?days=2',
        'invocations/summary?env=prod',
        'invocations/trend?env=prod',
        'invocations?env=prod',
      ]
      for (const read of reads) {
        const r = await a.req('GET', `/api/v1/analytics/${read}&gameId=nope`, { token: admin })
        expect([read, r.status, r.body.error, r.body.message]).toEqual([
          read,
          404,
          'not_found',
          "game 'nope' not found",
        ])
      }
      // A game that exists, with an environment it does not have.
      for (const read of [
        'warehouse/dau?days=2',
        'warehouse/revenue?days=2',
        'invocations/summary?hours=1',
      ]) {
        const r = await a.req('GET', `/api/v1/analytics/${read}&gameId=${gameId}&env=qa`, { token: admin })
        expect([read, r.status, r.body.message]).toEqual([
          read,
          404,
          `environment 'qa' of game '${gameId}' not found`,
        ])
      }
      const anon = await a.req('GET', `/api/v1/analytics/warehouse/online?gameId=${gameId}`)
      expect(anon.status).toBe(401)
      const anonUnknown = await a.req('GET', '/api/v1/analytics/warehouse/dau?gameId=nope')
      expect(anonUnknown.status).toBe(401)
    })
  })

  describe('query defaults of spec section 8, at the edges of their windows', () => {
    // An app of its own: the suite above counts every row of its store.
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

  describe('configuration', () => {
    test('no warehouse: 503 service_unavailable', async () => {
      const b = await makeApp(engine, {
        plugins: { games: {}, ingest: {}, analytics: { warehouse: { dsn: 'none' } } },
      })
      try {
        // Every warehouse endpoint of spec 1 section 4 (rule 3 of section 7), with a valid query.
        const tok = await b.token('admin')
        for (const path of [
          'warehouse/dau',
          'warehouse/online',
          'warehouse/revenue',
          'invocations/summary',
          'invocations/trend',
          'invocations',
        ]) {
          const w = await b.req('GET', `/api/v1/analytics/${path}?gameId=g&env=prod`, { token: tok })
          expect([path, w.status, w.body.error]).toEqual([path, 503, 'service_unavailable'])
        }
      } finally {
        await b.stop()
      }
    })

    test('a separate warehouse store named by WAREHOUSE_DSN', async () => {
      const dir = a.dataDir
      const b = await makeApp(engine, {
        plugins: { games: {}, ingest: { signing_secret: SECRET }, analytics: {} },
        env: { WAREHOUSE_DSN: join(dir, 'warehouse.sqlite') },
      })
      try {
        const tok = await b.token('admin')
        const g = await b.req('POST', '/api/games', { token: tok, body: game })
        const r = await signed(b, '/api/ingest/events', [
          { event: 'login', uid: 'w1', ts: String(Date.now()), game_id: g.body.id, env: 'prod' },
        ])
        expect(r.status).toBe(200)
        const dau = await b.req(
          'GET',
          `/api/v1/analytics/warehouse/dau?gameId=${g.body.id}&env=prod&days=1`,
          { token: tok },
        )
        expect(dau.body.points[0].dau).toBe(1)
        const main = await b.db.get<{ n: number }>(
          "SELECT COUNT(*) AS n FROM liveops_migrations WHERE plugin = 'ingest'",
        )
        expect(Number(main?.n)).toBe(ingestMigrations.length)
        // The event went to the warehouse file, not the main store.
        const inMain = await b.db.get<{ n: number }>('SELECT COUNT(*) AS n FROM ingest_events')
        expect(Number(inMain?.n)).toBe(0)
      } finally {
        await b.stop()
      }
    })

    // In the [postgres] block, which exists when PostgreSQL answers; the main store is SQLite all the same.
    test.skipIf(engine !== 'postgres')(
      'a PostgreSQL warehouse named by WAREHOUSE_DSN beside a SQLite main store',
      async () => {
        const name = `wh_${crypto.randomUUID().replace(/-/g, '').slice(0, 16)}`
        const admin = postgres(PG_URL, { max: 1, onnotice: () => undefined })
        await admin.unsafe(`CREATE DATABASE ${name}`)
        const url = new URL(PG_URL)
        url.pathname = `/${name}`
        const wh = postgres(url.toString(), { max: 1, onnotice: () => undefined })
        let b: TestApp | undefined
        try {
          b = await makeApp('sqlite', {
            plugins: {
              games: {},
              ingest: { signing_secret: SECRET, purge_interval_minutes: 0 },
              analytics: {},
            },
            env: { WAREHOUSE_DSN: url.toString() },
          })
          expect(b.db.dialect).toBe('sqlite')
          const tok = await b.token('admin')
          const g = await b.req('POST', '/api/games', { token: tok, body: game })
          const r = await signed(b, '/api/ingest/events', [
            { event: 'login', uid: 'pg-1', ts: String(Date.now()), game_id: g.body.id, env: 'prod' },
            { event: 'login', uid: 'pg-2', ts: String(Date.now()), game_id: g.body.id, env: 'prod' },
          ])
          expect(r.status).toBe(200)
          const dau = await b.req(
            'GET',
            `/api/v1/analytics/warehouse/dau?gameId=${g.body.id}&env=prod&days=1`,
            { token: tok },
          )
          expect(dau.body.points).toEqual([
            expect.objectContaining({ gameId: g.body.id, env: 'prod', dau: 2, newUsers: 2 }),
          ])
          // The events and the ingest migrations are in the PostgreSQL database...
          const [pg] = await wh`SELECT COUNT(*)::int AS n FROM ingest_events WHERE game_id = ${g.body.id}`
          expect(pg.n).toBe(2)
          const [mig] = await wh`SELECT COUNT(*)::int AS n FROM liveops_migrations WHERE plugin = 'ingest'`
          expect(mig.n).toBe(ingestMigrations.length)
          // ...and no event is in the main SQLite file.
          const inMain = await b.db.get<{ n: number }>('SELECT COUNT(*) AS n FROM ingest_events')
          expect(Number(inMain?.n)).toBe(0)
        } finally {
          await b?.stop()
          await wh.end()
          await admin.unsafe(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)
          await admin.end()
        }
      },
      // A database created and dropped, and an app started on it: seconds on a shared machine.
      30_000,
    )
  })
})
