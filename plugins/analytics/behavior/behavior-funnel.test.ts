import { describe, expect, test } from 'bun:test'
import { forEachEngine } from '../../../test/helpers'
import { signed } from '../../ingest/testing'
import { behaviorSuite } from './behavior-fixture'

const HOUR = 3_600_000

// Funnels over the Jan 12 part of the behavior fixture (behavior-fixture.ts).
forEachEngine((engine) => {
  const fx = behaviorSuite(engine)
  const { q } = fx
  const funnel = (body: Record<string, unknown>, token: string | null = fx.admin) =>
    fx.a.req('POST', `/api/v1/analytics/behavior/funnel?${q()}`, { token, body })

  const window = { value: 1, unit: 'hour' }
  const ABC = [{ event: 'tutorial_start' }, { event: 'tutorial_done' }, { event: 'purchase_click' }]
  /** A funnel of Jan 12 (window 1 hour unless said). */
  const jan12 = (body: Record<string, unknown>) =>
    funnel({ steps: ABC, window, startDate: '2026-01-12', endDate: '2026-01-12', ...body })
  const users = (r: { body: { steps: Array<{ users: number }> } }) => r.body.steps.map((s) => s.users)

  describe('funnel (window 1 hour, Jan 12)', () => {
    test('ordered: u1 u2 all three; u3 did B before A (A only); u4 B at exactly 1 hour, C 1 ms late; u5 B 1 ms late; u6 C alone', async () => {
      const r = await jan12({})
      expect(r.status).toBe(200)
      expect(r.body).toEqual({
        startDate: '2026-01-11T15:00:00.000Z',
        endDate: '2026-01-12T15:00:00.000Z',
        order: 'ordered',
        windowMs: HOUR,
        users: 5,
        converted: 2,
        conversionRate: 0.4,
        // From A to C: u1 10 min, u2 3 min.
        medianTimeToConvertMs: 390_000,
        steps: [
          {
            step: 1,
            event: 'tutorial_start',
            users: 5,
            conversionFromFirst: 1,
            conversionFromPrevious: 1,
            dropOff: 0,
            medianTimeFromPreviousMs: null,
            medianTimeFromFirstMs: null,
          },
          {
            // u1 (5 min), u2 (2 min), u4 (60 min, the window's edge counts).
            step: 2,
            event: 'tutorial_done',
            users: 3,
            conversionFromFirst: 0.6,
            conversionFromPrevious: 0.6,
            dropOff: 2,
            medianTimeFromPreviousMs: 300_000,
            medianTimeFromFirstMs: 300_000,
          },
          {
            // u1 (5 min after B), u2 (1 min after B).
            step: 3,
            event: 'purchase_click',
            users: 2,
            conversionFromFirst: 0.4,
            conversionFromPrevious: 0.6667,
            dropOff: 1,
            medianTimeFromPreviousMs: 180_000,
            medianTimeFromFirstMs: 390_000,
          },
        ],
      })
    })

    test('strict: u2 heartbeat between A and B stops at A; u4 still 2 (nothing between)', async () => {
      const r = await jan12({ order: 'strict' })
      expect(r.status).toBe(200)
      expect(users(r)).toEqual([5, 2, 1])
      expect(r.body.converted).toBe(1)
      expect(r.body.medianTimeToConvertMs).toBe(600_000)
    })

    test('any order: u3 (B, A, C) converts; u6 did one step; step k = users with any k steps', async () => {
      const r = await jan12({ order: 'any' })
      expect(r.status).toBe(200)
      // 1 step: u1..u6; 2: u1 u2 u3 u4; 3: u1 u2 u3.
      expect(users(r)).toEqual([6, 4, 3])
      // To the third step: u1 10 min, u2 3 min, u3 10 min.
      expect(r.body.medianTimeToConvertMs).toBe(600_000)
    })

    test('a property filter on a step: only u1 clicked in the shop', async () => {
      const r = await jan12({
        steps: [...ABC.slice(0, 2), { event: 'purchase_click', properties: { screen: 'shop' } }],
      })
      expect(users(r)).toEqual([5, 3, 1])
      expect(r.body.steps[2].properties).toEqual({ screen: 'shop' })
    })

    test('a property filter over more events than one page of properties: every page is read (Jan 24)', async () => {
      // 1,300 users open the shop and buy a minute later (local 12:00 in Tokyo): 2,600 events with
      // properties, read in pages of 1,000 (raw.ts PROPS_PAGE); a walk ending after its first page
      // would count 500.
      const noon = Date.UTC(2026, 0, 24, 3)
      const events = Array.from({ length: 1_300 }, (_, i) => [
        {
          event: 'shop_open',
          ts: String(noon + i),
          game_id: fx.gameId,
          env: 'prod',
          uid: `p${i}`,
          attrs: { screen: 'shop' },
        },
        { event: 'shop_buy', ts: String(noon + 60_000 + i), game_id: fx.gameId, env: 'prod', uid: `p${i}` },
      ]).flat()
      for (let i = 0; i < events.length; i += 650)
        expect((await signed(fx.a, '/api/ingest/events', events.slice(i, i + 650))).status).toBe(200)
      const r = await funnel({
        steps: [{ event: 'shop_open', properties: { screen: 'shop' } }, { event: 'shop_buy' }],
        window,
        startDate: '2026-01-24',
        endDate: '2026-01-24',
      })
      expect(users(r)).toEqual([1_300, 1_300])
    })

    test('a window of 59 minutes loses u4 at step 2; one of 2 hours lets u4 and u5 through', async () => {
      const short = await jan12({ steps: ABC.slice(0, 2), window: { value: 59, unit: 'minute' } })
      expect(users(short)).toEqual([5, 2])
      const long = await jan12({ steps: ABC.slice(0, 2), window: { value: 2, unit: 'hour' } })
      expect(users(long)).toEqual([5, 4])
    })

    test('bad bodies: 400 naming the field; no token 401; unknown game 404', async () => {
      const one = await funnel({ steps: [{ event: 'a' }] })
      expect([one.status, one.body.message]).toEqual([400, expect.stringContaining('steps')])
      const unit = await funnel({
        steps: [{ event: 'a' }, { event: 'b' }],
        window: { value: 1, unit: 'year' },
      })
      expect([unit.status, unit.body.message]).toEqual([400, expect.stringContaining('unit')])
      const wide = await funnel({
        steps: [{ event: 'a' }, { event: 'b' }],
        window: { value: 8, unit: 'day' },
      })
      expect([wide.status, wide.body.message]).toEqual([400, expect.stringContaining('body.window')])
      const order = await funnel({ steps: [{ event: 'a' }, { event: 'b' }], order: 'sideways' })
      expect([order.status, order.body.message]).toEqual([400, expect.stringContaining('order')])
      const range = await funnel({
        steps: [{ event: 'a' }, { event: 'b' }],
        startDate: '2026-01-01',
        endDate: '2026-01-20',
      })
      expect([range.status, range.body.message]).toEqual([400, expect.stringContaining('body.endDate')])
      const bad = await funnel({ steps: [{ event: 'a' }, { event: 'b' }], startDate: 'yesterday' })
      expect([bad.status, bad.body.message]).toEqual([400, expect.stringContaining('body.startDate')])
      expect((await funnel({ steps: [{ event: 'a' }, { event: 'b' }] }, null)).status).toBe(401)
      const unknown = await fx.a.req('POST', '/api/v1/analytics/behavior/funnel?gameId=nope&env=prod', {
        token: fx.admin,
        body: { steps: [{ event: 'a' }, { event: 'b' }] },
      })
      expect(unknown.status).toBe(404)
      expect(unknown.body).toMatchObject({
        error: expect.any(String),
        message: expect.stringContaining('nope'),
      })
      // The scope is in the query, as for every analytics route (spec 1), never in the body.
      const steps = [{ event: 'a' }, { event: 'b' }]
      const path = '/api/v1/analytics/behavior/funnel'
      const noScope = await fx.a.req('POST', path, { token: fx.admin, body: { steps } })
      expect([noScope.status, noScope.body.message]).toEqual([400, expect.stringContaining('query.gameId')])
      const inBody = await fx.a.req('POST', `${path}?${q()}`, {
        token: fx.admin,
        body: { gameId: fx.gameId, env: 'prod', steps },
      })
      expect([inBody.status, inBody.body.message]).toEqual([400, expect.stringContaining('body.gameId')])
    })
  })
})
