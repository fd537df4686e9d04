import { afterAll, beforeAll, expect } from 'bun:test'
import { Elysia } from 'elysia'
import { definePlugin } from '../../../core/plugin'
import { type Engine, type TestApp, makeApp } from '../../../test/helpers'
import { SECRET, signed } from '../../ingest/testing'
import type { RealtimeHub } from './realtime'

// Shared by the realtime test files: realtime-stream.test.ts and realtime-timers-load.test.ts.

export const MINUTE = 60_000
const DAY = 86_400_000

/** Hands the test the app's realtime hub: its clock and ticks are driven by the tests. */
function probe() {
  const got: { hub?: RealtimeHub } = {}
  const plugin = definePlugin({
    name: 'realtime_probe',
    dependsOn: ['analytics'],
    setup(ctx) {
      got.hub = ctx.service('realtime')
      return new Elysia({ name: 'realtime_probe' })
    },
  })
  return { got, plugin }
}

/**
 * An app with games, signed ingestion and analytics (`realtime` its settings), its admin's token,
 * a game in Tokyo, and the realtime hub: stopped when `driven`, the tests ticking it themselves.
 */
export async function realtimeApp(
  engine: Parameters<typeof makeApp>[0],
  realtime: Record<string, unknown>,
  driven = true,
) {
  const p = probe()
  const a = await makeApp(engine, {
    plugins: {
      games: {},
      ingest: { signing_secret: SECRET, purge_interval_minutes: 0 },
      analytics: { realtime },
      realtime_probe: {},
    },
    extraPlugins: { realtime_probe: p.plugin },
  })
  const admin = await a.token('admin')
  const g = await a.req('POST', '/api/games', {
    token: admin,
    body: {
      name: 'Neon Arena',
      genre: 'ACTION',
      platforms: ['IOS'],
      timezone: 'Asia/Tokyo',
      defaultCurrency: 'USD',
    },
  })
  expect(g.status).toBe(201)
  const hub = p.got.hub!
  // Tests that drive ticks and pings themselves keep the timers from interleaving their own.
  if (driven) hub.stop()
  return { a, admin, gameId: String(g.body.id), hub }
}

/**
 * The app of realtimeApp with these settings, its hub driven by the tests, for the calling describe
 * block: `fx.a`, `fx.admin`, `fx.gameId` and `fx.hub` once it began.
 */
export function realtimeSuite(engine: Engine, realtime: Record<string, unknown>) {
  const fx = {
    a: undefined as unknown as TestApp,
    admin: '',
    gameId: '',
    hub: undefined as unknown as RealtimeHub,
  }
  beforeAll(async () => {
    Object.assign(fx, await realtimeApp(engine, realtime))
  })
  afterAll(() => fx.a.stop())
  return fx
}

/**
 * The clock of the stream: 12:30:20 in Tokyo (UTC+9) two days ago, far from a local midnight and
 * within the environment's retention. M is its minute (12:30), M1 and M2 the two before.
 */
export const NOW = Math.floor(Date.now() / DAY) * DAY - 2 * DAY + 3 * 3_600_000 + 30 * MINUTE + 20_000
export const M = NOW - 20_000
export const M1 = M - MINUTE
export const M2 = M - 2 * MINUTE

/**
 * What the stream tests count, ingested into `gameId` of `a`: events and payments in the minutes
 * M2, M1 and M of the clock NOW, one in staging and a payment of the day before.
 */
export async function seedStream(a: TestApp, gameId: string) {
  const ev = (event: string, uid: string, ts: number, attrs: Record<string, unknown> = {}) => ({
    event,
    ts: String(ts),
    game_id: gameId,
    env: 'prod',
    uid,
    ...attrs,
  })
  const events = [
    ev('session_start', 'u4', M2 + 1000, { session_id: 's4' }),
    ev('session_start', 'u1', M1 + 5000, { session_id: 's1' }),
    ev('heartbeat', 'u2', M1 + 10_000),
    ev('heartbeat', 'u1', M + 1000),
    ev('heartbeat', 'u3', M + 2000),
    ev('level_start', 'u1', M + 3000, { level: 1 }),
    ev('login', 'u5', M + 4000),
    // In the staging environment: never in prod's numbers.
    { ...ev('heartbeat', 'u9', M + 5000), env: 'staging' },
  ]
  expect((await signed(a, '/api/ingest/events', events)).status).toBe(200)
  const pay = (order: string, uid: string, status: string, cents: number, ts: number) =>
    ev('payment', uid, ts, { order_id: order, status, amount_cents: cents, currency: 'USD' })
  const payments = [
    pay('p1', 'u1', 'success', 499, M + 5000),
    pay('p2', 'u2', 'success', 1000, M1 + 20_000),
    pay('p3', 'u3', 'refunded', 300, M + 6000),
    // Yesterday in Tokyo: not today's revenue.
    pay('p0', 'u2', 'success', 700, NOW - DAY),
  ]
  expect((await signed(a, '/api/ingest/payments', payments)).status).toBe(200)
}
