import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { type TestApp, forEachEngine, makeApp } from '../../../test/helpers'
import { SECRET, signed } from '../../ingest/testing'

/**
 * Game analytics over a hand-made fixture (issue 17 points 2 and 4). Every expected number below
 * is worked out by hand in the comments from the events listed, not by the code under test.
 *
 * The game lives in America/New_York: until 8 March 2026 local time is UTC-5 (EST), from then
 * UTC-4 (EDT). Day A is 2026-03-03, day B 2026-03-04 (local dates).
 */
const A = 3
const B = 4
/** Local wall time of March `day` 2026 in New York, as epoch ms (EST before 8 March, EDT from then). */
const at = (day: number, hh: number, mm = 0) => Date.UTC(2026, 2, day, hh + (day >= 8 ? 4 : 5), mm)

forEachEngine((engine) => {
  let a: TestApp
  let admin: string
  let gameId: string
  const ev = (event: string, ts: number, extra: Record<string, unknown> = {}) => ({
    event,
    ts: String(ts),
    game_id: gameId,
    env: 'prod',
    ...extra,
  })
  const pay = (
    order: string,
    uid: string,
    status: string,
    cents: number,
    kind: string,
    platform: string,
    ts: number,
  ) =>
    ev('payment', ts, {
      uid,
      order_id: order,
      status,
      amount_cents: cents,
      currency: 'USD',
      attrs: { kind, platform },
    })
  const send = async (path: string, list: unknown[]) => expect((await signed(a, path, list)).status).toBe(200)
  const get = (path: string, token: string | null = admin) =>
    a.req('GET', `/api/analytics/${path}`, { token })
  const range = 'startDate=2026-03-03&endDate=2026-03-04'

  beforeAll(async () => {
    a = await makeApp(engine, {
      plugins: { games: {}, ingest: { signing_secret: SECRET, purge_interval_minutes: 0 }, analytics: {} },
    })
    admin = await a.token('admin')
    const g = await a.req('POST', '/api/games', {
      token: admin,
      body: {
        name: 'Harbor Tales',
        genre: 'CASUAL',
        platforms: ['IOS'],
        timezone: 'America/New_York',
        defaultCurrency: 'USD',
      },
    })
    expect(g.status).toBe(201)
    gameId = g.body.id
    const dayA = [
      ev('session_start', at(A, 9), { uid: 'u1', attrs: { session_id: 's1', platform: 'IOS' } }),
      ev('session_start', at(A, 10), { uid: 'u2', attrs: { session_id: 's2', platform: 'ANDROID' } }),
      // 23:30 local is 04:30 UTC on day B: it belongs to day A.
      ev('session_start', at(A, 23, 30), { uid: 'u3', attrs: { session_id: 's3', platform: 'ANDROID' } }),
      ev('session_end', at(A, 9, 10), {
        uid: 'u1',
        attrs: { session_id: 's1', duration_ms: 600_000, events: 5 },
      }),
      ev('session_end', at(A, 10, 1), {
        uid: 'u2',
        attrs: { session_id: 's2', duration_ms: 60_000, events: 1 },
      }),
      ev('session_end', at(A, 23, 50), {
        uid: 'u3',
        attrs: { session_id: 's3', duration_ms: 120_000, events: 3 },
      }),
      ev('ad_request', at(A, 9, 1), { uid: 'u1', attrs: { network: 'admob', filled: true } }),
      ev('ad_request', at(A, 9, 2), { uid: 'u1', attrs: { network: 'admob', filled: true } }),
      ev('ad_request', at(A, 9, 3), { uid: 'u1', attrs: { network: 'admob', filled: true } }),
      ev('ad_request', at(A, 9, 4), { uid: 'u1', attrs: { network: 'admob', filled: false } }),
      ev('ad_request', at(A, 10, 0), { uid: 'u2', attrs: { network: 'unity', filled: true } }),
      ev('ad_impression', at(A, 9, 1), { uid: 'u1', attrs: { network: 'admob', revenue: 0.01 } }),
      ev('ad_impression', at(A, 9, 2), { uid: 'u1', attrs: { network: 'admob', revenue: 0.01 } }),
      ev('ad_impression', at(A, 9, 3), { uid: 'u1', attrs: { network: 'admob', revenue: 0.01 } }),
      ev('ad_impression', at(A, 10, 0), { uid: 'u2', attrs: { network: 'unity', revenue: 0.02 } }),
      ev('friend_add', at(A, 9, 5), { uid: 'u1', attrs: { friend_id: 'u2' } }),
      ev('guild_join', at(A, 10, 0), { uid: 'u2', attrs: { guild_id: 'g1' } }),
      ev('invite', at(A, 9, 6), { uid: 'u1', attrs: { invited: ['x1', 'x2', 'x3'] } }),
      ev('perf', at(A, 10, 0), { uid: 'u1', attrs: { metric: 'FPS', value: 60 } }),
      ev('perf', at(A, 10, 5), { uid: 'u2', attrs: { metric: 'FPS', value: 30 } }),
      ev('perf', at(A, 10, 6), { uid: 'u2', attrs: { metric: 'LOAD_TIME', value: 1200 } }),
      ev('crash', at(A, 10, 7), { uid: 'u2', attrs: { crashHash: 'c1' } }),
      ev('crash', at(A, 11, 0), { uid: 'u3', attrs: { crashHash: 'c1' } }),
      ev('crash', at(A, 12, 0), { uid: 'u1', attrs: { crashHash: 'c2' } }),
    ]
    const dayB = [
      ev('session_start', at(B, 8), { uid: 'u1', attrs: { session_id: 's4', platform: 'IOS' } }),
      ev('session_start', at(B, 12), { uid: 'u4', attrs: { session_id: 's5', platform: 'WEB' } }),
      ev('session_end', at(B, 12, 1), {
        uid: 'u4',
        attrs: { session_id: 's5', duration_ms: 30_000, events: 1 },
      }),
      ev('ad_impression', at(B, 12, 0), { uid: 'u4', attrs: { network: 'admob', revenue: 0.03 } }),
      ev('invite', at(B, 12, 0), { uid: 'u4', attrs: { invited: ['y1'] } }),
      // Seven days after A (EDT by then): u1 and u3 come back.
      ev('session_start', at(A + 7, 9), { uid: 'u1', attrs: { session_id: 's6' } }),
      // u3 plays on WEB after the range: still an ANDROID user of the range, not a WEB one.
      ev('session_start', at(A + 7, 9), { uid: 'u3', attrs: { session_id: 's7', platform: 'WEB' } }),
    ]
    await send('/api/ingest/events', dayA)
    await send('/api/ingest/events', dayB)
    const payments = [
      pay('o1', 'u1', 'success', 499, 'iap', 'IOS', at(A, 9, 20)),
      pay('o2', 'u1', 'success', 999, 'subscription', 'IOS', at(A, 9, 30)),
      pay('o3', 'u2', 'success', 199, 'iap', 'ANDROID', at(A, 10, 2)),
      pay('o4', 'u2', 'failed', 500, 'iap', 'ANDROID', at(A, 10, 3)),
      pay('o5', 'u4', 'success', 1000, 'iap', 'WEB', at(B, 12, 2)),
    ]
    await send('/api/ingest/payments', payments)
    // A retrying client sends o1 again: stored and counted once.
    await send('/api/ingest/payments', [payments[0]])
    // A late event, days after it happened: u5 was active on day A.
    await send('/api/ingest/events', [
      ev('session_start', at(A, 15), { uid: 'u5', attrs: { session_id: 's8', platform: 'ANDROID' } }),
    ])
  })
  afterAll(() => a.stop())

  describe('revenue', () => {
    test('overview: iap 4.99 + 1.99 + 10.00, subscription 9.99, ads 3 x 0.01 + 0.02 + 0.03; o1 twice counts once, o4 failed not at all', async () => {
      const r = await get(`revenue/${gameId}/overview?${range}`)
      expect(r.status).toBe(200)
      expect(r.body).toEqual({
        totalRevenue: 27.05,
        iapRevenue: 16.98,
        adRevenue: 0.08,
        subscriptionRevenue: 9.99,
        days: 2,
      })
    })

    test('arpu per local day: A 17.02 over 4 users (u1 u2 u3, u5 late) and 2 payers; B 10.03 over 2 users and 1 payer', async () => {
      const r = await get(`revenue/${gameId}/arpu?${range}`)
      expect(r.body).toEqual([
        { date: '2026-03-03', arpu: 4.255, arppu: 8.51, payingUsers: 2, totalUsers: 4 },
        { date: '2026-03-04', arpu: 5.015, arppu: 10.03, payingUsers: 1, totalUsers: 2 },
      ])
    })

    test('by platform, the users of the range on each: IOS 14.98 (u1), ANDROID 1.99 over u2 u3 u5 (u3 on WEB only after the range), WEB 10.00 (u4)', async () => {
      const r = await get(`revenue/${gameId}/by-platform?${range}`)
      expect(r.body).toEqual([
        { platform: 'ANDROID', revenue: 1.99, arpu: 0.6633, arppu: 1.99 },
        { platform: 'IOS', revenue: 14.98, arpu: 14.98, arppu: 14.98 },
        { platform: 'WEB', revenue: 10, arpu: 10, arppu: 10 },
      ])
    })

    test('one day narrows the range: day B alone', async () => {
      const r = await get(`revenue/${gameId}/overview?startDate=2026-03-04&endDate=2026-03-04`)
      expect(r.body).toEqual({
        totalRevenue: 10.03,
        iapRevenue: 10,
        adRevenue: 0.03,
        subscriptionRevenue: 0,
        days: 1,
      })
    })
  })

  describe('ads', () => {
    test('overview: 0.08 over 5 impressions, eCPM 16, 4 of 5 requests filled, 2 networks', async () => {
      const r = await get(`ads/${gameId}/overview?${range}`)
      expect(r.body).toEqual({
        totalRevenue: 0.08,
        totalImpressions: 5,
        avgEcpm: 16,
        avgFillRate: 0.8,
        networkCount: 2,
      })
    })

    test('by network: admob 0.06 / 4 (eCPM 15, 3 of 4 filled); unity 0.02 / 1 (eCPM 20, 1 of 1)', async () => {
      const r = await get(`ads/${gameId}/by-network?${range}`)
      expect(r.body).toEqual([
        { network: 'admob', revenue: 0.06, impressions: 4, ecpm: 15, fillRate: 0.75, requests: 4, filled: 3 },
        { network: 'unity', revenue: 0.02, impressions: 1, ecpm: 20, fillRate: 1, requests: 1, filled: 1 },
      ])
    })
  })

  describe('sessions', () => {
    test('overview: 4 sessions, 810 s in all, 10 events, 2 of them one-event', async () => {
      const r = await get(`sessions/${gameId}/overview?${range}`)
      expect(r.body).toEqual({
        avgSessionDuration: 202_500,
        avgEventsPerSession: 2.5,
        avgBounceRate: 0.5,
        days: 2,
      })
    })

    test('trends: A 3 sessions (780 s, 9 events, 1 bounce); B 1 (30 s, 1 event, a bounce)', async () => {
      const r = await get(`sessions/${gameId}/trends?${range}`)
      expect(r.body).toEqual([
        { date: '2026-03-03', avgDuration: 260_000, avgEvents: 3, bounceRate: 0.3333 },
        { date: '2026-03-04', avgDuration: 30_000, avgEvents: 1, bounceRate: 1 },
      ])
    })
  })

  describe('performance', () => {
    const span = `startDate=${new Date(at(A, 0)).toISOString()}&endDate=${new Date(at(B, 0)).toISOString()}`
    test('overview: FPS (60 + 30) / 2, LOAD_TIME 1200, 3 crashes', async () => {
      const r = await get(`performance/${gameId}/overview?${span}`)
      expect(r.body).toEqual({
        FPS: { avgValue: 45, count: 2 },
        LAG: { avgValue: 0, count: 0 },
        CRASH: { avgValue: 0, count: 3 },
        MEMORY: { avgValue: 0, count: 0 },
        LOAD_TIME: { avgValue: 1200, count: 1 },
      })
    })

    test('crashes grouped by hash, most frequent first, with first and last sight', async () => {
      const r = await get(`performance/${gameId}/crashes?${span}`)
      expect(r.body).toEqual([
        {
          crashHash: 'c1',
          count: 2,
          firstSeen: new Date(at(A, 10, 7)).toISOString(),
          lastSeen: new Date(at(A, 11)).toISOString(),
        },
        {
          crashHash: 'c2',
          count: 1,
          firstSeen: new Date(at(A, 12)).toISOString(),
          lastSeen: new Date(at(A, 12)).toISOString(),
        },
      ])
      // An hour that holds none of them.
      const late = await get(
        `performance/${gameId}/crashes?startDate=${new Date(at(B, 1)).toISOString()}&endDate=${new Date(at(B, 2)).toISOString()}`,
      )
      expect(late.body).toEqual([])
    })
  })

  describe('social', () => {
    test('overview: 1 friendship, 1 guild join; invited per active user A 3/4, B 1/2, averaged 0.625', async () => {
      const r = await get(`social/${gameId}/overview?${range}`)
      expect(r.body).toEqual({ totalFriendships: 1, totalGuilds: 1, avgViralCoefficient: 0.625, days: 2 })
    })

    test('retention impact: social u1 u2 u4, one back on day 7 (1/3); others u3 u5, one back (1/2); lift -1/3', async () => {
      const r = await get(`social/${gameId}/retention-impact?${range}`)
      expect(r.body).toEqual({
        socialUsersD7Retention: 0.3333,
        nonSocialUsersD7Retention: 0.5,
        retentionLift: -0.3333,
      })
    })
  })

  describe('requests', () => {
    test('dates: malformed, impossible, reversed, too wide or alone answer 400 naming the field, in the general error body', async () => {
      const cases: Array<[string, string]> = [
        ['startDate=2026-3-03&endDate=2026-03-04', 'query.startDate'],
        ['startDate=2026-02-30&endDate=2026-03-04', 'query.startDate'],
        ['startDate=2026-03-04&endDate=2026-03-03', 'query.endDate'],
        ['startDate=2024-01-01&endDate=2026-03-04', 'query.endDate'],
        ['startDate=2026-03-03', 'query.endDate'],
      ]
      for (const [q, field] of cases) {
        const r = await get(`revenue/${gameId}/overview?${q}`)
        expect([q, r.status, r.body.message]).toEqual([q, 400, expect.stringContaining(field)])
        // The general body of spec 1 (`/api/*`), not the analytics family's nor the envelope.
        expect(r.body).toMatchObject({
          timestamp: expect.any(String),
          path: `/api/analytics/revenue/${gameId}/overview`,
        })
        expect(r.body.code).toBeUndefined()
      }
      const perf = await get(`performance/${gameId}/overview?startDate=2026-03-03&endDate=2026-03-04`)
      expect([perf.status, perf.body.message]).toEqual([400, expect.stringContaining('query.startDate')])
    })

    test('without dates: the 30 days up to today in the game; env narrows; an unknown game is 404; no token 401', async () => {
      const r = await get(`sessions/${gameId}/trends`)
      expect(r.status).toBe(200)
      expect(r.body).toHaveLength(30)
      const staging = await get(`revenue/${gameId}/overview?${range}&env=staging`)
      expect(staging.body).toEqual({
        totalRevenue: 0,
        iapRevenue: 0,
        adRevenue: 0,
        subscriptionRevenue: 0,
        days: 2,
      })
      expect((await get(`ads/nope/overview?${range}`)).status).toBe(404)
      expect((await get(`ads/${gameId}/overview?${range}`, null)).status).toBe(401)
    })

    test('every role reads (analytics:read); the server-side write stays admin-only', async () => {
      const viewer = await a.token('viewer')
      expect((await get(`revenue/${gameId}/overview?${range}`, viewer)).status).toBe(200)
      const w = await a.req('POST', '/api/v1/analytics/ingest', { token: viewer, body: [] })
      expect(w.status).toBe(403)
    })
  })
})
