import { afterAll, beforeAll, expect } from 'bun:test'
import { type Engine, type TestApp, makeApp } from '../../../test/helpers'
import { SECRET, signed } from '../../ingest/testing'

/**
 * Behavior, payment detail and level analytics over a hand-made fixture (issue 17 point 4);
 * every expected number is worked out by hand in the comments, never by the code under test.
 * The game lives in Asia/Tokyo (UTC+9): local 08:00 is 23:00 UTC the day before. Each part of
 * the fixture has its own local day in January 2026, so the parts do not mix. Its tests are the
 * behavior-*.test.ts files beside this one: funnel, paths-events, adoption-payments and levels.
 */
const at = (day: number, hh: number, mm = 0, ms = 0) => Date.UTC(2026, 0, day, hh - 9, mm, 0, ms)

/** The query's dates of one local day of January 2026. */
export const day = (d: number) => `&startDate=2026-01-${d}&endDate=2026-01-${d}`

/**
 * The game of the fixture on `engine`, ingested once for the calling file's suite: `fx.a`,
 * `fx.admin` and `fx.gameId` once it began; `get` reads an analytics route (as admin unless told),
 * `q` is the scope of its query.
 */
export function behaviorSuite(engine: Engine) {
  const fx = { a: undefined as unknown as TestApp, admin: '', gameId: '' }
  const ev = (uid: string, event: string, ts: number, attrs: Record<string, unknown> = {}) => ({
    event,
    ts: String(ts),
    game_id: fx.gameId,
    env: 'prod',
    uid,
    attrs,
  })
  const get = (path: string, token: string | null = fx.admin) =>
    fx.a.req('GET', `/api/v1/analytics/${path}`, { token })
  const q = (extra = '') => `gameId=${fx.gameId}&env=prod${extra}`

  beforeAll(async () => {
    fx.a = await makeApp(engine, {
      plugins: { games: {}, ingest: { signing_secret: SECRET, purge_interval_minutes: 0 }, analytics: {} },
    })
    fx.admin = await fx.a.token('admin')
    const g = await fx.a.req('POST', '/api/games', {
      token: fx.admin,
      body: {
        name: 'Kyoto Quest',
        genre: 'RPG',
        platforms: ['IOS'],
        timezone: 'Asia/Tokyo',
        defaultCurrency: 'USD',
      },
    })
    expect(g.status).toBe(201)
    fx.gameId = g.body.id
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
    expect((await signed(fx.a, '/api/ingest/events', events)).status).toBe(200)
    // Sent later, about days long past: local 08:00 of Jan 14 is Jan 13 23:00 UTC.
    expect((await signed(fx.a, '/api/ingest/events', [ev('u9', 'late_ping', at(14, 8))])).status).toBe(200)
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
      // u1's o1 refunded: a refund counts only against its order's success (audit 19 M1).
      pay('o1', 'u1', 'refunded', 500, at(17, 9), { product_id: 'gems' }),
      pay('o5', 'u3', 'failed', 200, at(16, 13), { product_id: 'gems' }),
      // Local 08:00 of Jan 17 (Jan 16 in UTC), no product.
      pay('o6', 'u3', 'success', 200, at(17, 8), {}),
    ]
    expect((await signed(fx.a, '/api/ingest/payments', payments)).status).toBe(200)
    // Sent again by a retrying client: counted once.
    expect((await signed(fx.a, '/api/ingest/payments', [payments[1]])).status).toBe(200)
  })
  afterAll(() => fx.a.stop())
  return Object.assign(fx, { get, q })
}
