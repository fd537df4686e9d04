import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { type TestApp, forEachEngine, makeApp } from '../../../test/helpers'
import { SECRET, signed } from '../../ingest/testing'

/**
 * Behavior, payment detail and level analytics over a hand-made fixture (issue 17 point 4);
 * every expected number is worked out by hand in the comments, never by the code under test.
 * The game lives in Asia/Tokyo (UTC+9): local 08:00 is 23:00 UTC the day before. Each part of
 * the fixture has its own local day in January 2026, so the parts do not mix.
 */
const at = (day: number, hh: number, mm = 0, ms = 0) => Date.UTC(2026, 0, day, hh - 9, mm, 0, ms)
const HOUR = 3_600_000

forEachEngine((engine) => {
  let a: TestApp
  let admin: string
  let gameId: string
  const ev = (uid: string, event: string, ts: number, attrs: Record<string, unknown> = {}) => ({
    event,
    ts: String(ts),
    game_id: gameId,
    env: 'prod',
    uid,
    attrs,
  })
  const get = (path: string, token: string | null = admin) =>
    a.req('GET', `/api/v1/analytics/${path}`, { token })
  const q = (extra = '') => `gameId=${gameId}&env=prod${extra}`
  const funnel = (body: Record<string, unknown>, token: string | null = admin) =>
    a.req('POST', `/api/v1/analytics/behavior/funnel?${q()}`, { token, body })

  beforeAll(async () => {
    a = await makeApp(engine, {
      plugins: { games: {}, ingest: { signing_secret: SECRET, purge_interval_minutes: 0 }, analytics: {} },
    })
    admin = await a.token('admin')
    const g = await a.req('POST', '/api/games', {
      token: admin,
      body: {
        name: 'Kyoto Quest',
        genre: 'RPG',
        platforms: ['IOS'],
        timezone: 'Asia/Tokyo',
        defaultCurrency: 'USD',
      },
    })
    expect(g.status).toBe(201)
    gameId = g.body.id
    const A = 'tutorial_start'
    const B = 'tutorial_done'
    const C = 'purchase_click'
    const events = [
      // Jan 12, funnels (window 1 hour).
      ev('u1', A, at(12, 10)),
      ev('u1', B, at(12, 10, 5)),
      ev('u1', C, at(12, 10, 10), { screen: 'shop' }),
      ev('u2', A, at(12, 10)),
      ev('u2', 'heartbeat', at(12, 10, 1)),
      ev('u2', B, at(12, 10, 2)),
      ev('u2', C, at(12, 10, 3), { screen: 'home' }),
      ev('u3', B, at(12, 11)),
      ev('u3', A, at(12, 11, 5)),
      ev('u3', C, at(12, 11, 10)),
      ev('u4', A, at(12, 12)),
      ev('u4', B, at(12, 13)),
      ev('u4', C, at(12, 13, 0, 1)),
      ev('u5', A, at(12, 13)),
      ev('u5', B, at(12, 14, 0, 1)),
      ev('u6', C, at(12, 15)),
      // Jan 13, paths.
      ev('p1', 'session_start', at(13, 9)),
      ev('p1', 'menu', at(13, 9, 1), { tab: 'news' }),
      ev('p1', 'menu', at(13, 9, 2)),
      ev('p1', 'play', at(13, 9, 3)),
      ev('p1', 'shop', at(13, 9, 4)),
      ev('p1', 'menu', at(13, 10)),
      ev('p1', 'play', at(13, 10, 1)),
      ev('p2', 'session_start', at(13, 9)),
      ev('p2', 'menu', at(13, 9, 5)),
      ev('p2', 'play', at(13, 9, 6)),
      ev('p2', 'shop', at(13, 9, 7)),
      ev('p3', 'session_start', at(13, 9)),
      ev('p3', 'shop', at(13, 9, 1)),
      ev('p3', 'session_start', at(13, 9, 10)),
      ev('p3', 'menu', at(13, 9, 11)),
      ev('p3', 'play', at(13, 9, 12)),
      // Jan 14, adoption: a1..a4 active; a5 uses a feature without a session.
      ...['a1', 'a2', 'a3', 'a4'].map((u) => ev(u, 'session_start', at(14, 9))),
      ev('a1', 'feature_use', at(14, 10), {
        feature: 'chat',
        platform: 'ios',
        country: 'jp',
        app_version: '1.2',
      }),
      ev('a1', 'feature_use', at(14, 11), {
        feature: 'chat',
        platform: 'IOS',
        country: 'JP',
        app_version: '1.2',
      }),
      ev('a1', 'feature_use', at(14, 12), { feature: 'shop', platform: 'ANDROID' }),
      ev('a2', 'feature_use', at(14, 13), { feature: 'chat', platform: 'android' }),
      ev('a5', 'feature_use', at(14, 14), { feature: 'chat' }),
      // Jan 15, levels: forest 1 and 2, desert 10; deaths on map m1.
      ev('l1', 'level_start', at(15, 10), { level: '1', episode: 'forest' }),
      ev('l1', 'level_complete', at(15, 10, 1), { level: '1', episode: 'forest', duration_ms: 30000 }),
      ev('l1', 'level_start', at(15, 10, 5), { level: '2', episode: 'forest' }),
      ev('l1', 'level_fail', at(15, 10, 10), { level: '2', episode: 'forest', map: 'm1', x: 10, y: 10 }),
      ev('l1', 'level_start', at(15, 10, 15), { level: '2', episode: 'forest' }),
      ev('l1', 'level_complete', at(15, 10, 20), { level: '2', episode: 'forest', duration_ms: 50000 }),
      ev('l1', 'level_start', at(15, 10, 30), { level: 10, episode: 'desert' }),
      ev('l1', 'level_complete', at(15, 10, 31), { level: 10, episode: 'desert', duration_ms: 20000 }),
      ev('l2', 'level_start', at(15, 11), { level: '1', episode: 'forest' }),
      ev('l2', 'level_fail', at(15, 11, 1), { level: '1', episode: 'forest', map: 'm1', x: 0, y: 0 }),
      ev('l2', 'level_start', at(15, 11, 2), { level: '1', episode: 'forest' }),
      ev('l2', 'level_complete', at(15, 11, 3), { level: '1', episode: 'forest', duration_ms: 40000 }),
      ev('l2', 'level_start', at(15, 11, 5), { level: '2', episode: 'forest' }),
      ev('l2', 'level_fail', at(15, 11, 10), { level: '2', episode: 'forest', map: 'm1', x: 10, y: 9.5 }),
      ev('l3', 'level_start', at(15, 12), { level: '1', episode: 'forest' }),
      ev('l3', 'level_fail', at(15, 12, 1), { level: '1', episode: 'forest', map: 'm1', x: 100, y: 100 }),
    ]
    expect((await signed(a, '/api/ingest/events', events)).status).toBe(200)
    // Sent later, about days long past: local 08:00 of Jan 14 is Jan 13 23:00 UTC.
    expect((await signed(a, '/api/ingest/events', [ev('u9', 'late_ping', at(14, 8))])).status).toBe(200)
    const pay = (
      order: string,
      uid: string,
      status: string,
      cents: number,
      ts: number,
      attrs: Record<string, unknown>,
    ) => ({
      ...ev(uid, 'payment', ts, attrs),
      order_id: order,
      status,
      amount_cents: cents,
      currency: 'USD',
    })
    const payments = [
      pay('o1', 'u1', 'success', 500, at(16, 10), { product_id: 'gems' }),
      pay('o2', 'u2', 'success', 300, at(16, 11), { product_id: 'gems', platform: 'ios' }),
      pay('o3', 'u2', 'success', 1000, at(16, 12), { product_id: 'pass', kind: 'subscription' }),
      pay('o4', 'u1', 'refunded', 500, at(17, 9), { product_id: 'gems' }),
      pay('o5', 'u3', 'failed', 200, at(16, 13), { product_id: 'gems' }),
      // Local 08:00 of Jan 17 (Jan 16 in UTC), no product.
      pay('o6', 'u3', 'success', 200, at(17, 8), {}),
    ]
    expect((await signed(a, '/api/ingest/payments', payments)).status).toBe(200)
    // Sent again by a retrying client: counted once.
    expect((await signed(a, '/api/ingest/payments', [payments[1]])).status).toBe(200)
  })
  afterAll(() => a.stop())

  const day = (d: number) => `&startDate=2026-01-${d}&endDate=2026-01-${d}`
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
      const unknown = await a.req('POST', '/api/v1/analytics/behavior/funnel?gameId=nope&env=prod', {
        token: admin,
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
      const noScope = await a.req('POST', path, { token: admin, body: { steps } })
      expect([noScope.status, noScope.body.message]).toEqual([400, expect.stringContaining('query.gameId')])
      const inBody = await a.req('POST', `${path}?${q()}`, {
        token: admin,
        body: { gameId, env: 'prod', steps },
      })
      expect([inBody.status, inBody.body.message]).toEqual([400, expect.stringContaining('body.gameId')])
    })
  })

  describe('paths (Jan 13)', () => {
    test('per session: five sessions, repeats collapsed, a new session at session_start or after 30 minutes', async () => {
      const r = await get(`behavior/paths?${q(day(13))}`)
      expect(r.status).toBe(200)
      expect(r.body).toEqual({
        startDate: '2026-01-12T15:00:00.000Z',
        endDate: '2026-01-13T15:00:00.000Z',
        by: 'session',
        total: 5,
        paths: [
          // p1's first session (menu twice in a row is one step) and p2's.
          { path: ['session_start', 'menu', 'play', 'shop'], count: 2, share: 0.4 },
          // p1 after 56 minutes away.
          { path: ['menu', 'play'], count: 1, share: 0.2 },
          { path: ['session_start', 'menu', 'play'], count: 1, share: 0.2 },
          { path: ['session_start', 'shop'], count: 1, share: 0.2 },
        ],
      })
    })

    test('length 2, a start event, per user, top', async () => {
      const two = await get(`behavior/paths?${q(day(13))}&length=2`)
      expect(two.body.paths).toEqual([
        { path: ['session_start', 'menu'], count: 3, share: 0.6 },
        { path: ['menu', 'play'], count: 1, share: 0.2 },
        { path: ['session_start', 'shop'], count: 1, share: 0.2 },
      ])
      // p3's first session has no menu: left out.
      const menu = await get(`behavior/paths?${q(day(13))}&startEvent=menu`)
      expect([menu.body.total, menu.body.paths]).toEqual([
        4,
        [
          { path: ['menu', 'play'], count: 2, share: 0.5 },
          { path: ['menu', 'play', 'shop'], count: 2, share: 0.5 },
        ],
      ])
      const users = await get(`behavior/paths?${q(day(13))}&by=user&top=1`)
      expect([users.body.total, users.body.paths]).toEqual([
        3,
        [{ path: ['session_start', 'menu', 'play', 'shop'], count: 1, share: 0.3333 }],
      ])
      const noShop = await get(`behavior/paths?${q(day(13))}&by=user&exclude=shop,session_start&top=1`)
      // p1: menu play menu play; p2: menu play; p3: menu play.
      expect(noShop.body.paths).toEqual([{ path: ['menu', 'play'], count: 2, share: 0.6667 }])
    })

    test('bad input 400 naming the field; 401; 404', async () => {
      const len = await get(`behavior/paths?${q()}&length=1`)
      expect([len.status, len.body.message]).toEqual([400, expect.stringContaining('query.length')])
      const by = await get(`behavior/paths?${q()}&by=device`)
      expect([by.status, by.body.message]).toEqual([400, expect.stringContaining('by')])
      const rev = await get(`behavior/paths?${q()}&startDate=2026-01-13&endDate=2026-01-12`)
      expect([rev.status, rev.body.message]).toEqual([400, expect.stringContaining('query.endDate')])
      const wide = await get(`behavior/paths?${q()}&startDate=2026-01-01&endDate=2026-01-08`)
      expect([wide.status, wide.body.message]).toEqual([400, expect.stringContaining('query.endDate')])
      expect((await get(`behavior/paths?${q()}`, null)).status).toBe(401)
      expect((await get(`behavior/paths?gameId=${gameId}&env=qa`)).status).toBe(404)
    })
  })

  describe('events (raw, Jan 13 and the late one)', () => {
    test('newest first, paged, total; filters by event and user; properties kept', async () => {
      const all = await get(`behavior/events?${q(day(13))}&pageSize=2`)
      expect(all.status).toBe(200)
      // p1 7, p2 4, p3 5.
      expect(all.body.total).toBe(16)
      expect(all.body.items.map((e: { event: string; timestamp: string }) => [e.event, e.timestamp])).toEqual(
        [
          ['play', '2026-01-13T01:01:00.000Z'],
          ['menu', '2026-01-13T01:00:00.000Z'],
        ],
      )
      const menu = await get(`behavior/events?${q(day(13))}&event=menu&page=2&pageSize=2`)
      // menu: p1 09:01 09:02 10:00, p2 09:05, p3 09:11: the fifth newest is p1's 09:01.
      expect(menu.body.total).toBe(5)
      expect(menu.body.items).toHaveLength(1)
      expect(menu.body.items[0]).toMatchObject({
        event: 'menu',
        userId: 'p1',
        timestamp: '2026-01-13T00:01:00.000Z',
        properties: expect.objectContaining({ attrs: { tab: 'news' } }),
      })
      const p3 = await get(`behavior/events?${q(day(13))}&userId=p3`)
      expect(p3.body.total).toBe(5)
      // The late event is on local Jan 14 (a date-time range in UTC finds it too).
      const late = await get(`behavior/events?${q(day(14))}&event=late_ping`)
      expect(late.body.total).toBe(1)
      const utc = await get(
        `behavior/events?${q()}&startDate=2026-01-13T23:00:00Z&endDate=2026-01-13T23:00:00.001Z`,
      )
      expect(utc.body.items.map((e: { event: string }) => e.event)).toEqual(['late_ping'])
    })

    test('bad input 400 naming the field; 401; 404', async () => {
      const size = await get(`behavior/events?${q()}&pageSize=101`)
      expect([size.status, size.body.message]).toEqual([400, expect.stringContaining('query.pageSize')])
      const deep = await get(`behavior/events?${q()}&page=100&pageSize=100`)
      expect([deep.status, deep.body.message]).toEqual([400, expect.stringContaining('query.page')])
      const bad = await get(`behavior/events?${q()}&endDate=2026-13-01`)
      expect([bad.status, bad.body.message]).toEqual([400, expect.stringContaining('query.endDate')])
      expect((await get(`behavior/events?${q()}`, null)).status).toBe(401)
      expect((await get('behavior/events?gameId=nope&env=prod')).status).toBe(404)
    })
  })

  describe('aggregates', () => {
    test('per event per day, with and without the trailing slash; the late event on its local day', async () => {
      const r = await get(
        `behavior?${q()}&startDate=2026-01-12&endDate=2026-01-13&events=menu,tutorial_start`,
      )
      expect(r.status).toBe(200)
      expect(r.body).toEqual({
        startDate: '2026-01-12',
        endDate: '2026-01-13',
        totalEvents: 10,
        distinctEvents: 2,
        events: [
          {
            event: 'menu',
            count: 5,
            users: 3,
            days: [
              { date: '2026-01-12', count: 0, users: 0 },
              { date: '2026-01-13', count: 5, users: 3 },
            ],
          },
          {
            event: 'tutorial_start',
            count: 5,
            users: 5,
            days: [
              { date: '2026-01-12', count: 5, users: 5 },
              { date: '2026-01-13', count: 0, users: 0 },
            ],
          },
        ],
      })
      const slash = await get(`behavior/?${q(day(13))}&top=2`)
      // Jan 13: menu 5, play 4, session_start 4, shop 3 (ties by name).
      expect([slash.status, slash.body.totalEvents, slash.body.distinctEvents]).toEqual([200, 16, 4])
      expect(slash.body.events.map((e: { event: string; count: number }) => [e.event, e.count])).toEqual([
        ['menu', 5],
        ['play', 4],
      ])
      const late = await get(`behavior?${q(day(14))}&events=late_ping`)
      expect(late.body.events[0]).toMatchObject({ event: 'late_ping', count: 1, users: 1 })
      const before = await get(`behavior?${q(day(13))}&events=late_ping`)
      expect(before.body.events).toEqual([])
    })

    test('bad input 400 naming the field; 401; a viewer reads; 404', async () => {
      const top = await get(`behavior?${q()}&top=0`)
      expect([top.status, top.body.message]).toEqual([400, expect.stringContaining('query.top')])
      const half = await get(`behavior?${q()}&startDate=2026-01-12`)
      expect([half.status, half.body.message]).toEqual([400, expect.stringContaining('query.endDate')])
      const wide = await get(`behavior?${q()}&startDate=2025-01-12&endDate=2026-01-12`)
      expect([wide.status, wide.body.message]).toEqual([400, expect.stringContaining('query.endDate')])
      expect((await get(`behavior?${q()}`, null)).status).toBe(401)
      expect((await get(`behavior?${q()}`, await a.token('viewer'))).status).toBe(200)
      expect((await get('behavior?gameId=nope&env=prod')).status).toBe(404)
    })
  })

  describe('adoption (Jan 14)', () => {
    test('per feature: users, uses, share of the active users (a1..a4 and a5 who used one), first and last use', async () => {
      const r = await get(`behavior/adoption?${q(day(14))}`)
      expect(r.status).toBe(200)
      expect(r.body).toEqual({
        startDate: '2026-01-14',
        endDate: '2026-01-14',
        activeUsers: 5,
        features: [
          {
            feature: 'chat',
            users: 3,
            uses: 4,
            share: 0.6,
            firstUse: '2026-01-14T01:00:00.000Z',
            lastUse: '2026-01-14T05:00:00.000Z',
          },
          {
            feature: 'shop',
            users: 1,
            uses: 1,
            share: 0.2,
            firstUse: '2026-01-14T03:00:00.000Z',
            lastUse: '2026-01-14T03:00:00.000Z',
          },
        ],
      })
    })

    test('breakdown of chat by platform and by country; an unknown dimension names the allowed ones', async () => {
      const p = await get(`behavior/adoption/breakdown?${q(day(14))}&feature=chat&dimension=platform`)
      expect(p.status).toBe(200)
      expect(p.body).toEqual({
        startDate: '2026-01-14',
        endDate: '2026-01-14',
        feature: 'chat',
        dimension: 'platform',
        users: 3,
        values: [
          { value: 'IOS', users: 1, uses: 2, share: 0.3333 },
          { value: 'ANDROID', users: 1, uses: 1, share: 0.3333 },
        ],
      })
      const c = await get(`behavior/adoption/breakdown?${q(day(14))}&feature=chat&dimension=country`)
      expect(c.body.values).toEqual([{ value: 'JP', users: 1, uses: 2, share: 0.3333 }])
      const v = await get(`behavior/adoption/breakdown?${q(day(14))}&feature=chat&dimension=app_version`)
      expect(v.body.values).toEqual([{ value: '1.2', users: 1, uses: 2, share: 0.3333 }])
      const bad = await get(`behavior/adoption/breakdown?${q()}&feature=chat&dimension=gender`)
      expect(bad.status).toBe(400)
      expect(bad.body.message).toContain('dimension')
      expect(bad.body.message).toContain('app_version')
      const none = await get(`behavior/adoption/breakdown?${q()}&dimension=platform`)
      expect([none.status, none.body.message]).toEqual([400, expect.stringContaining('feature')])
      expect(
        (await get(`behavior/adoption/breakdown?${q()}&feature=chat&dimension=platform`, null)).status,
      ).toBe(401)
      expect(
        (await get('behavior/adoption/breakdown?gameId=nope&env=prod&feature=chat&dimension=platform'))
          .status,
      ).toBe(404)
      expect((await get(`behavior/adoption?${q()}`, null)).status).toBe(401)
      expect((await get('behavior/adoption?gameId=nope&env=prod')).status).toBe(404)
      const wide = await get(`behavior/adoption?${q()}&startDate=2026-01-01&endDate=2026-06-01`)
      expect([wide.status, wide.body.message]).toEqual([400, expect.stringContaining('query.endDate')])
    })
  })

  describe('payments detail (Jan 16-17)', () => {
    test('product trend: pass 10.00, gems 3.00 + 5.00 (o2 sent twice counts once; the failed o5 is none), no product 2.00 on local Jan 17', async () => {
      const r = await get(`payments/product-trend?${q()}&startDate=2026-01-16&endDate=2026-01-17`)
      expect(r.status).toBe(200)
      expect(r.body).toEqual({
        startDate: '2026-01-16',
        endDate: '2026-01-17',
        products: [
          {
            productId: 'pass',
            revenue: 10,
            transactions: 1,
            refunds: 0,
            days: [
              { date: '2026-01-16', revenue: 10, transactions: 1 },
              { date: '2026-01-17', revenue: 0, transactions: 0 },
            ],
          },
          {
            productId: 'gems',
            revenue: 8,
            transactions: 2,
            refunds: 5,
            days: [
              { date: '2026-01-16', revenue: 8, transactions: 2 },
              { date: '2026-01-17', revenue: 0, transactions: 0 },
            ],
          },
          {
            productId: null,
            revenue: 2,
            transactions: 1,
            refunds: 0,
            days: [
              { date: '2026-01-16', revenue: 0, transactions: 0 },
              { date: '2026-01-17', revenue: 2, transactions: 1 },
            ],
          },
        ],
      })
      const top = await get(`payments/product-trend?${q()}&startDate=2026-01-16&endDate=2026-01-17&top=1`)
      expect(top.body.products.map((p: { productId: string }) => p.productId)).toEqual(['pass'])
    })

    test('transactions: each order and status once, newest first, filters, pages', async () => {
      const all = await get(`payments/transactions?${q()}&startDate=2026-01-16&endDate=2026-01-17`)
      expect(all.status).toBe(200)
      expect(all.body.total).toBe(6)
      expect(all.body.items.map((t: { orderId: string }) => t.orderId)).toEqual([
        'o4',
        'o6',
        'o5',
        'o3',
        'o2',
        'o1',
      ])
      expect(all.body.items[4]).toEqual({
        timestamp: '2026-01-16T02:00:00.000Z',
        orderId: 'o2',
        status: 'success',
        amount: 3,
        amountCents: 300,
        currency: 'USD',
        userId: 'u2',
        productId: 'gems',
        kind: 'iap',
        platform: 'IOS',
      })
      expect(all.body.items[3]).toMatchObject({ orderId: 'o3', kind: 'subscription', productId: 'pass' })
      const ok = await get(
        `payments/transactions?${q()}&startDate=2026-01-16&endDate=2026-01-17&status=success`,
      )
      expect(ok.body.items.map((t: { orderId: string }) => t.orderId)).toEqual(['o6', 'o3', 'o2', 'o1'])
      const gems = await get(
        `payments/transactions?${q()}&startDate=2026-01-16&endDate=2026-01-17&productId=gems`,
      )
      expect(gems.body.total).toBe(4)
      const u2 = await get(`payments/transactions?${q()}&startDate=2026-01-16&endDate=2026-01-17&userId=u2`)
      expect(u2.body.total).toBe(2)
      const page = await get(
        `payments/transactions?${q()}&startDate=2026-01-16&endDate=2026-01-17&page=1&pageSize=2`,
      )
      expect([
        page.body.page,
        page.body.pageSize,
        page.body.items.map((t: { orderId: string }) => t.orderId),
      ]).toEqual([1, 2, ['o5', 'o3']])
      // Jan 16 alone: o6 (Jan 17 local) and o4 are not in it.
      const one = await get(`payments/transactions?${q(day(16))}`)
      expect(one.body.total).toBe(4)
    })

    test('bad input 400 naming the field; 401; 404', async () => {
      const s = await get(`payments/transactions?${q()}&status=pending`)
      expect([s.status, s.body.message]).toEqual([400, expect.stringContaining('status')])
      const p = await get(`payments/transactions?${q()}&page=-1`)
      expect([p.status, p.body.message]).toEqual([400, expect.stringContaining('query.page')])
      const t = await get(`payments/product-trend?${q()}&top=51`)
      expect([t.status, t.body.message]).toEqual([400, expect.stringContaining('query.top')])
      const d = await get(`payments/product-trend?${q()}&startDate=2026-01-17&endDate=2026-01-16`)
      expect([d.status, d.body.message]).toEqual([400, expect.stringContaining('query.endDate')])
      expect((await get(`payments/transactions?${q()}`, null)).status).toBe(401)
      expect((await get(`payments/product-trend?${q()}`, null)).status).toBe(401)
      expect((await get('payments/transactions?gameId=nope&env=prod')).status).toBe(404)
      expect((await get(`payments/product-trend?gameId=${gameId}&env=qa`)).status).toBe(404)
    })
  })

  describe('levels (Jan 15)', () => {
    test('per level in play order (1, 2, 10), pass rate = completes / starts, and the level funnel', async () => {
      const r = await get(`levels?${q(day(15))}`)
      expect(r.status).toBe(200)
      expect(r.body).toEqual({
        startDate: '2026-01-15',
        endDate: '2026-01-15',
        levels: [
          // Starts l1 1, l2 2, l3 1; completes l1 l2 (30 s, 40 s); fails l2 l3.
          {
            level: '1',
            starts: 4,
            completes: 2,
            fails: 2,
            players: 3,
            passRate: 0.5,
            failRate: 0.5,
            avgDurationMs: 35000,
          },
          // Starts l1 2, l2 1; completes l1 (50 s); fails l1 l2.
          {
            level: '2',
            starts: 3,
            completes: 1,
            fails: 2,
            players: 2,
            passRate: 0.3333,
            failRate: 0.6667,
            avgDurationMs: 50000,
          },
          {
            level: '10',
            starts: 1,
            completes: 1,
            fails: 0,
            players: 1,
            passRate: 1,
            failRate: 0,
            avgDurationMs: 20000,
          },
        ],
        funnel: [
          { level: '1', players: 3, shareOfFirst: 1 },
          { level: '2', players: 2, shareOfFirst: 0.6667 },
          { level: '10', players: 1, shareOfFirst: 0.3333 },
        ],
      })
      const forest = await get(`levels?${q(day(15))}&episode=forest`)
      expect(forest.body.episode).toBe('forest')
      expect(forest.body.levels.map((l: { level: string }) => l.level)).toEqual(['1', '2'])
    })

    test('per episode', async () => {
      const r = await get(`levels/episodes?${q(day(15))}`)
      expect(r.status).toBe(200)
      expect(r.body.episodes).toEqual([
        {
          episode: 'desert',
          levels: 1,
          starts: 1,
          completes: 1,
          fails: 0,
          players: 1,
          passRate: 1,
          failRate: 0,
          avgDurationMs: 20000,
        },
        {
          // 4 + 3 starts, 2 + 1 completes (30, 40, 50 s), 2 + 2 fails.
          episode: 'forest',
          levels: 2,
          starts: 7,
          completes: 3,
          fails: 4,
          players: 3,
          passRate: 0.4286,
          failRate: 0.5714,
          avgDurationMs: 40000,
        },
      ])
    })

    test('map m1: the heat grid over the deaths own bounds and over given bounds; the newest points', async () => {
      const r = await get(`levels/maps?${q(day(15))}&map=m1&cells=2&limit=2`)
      expect(r.status).toBe(200)
      expect(r.body).toEqual({
        map: 'm1',
        startDate: '2026-01-14T15:00:00.000Z',
        endDate: '2026-01-15T15:00:00.000Z',
        cells: 2,
        bounds: { minX: 0, maxX: 100, minY: 0, maxY: 100 },
        deaths: 4,
        // Cells of 50: (10,10), (0,0), (10,9.5) in the first; (100,100) is the maximum: the last.
        grid: [
          [3, 0],
          [0, 1],
        ],
        points: [
          { x: 100, y: 100, level: '1', userId: 'l3', timestamp: '2026-01-15T03:01:00.000Z' },
          { x: 10, y: 9.5, level: '2', userId: 'l2', timestamp: '2026-01-15T02:10:00.000Z' },
        ],
      })
      const b = await get(`levels/maps?${q(day(15))}&map=m1&cells=2&minX=0&maxX=20&minY=0&maxY=20`)
      // Cells of 10: (0,0) row 0 col 0; (10,9.5) row 0 col 1; (10,10) row 1 col 1; (100,100) outside.
      expect([b.body.deaths, b.body.grid]).toEqual([
        3,
        [
          [1, 1],
          [0, 1],
        ],
      ])
      const none = await get(`levels/maps?${q(day(15))}&map=nowhere`)
      expect([none.body.deaths, none.body.bounds, none.body.points]).toEqual([0, null, []])
    })

    test('bad input 400 naming the field; 401; 404', async () => {
      const cells = await get(`levels/maps?${q()}&map=m1&cells=101`)
      expect([cells.status, cells.body.message]).toEqual([400, expect.stringContaining('query.cells')])
      const bound = await get(`levels/maps?${q()}&map=m1&minX=5&maxX=5`)
      expect([bound.status, bound.body.message]).toEqual([400, expect.stringContaining('query.maxX')])
      const nomap = await get(`levels/maps?${q()}`)
      expect([nomap.status, nomap.body.message]).toEqual([400, expect.stringContaining('map')])
      const wide = await get(`levels?${q()}&startDate=2025-01-01&endDate=2026-01-15`)
      expect([wide.status, wide.body.message]).toEqual([400, expect.stringContaining('query.endDate')])
      const bad = await get(`levels/episodes?${q()}&startDate=2026-1-5&endDate=2026-01-15`)
      expect([bad.status, bad.body.message]).toEqual([400, expect.stringContaining('query.startDate')])
      for (const path of ['levels', 'levels/episodes', 'levels/maps?map=m1&'])
        expect((await get(`${path}${path.endsWith('&') ? '' : '?'}${q()}`, null)).status).toBe(401)
      expect((await get('levels?gameId=nope&env=prod')).status).toBe(404)
      expect((await get('levels/episodes?gameId=nope&env=prod')).status).toBe(404)
      expect((await get(`levels/maps?gameId=${gameId}&env=qa&map=m1`)).status).toBe(404)
    })
  })
})
