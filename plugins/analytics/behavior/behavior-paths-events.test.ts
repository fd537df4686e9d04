import { describe, expect, test } from 'bun:test'
import { forEachEngine } from '../../../test/helpers'
import { behaviorSuite, day } from './behavior-fixture'

// Paths, raw events and per-day aggregates over the behavior fixture (behavior-fixture.ts).
forEachEngine((engine) => {
  const fx = behaviorSuite(engine)
  const { get, q } = fx

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
      expect((await get(`behavior/paths?gameId=${fx.gameId}&env=qa`)).status).toBe(404)
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
      expect((await get(`behavior?${q()}`, await fx.a.token('viewer'))).status).toBe(200)
      expect((await get('behavior?gameId=nope&env=prod')).status).toBe(404)
    })
  })
})
