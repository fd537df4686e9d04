import { afterAll, beforeAll, expect, test } from 'bun:test'
import { type TestApp, forEachEngine, makeApp } from '../../../test/helpers'
import { SECRET, signed } from '../../ingest/testing'

/**
 * Server analytics overview and retention over a hand-made fixture (issue 17 points 3 and 4);
 * every expected number is worked out by hand in the comments. The game lives in Asia/Tokyo
 * (UTC+9, no daylight saving): local 08:00 is 23:00 UTC the day before.
 */
const at = (day: number, hh: number) => Date.UTC(2026, 0, day, hh - 9)

forEachEngine((engine) => {
  let a: TestApp
  let admin: string
  let gameId: string
  const start = (uid: string, day: number, hh = 10) => ({
    event: 'session_start',
    ts: String(at(day, hh)),
    game_id: gameId,
    env: 'prod',
    uid,
    attrs: { session_id: `${uid}-${day}` },
  })
  const pay = (order: string, uid: string, status: string, cents: number, day: number) => ({
    event: 'payment',
    ts: String(at(day, 12)),
    game_id: gameId,
    env: 'prod',
    uid,
    order_id: order,
    status,
    amount_cents: cents,
  })
  const get = (path: string, token: string | null = admin) =>
    a.req('GET', `/api/v1/analytics/${path}`, { token })

  beforeAll(async () => {
    a = await makeApp(engine, {
      plugins: { games: {}, ingest: { signing_secret: SECRET, purge_interval_minutes: 0 }, analytics: {} },
    })
    admin = await a.token('admin')
    const g = await a.req('POST', '/api/games', {
      token: admin,
      body: {
        name: 'Tokyo Drift',
        genre: 'SPORTS',
        platforms: ['IOS'],
        timezone: 'Asia/Tokyo',
        defaultCurrency: 'JPY',
      },
    })
    expect(g.status).toBe(201)
    gameId = g.body.id
    // Previous period (Jan 5-7): p1 on the 5th and 6th, p2 on the 6th; p1 pays 3.00 on the 6th.
    // Current period (Jan 8-10): c1 on the 8th and 9th, c2 on the 8th and 10th, c3 on the 10th at
    // 08:00 local (the 9th in UTC), p1 back on the 9th; c1 again on the 13th (the next week).
    const events = [
      start('p1', 5),
      start('p1', 6),
      start('p2', 6),
      start('c1', 8),
      start('c1', 9),
      start('c2', 8),
      start('c2', 10),
      start('c3', 10, 8),
      start('p1', 9),
      start('c1', 13),
    ]
    expect((await signed(a, '/api/ingest/events', events)).status).toBe(200)
    const payments = [
      pay('q1', 'p1', 'success', 300, 6),
      pay('q2', 'c1', 'success', 1000, 8),
      pay('q3', 'c1', 'success', 500, 9),
      // Part of c1's q2 refunded: a refund counts only against its order's success (audit 19 M1).
      pay('q2', 'c2', 'refunded', 200, 10),
      pay('q5', 'p1', 'success', 250, 9),
    ]
    expect((await signed(a, '/api/ingest/payments', payments)).status).toBe(200)
    // Sent again by a retrying client: counted once.
    expect((await signed(a, '/api/ingest/payments', payments.slice(1, 3))).status).toBe(200)
  })
  afterAll(() => a.stop())

  test('overview: each KPI of Jan 8-10 beside Jan 5-7', async () => {
    const r = await get(`overview?gameId=${gameId}&env=prod&startDate=2026-01-08&endDate=2026-01-10`)
    expect(r.status).toBe(200)
    expect(r.body).toEqual({
      startDate: '2026-01-08',
      endDate: '2026-01-10',
      previousStartDate: '2026-01-05',
      previousEndDate: '2026-01-07',
      metrics: {
        // 2 + 2 + 2 user-days over 3 days; before: 1 + 2 + 0 over 3.
        dau: { value: 2, previous: 1 },
        // Active in the 30 days to Jan 10: p1 p2 c1 c2 c3; to Jan 7: p1 p2.
        mau: { value: 5, previous: 2 },
        newUsers: { value: 3, previous: 2 },
        // 10.00 + 5.00 + 2.50 (the refund is no revenue); before 3.00.
        revenue: { value: 17.5, previous: 3 },
        // 17.50 over c1 c2 c3 p1; before 3.00 over p1 p2.
        arpu: { value: 4.375, previous: 1.5 },
        // 17.50 over c1 and p1; before 3.00 over p1.
        arppu: { value: 8.75, previous: 3 },
        payingUsers: { value: 2, previous: 1 },
        // First seen before the last day: c1 (back the 9th), c2 (not the 9th); before p1 (back), p2 (not).
        d1Retention: { value: 0.5, previous: 0.5 },
      },
    })
  })

  test('retention by day: D1..D3 of each cohort of Jan 5-10', async () => {
    const r = await get(`retention?gameId=${gameId}&env=prod&startDate=2026-01-05&endDate=2026-01-10&size=3`)
    expect(r.status).toBe(200)
    expect(r.body).toEqual({
      interval: 'day',
      size: 3,
      cohorts: [
        { cohort: '2026-01-05', users: 1, counts: [1, 0, 0], retention: [1, 0, 0] },
        { cohort: '2026-01-06', users: 1, counts: [0, 0, 0], retention: [0, 0, 0] },
        { cohort: '2026-01-07', users: 0, counts: [0, 0, 0], retention: [0, 0, 0] },
        { cohort: '2026-01-08', users: 2, counts: [1, 1, 0], retention: [0.5, 0.5, 0] },
        { cohort: '2026-01-09', users: 0, counts: [0, 0, 0], retention: [0, 0, 0] },
        // c3's 08:00 on the 10th is the 9th in UTC: the game's day counts.
        { cohort: '2026-01-10', users: 1, counts: [0, 0, 0], retention: [0, 0, 0] },
      ],
    })
  })

  test('retention by week (from Monday Jan 5): five new users, c1 back the next week', async () => {
    const r = await get(
      `retention?gameId=${gameId}&env=prod&startDate=2026-01-05&endDate=2026-01-11&interval=week&size=2`,
    )
    expect(r.body).toEqual({
      interval: 'week',
      size: 2,
      cohorts: [{ cohort: '2026-01-05', users: 5, counts: [1, 0], retention: [0.2, 0] }],
    })
  })

  test('payments of Jan 8-10: 10.00 + 5.00 + 2.50 from three successes (c1 twice, p1), a 2.00 refund, sent twice and counted once', async () => {
    const r = await get(`payments?gameId=${gameId}&env=prod&startDate=2026-01-08&endDate=2026-01-10`)
    expect(r.status).toBe(200)
    expect(r.body).toEqual({
      startDate: '2026-01-08',
      endDate: '2026-01-10',
      revenue: 17.5,
      refunds: 2,
      failed: 0,
      transactions: 3,
      payingUsers: 2,
      arppu: 8.75,
      avgTransaction: 5.8333,
    })
    const daily = await get(
      `payments/summary?gameId=${gameId}&env=prod&startDate=2026-01-08&endDate=2026-01-10`,
    )
    expect(daily.body).toEqual([
      { date: '2026-01-08', revenue: 10, refunds: 0, transactions: 1, users: 1 },
      { date: '2026-01-09', revenue: 7.5, refunds: 0, transactions: 2, users: 2 },
      { date: '2026-01-10', revenue: 0, refunds: 2, transactions: 0, users: 0 },
    ])
    const bad = await get(`payments/summary?gameId=${gameId}&env=prod&startDate=2026-01-08`)
    expect([bad.status, bad.body.message]).toEqual([400, expect.stringContaining('query.endDate')])
    expect((await get('payments?gameId=nope&env=prod')).status).toBe(404)
    expect((await get(`payments?gameId=${gameId}&env=prod`, null)).status).toBe(401)
  })

  test('bad input: 400 naming the field in the analytics error body; unknown game or environment 404; no token 401', async () => {
    const bad = await get(`overview?gameId=${gameId}&env=prod&startDate=2026-01-10&endDate=2026-01-08`)
    expect(bad.status).toBe(400)
    expect(bad.body).toMatchObject({
      error: expect.any(String),
      message: expect.stringContaining('query.endDate'),
    })
    expect(bad.body.timestamp).toBeUndefined()
    const wide = await get(`overview?gameId=${gameId}&env=prod&startDate=2025-01-01&endDate=2026-01-08`)
    expect([wide.status, wide.body.message]).toEqual([400, expect.stringContaining('query.endDate')])
    // The overview's own bound is 92 days (the game analytics allow 366): 93 is refused, 92 read.
    const over = await get(`overview?gameId=${gameId}&env=prod&startDate=2026-01-01&endDate=2026-04-03`)
    expect([over.status, over.body.message]).toEqual([400, expect.stringContaining('more than 92 days')])
    const within = await get(`overview?gameId=${gameId}&env=prod&startDate=2026-01-01&endDate=2026-04-02`)
    expect(within.status).toBe(200)
    const size = await get(`retention?gameId=${gameId}&env=prod&size=31`)
    expect([size.status, size.body.message]).toEqual([400, expect.stringContaining('query.size')])
    const noEnv = await get(`overview?gameId=${gameId}`)
    expect(noEnv.status).toBe(400)
    expect((await get('overview?gameId=nope&env=prod')).status).toBe(404)
    expect((await get(`overview?gameId=${gameId}&env=qa`)).status).toBe(404)
    expect((await get(`overview?gameId=${gameId}&env=prod`, null)).status).toBe(401)
  })
})
