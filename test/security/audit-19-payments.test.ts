import { afterAll, beforeAll, expect, test } from 'bun:test'
import { AMOUNT_CENTS_MAX, SUM_MAX } from '../../core/event-bounds'
import { SECRET, signed } from '../../plugins/ingest/testing'
import { type TestApp, forEachEngine, makeApp, until } from '../helpers'
import { GAME } from './lib'

/*
 * The nineteenth session's pipeline audit (payments), replayed as its attacker made it with the
 * shared signing secret: amount_cents up to 2^53 overflowed the day counters, and on PostgreSQL
 * and MariaDB the BIGINT error stopped the analytics, behavior and realtime consumers for every
 * game (M3); a refund counted at its own amount whatever order it named (M1); any event name on the payments route counted as revenue (L5).
 */

forEachEngine((engine) => {
  let a: TestApp
  let admin: string
  let gameId: string
  let refundGame: string
  beforeAll(async () => {
    a = await makeApp(engine, {
      plugins: { games: {}, ingest: { signing_secret: SECRET, purge_interval_minutes: 0 }, analytics: {} },
    })
    admin = await a.token('admin')
    const made = await a.req('POST', '/api/games', { token: admin, body: { ...GAME, name: 'Paid' } })
    gameId = String(made.body.id)
    const other = await a.req('POST', '/api/games', { token: admin, body: { ...GAME, name: 'Refunded' } })
    refundGame = String(other.body.id)
  })
  afterAll(() => a.stop())

  const now = Date.now()
  const pay = (
    orderId: string,
    status: string,
    amount: number,
    o: { uid?: string; event?: string; game?: string } = {},
  ) => ({
    event: o.event ?? 'payment',
    ts: String(now),
    game_id: o.game ?? gameId,
    product_id: 'gems',
    env: 'prod',
    uid: o.uid ?? 'buyer',
    order_id: orderId,
    status,
    amount_cents: amount,
  })
  interface Consumer {
    name: string
    lagEvents: number
    lastError: string | null
    parked: number
  }
  const consumers = async () =>
    (await a.req('GET', '/api/v1/analytics/consumers', { token: admin })).body.items as Consumer[]
  /** Every consumer at the head of the log, or failing (then the test sees its error). */
  const settled = () =>
    until(async () => {
      const all = await consumers()
      return all.every((c) => c.lagEvents === 0 || c.lastError || c.parked) && all
    })
  const revenue = async (game = gameId) =>
    (
      await a.req('GET', `/api/v1/analytics/warehouse/revenue?gameId=${game}&env=prod&days=1`, {
        token: admin,
      })
    ).body.points[0] as { revenueCents: number; refundsCents: number }
  /** The behavior consumer's product counters of the refund game: [kind, n, total]. */
  const products = async () =>
    (
      await a.db.all<{ kind: string; n: number; total: number }>(
        `SELECT kind, n, total FROM analytics_behavior_day WHERE game_id = ? AND kind IN ('product', 'product.refund') ORDER BY kind`,
        [refundGame],
      )
    ).map((r) => [r.kind, Number(r.n), Number(r.total)])

  test('M3: a payment past AMOUNT_CENTS_MAX is refused naming amount_cents', async () => {
    const r = await signed(a, '/api/ingest/payments', [
      pay('ok-1', 'success', 100),
      pay('big-1', 'success', Number.MAX_SAFE_INTEGER),
      pay('big-2', 'success', AMOUNT_CENTS_MAX + 1),
    ])
    expect(r.status).toBe(400)
    expect(r.body.details.errors.map((e: { index: number; field: string }) => [e.index, e.field])).toEqual([
      [1, 'amount_cents'],
      [2, 'amount_cents'],
    ])
    const at = await signed(a, '/api/ingest/payments', [pay('max-0', 'success', AMOUNT_CENTS_MAX)])
    expect(at.status).toBe(200)
  })

  test('M3: payments at the cap past BIGINT-sized sums leave every consumer healthy; the day saturates', async () => {
    // 20 × 500 payments of 10^12: 10^16, past SUM_MAX (2^53 − 1) in one day, one minute, one product.
    for (let r = 0; r < 20; r++) {
      const body = Array.from({ length: 500 }, (_, i) => pay(`max-${r}-${i}`, 'success', AMOUNT_CENTS_MAX))
      expect((await signed(a, '/api/ingest/payments', body)).status).toBe(200)
    }
    const all = await settled()
    expect(all.map((c) => [c.name, c.lastError, c.parked])).toEqual(all.map((c) => [c.name, null, 0]))
    expect((await revenue()).revenueCents).toBe(SUM_MAX)
    // The product's day total (behavior) and the minute's revenue (realtime) saturate too.
    const sums = async (sql: string) => (await a.db.all<{ v: number }>(sql, [gameId])).map((r) => Number(r.v))
    expect(
      await sums(`SELECT total AS v FROM analytics_behavior_day WHERE game_id = ? AND kind = 'product'`),
    ).toEqual([SUM_MAX])
    expect(await sums('SELECT revenue_cents AS v FROM analytics_minute WHERE game_id = ?')).toEqual([SUM_MAX])
  })

  test("calls' durations past BIGINT-sized sums leave every consumer healthy; the hour's sum saturates", async () => {
    // Not money, summed the same way: a function.invoke's duration_ms (the SDK's, up to 2^53 - 1)
    // went unbounded into the invocation hour's duration_sum.
    for (let r = 0; r < 3; r++) {
      const body = Array.from({ length: 500 }, (_, i) => ({
        event: 'function.invoke',
        ts: String(now),
        game_id: gameId,
        env: 'prod',
        uid: `caller-${r}-${i}`,
        function_id: 'slow-fn',
        duration_ms: Number.MAX_SAFE_INTEGER,
      }))
      expect((await signed(a, '/api/ingest/events', body)).status).toBe(200)
    }
    const all = await settled()
    expect(all.map((c) => [c.name, c.lastError, c.parked])).toEqual(all.map((c) => [c.name, null, 0]))
    const rows = await a.db.all<{ v: number }>(
      "SELECT duration_sum AS v FROM analytics_invocation_hour WHERE game_id = ? AND function_id = 'slow-fn'",
      [gameId],
    )
    expect(rows.map((r) => Number(r.v))).toEqual([SUM_MAX])
  })

  test('L5: an event other than payment on a payments route is refused naming event; nothing counts', async () => {
    const before = await revenue()
    for (const path of ['/api/ingest/payments'])
      for (const event of ['session_start', 'level_complete']) {
        const r = await signed(a, path, [pay(`l5-${event}`, 'success', 1, { event })])
        expect([r.status, r.body.details?.errors]).toEqual([
          400,
          [{ index: 0, field: 'event', reason: "must be 'payment' on a payments route" }],
        ])
      }
    const server = await a.req('POST', '/api/v1/analytics/payments/ingest', {
      token: admin,
      body: [pay('l5-server', 'success', 1, { event: 'session_start' })],
    })
    expect(server.status).toBe(400)
    await settled()
    expect(await revenue()).toEqual(before)
  })

  test('M1: a refund counts only against a success of its order seen before it, for at most its amount', async () => {
    const g = { game: refundGame }
    const send = async (...events: ReturnType<typeof pay>[]) =>
      expect((await signed(a, '/api/ingest/payments', events)).status).toBe(200)
    await send(pay('o1', 'success', 999, { ...g, uid: 'victim' }))
    // The attacker's refund of the victim's order for far more than it, of an order never paid, and
    // of an order paid only after the refund: 999 at most counts.
    await send(
      pay('o1', 'refunded', 900_000_000, { ...g, uid: 'attacker' }),
      pay('nope', 'refunded', AMOUNT_CENTS_MAX, { ...g, uid: 'attacker' }),
      pay('later', 'refunded', 500, { ...g, uid: 'attacker' }),
    )
    await send(pay('later', 'success', 500, g))
    // A real partial refund of a real order counts.
    await send(pay('o2', 'success', 300, g), pay('o2', 'refunded', 200, g))
    await a.events.drain()
    const want = { revenueCents: 999 + 500 + 300, refundsCents: 999 + 200 }
    expect(await revenue(refundGame)).toMatchObject(want)
    const productWant = [
      ['product', 3, 1799],
      ['product.refund', 2, 1199],
    ]
    expect(await products()).toEqual(productWant)
    // The refunds not counted are kept, as behavior transactions too.
    const refunds = await a.db.all<{ order_id: string }>(
      `SELECT order_id FROM analytics_transaction WHERE game_id = ? AND status = 'refunded' ORDER BY order_id`,
      [refundGame],
    )
    expect(refunds.map((r) => r.order_id)).toEqual(['later', 'nope', 'o1', 'o2'])
    // A whole rebuild of both consumers counts the same from the log.
    for (const name of ['analytics', 'behavior']) {
      const r = await a.req('POST', `/api/v1/analytics/consumers/${name}/rebuild`, { token: admin, body: {} })
      expect(r.status).toBe(202)
    }
    await a.events.drain()
    await until(async () => (await consumers()).every((c) => !('rebuilding' in c) || !c.rebuilding))
    expect(await revenue(refundGame)).toMatchObject(want)
    expect(await products()).toEqual(productWant)
  })
})
