import { beforeAll, describe, expect, test } from 'bun:test'
import { forEachEngine } from '../../../test/helpers'
import { signed } from '../../ingest/testing'
import { warehouseSuite } from './warehouse-fixture'

// Warehouse reads and invocations (moved from ingest, issue 16), over warehouse-fixture.ts.
forEachEngine((engine) => {
  const fx = warehouseSuite(engine)
  const { ev } = fx

  describe('invocations', () => {
    beforeAll(async () => {
      const inv = (fn: string, outcome: string, durationMs: number, i: number) =>
        ev('function.invoke', {
          attrs: { functionId: fn, actor: `actor-${i}`, outcome, durationMs, traceId: `t-${i}` },
        })
      const list = []
      for (let i = 0; i < 40; i++) list.push(inv('spawn', i % 4 === 0 ? 'failure' : 'success', 10 + i, i))
      for (let i = 0; i < 10; i++) list.push(inv('loot', 'success', 100, 100 + i))
      expect((await signed(fx.a, '/api/ingest/events', list)).status).toBe(200)
    })

    test('summary: totals, success rate, average, p95 within 5%, top functions', async () => {
      const r = await fx.a.req('GET', `/api/v1/analytics/invocations/summary?gameId=${fx.gameId}&env=prod`, {
        token: fx.admin,
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
      const h = await fx.a.req('GET', `/api/v1/analytics/invocations/trend?gameId=${fx.gameId}&env=prod`, {
        token: fx.admin,
      })
      expect(h.status).toBe(200)
      expect(h.body.points).toHaveLength(24)
      expect(h.body.points.at(-1)).toMatchObject({ total: 50, failed: 10 })
      const d = await fx.a.req(
        'GET',
        `/api/v1/analytics/invocations/trend?gameId=${fx.gameId}&env=prod&interval=day`,
        { token: fx.admin },
      )
      expect(d.body.points).toHaveLength(14)
      expect(d.body.points.at(-1).bucket).toBe(`${new Date().toISOString().slice(0, 10)}T00:00:00.000Z`)
      const bad = await fx.a.req(
        'GET',
        `/api/v1/analytics/invocations/trend?gameId=${fx.gameId}&env=prod&interval=week`,
        { token: fx.admin },
      )
      expect(bad.status).toBe(400)
    })

    test('list: filters, paging, pageSize at most 100', async () => {
      const r = await fx.a.req(
        'GET',
        `/api/v1/analytics/invocations?gameId=${fx.gameId}&env=prod&functionId=spawn&outcome=failure&pageSize=3&page=1`,
        { token: fx.admin },
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
      const over = await fx.a.req(
        'GET',
        `/api/v1/analytics/invocations?gameId=${fx.gameId}&env=prod&pageSize=101`,
        { token: fx.admin },
      )
      expect(over.status).toBe(400)
      expect(over.body.details.field).toBe('query.pageSize')
      const noEnv = await fx.a.req('GET', `/api/v1/analytics/invocations?gameId=${fx.gameId}`, {
        token: fx.admin,
      })
      expect(noEnv.status).toBe(400)
    })
  })

  describe('warehouse endpoints', () => {
    test('defaults: 14 days, 60 minutes; maxima enforced with 400 in the analytics error body', async () => {
      const dau = await fx.a.req('GET', `/api/v1/analytics/warehouse/dau?gameId=${fx.gameId}&env=prod`, {
        token: fx.admin,
      })
      expect(dau.body.points).toHaveLength(14)
      const online = await fx.a.req('GET', `/api/v1/analytics/warehouse/online?gameId=${fx.gameId}`, {
        token: fx.admin,
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
        const r = await fx.a.req('GET', `/api/v1/analytics/${path}?gameId=${fx.gameId}&${qs}`, {
          token: fx.admin,
        })
        expect([q, r.status]).toEqual([q, 400])
        expect(r.body).toMatchObject({
          error: 'bad_request',
          details: { field: expect.stringMatching(/^query\./) },
        })
      }
      const noGame = await fx.a.req('GET', '/api/v1/analytics/warehouse/dau', { token: fx.admin })
      expect(noGame.status).toBe(400)
      expect(noGame.body.details.field).toBe('query.gameId')
    })

    test('without env every environment gets its own DAU points', async () => {
      const r = await fx.a.req('GET', `/api/v1/analytics/warehouse/dau?gameId=${fx.gameId}&days=1`, {
        token: fx.admin,
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
        const r = await fx.a.req('GET', `/api/v1/analytics/${read}&gameId=nope`, { token: fx.admin })
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
        const r = await fx.a.req('GET', `/api/v1/analytics/${read}&gameId=${fx.gameId}&env=qa`, {
          token: fx.admin,
        })
        expect([read, r.status, r.body.message]).toEqual([
          read,
          404,
          `environment 'qa' of game '${fx.gameId}' not found`,
        ])
      }
      const anon = await fx.a.req('GET', `/api/v1/analytics/warehouse/online?gameId=${fx.gameId}`)
      expect(anon.status).toBe(401)
      const anonUnknown = await fx.a.req('GET', '/api/v1/analytics/warehouse/dau?gameId=nope')
      expect(anonUnknown.status).toBe(401)
    })
  })
})
