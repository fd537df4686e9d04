import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { SECRET, signed } from '../../plugins/ingest/testing'
import { type TestApp, forEachEngine, makeApp } from '../helpers'
import { GAME } from './lib'

/*
 * Pipeline finding M2: the signing key ships in the client, and payments are kept once per order
 * and status, the first stored winning. A client that sent a guessed store order id first (1
 * cent, `success`) hid the real payment the studio's game server wrote through the trusted
 * route: revenue showed 1 cent, and a later refund was capped at it. Now the server's write
 * supersedes the client's (docs/security.md, "Superseding payments"), and every money consumer
 * takes the client's off and counts the server's, a rebuild included.
 */

const DAY = 86_400_000

forEachEngine((engine) => {
  let a: TestApp
  let admin: string
  let gameId: string
  beforeAll(async () => {
    a = await makeApp(engine, {
      plugins: { games: {}, ingest: { signing_secret: SECRET, purge_interval_minutes: 0 }, analytics: {} },
    })
    admin = await a.token('admin')
    const made = await a.req('POST', '/api/games', { token: admin, body: { ...GAME, name: 'Superseded' } })
    gameId = String(made.body.id)
  })
  afterAll(() => a.stop())

  const now = Date.now()
  const earlier = now - 2 * DAY
  const pay = (order: string, status: string, amount: number, ts: number, who: 'client' | 'server') => ({
    event: 'payment',
    ts: String(ts),
    game_id: gameId,
    env: 'prod',
    uid: who === 'client' ? 'attacker' : 'buyer',
    product_id: who === 'client' ? 'cheap' : 'gems',
    currency: 'USD',
    order_id: order,
    status,
    amount_cents: amount,
  })
  const client = async (...events: ReturnType<typeof pay>[]) =>
    expect((await signed(a, '/api/ingest/payments', events)).status).toBe(200)
  const server = async (...events: ReturnType<typeof pay>[]) => {
    const r = await a.req('POST', '/api/v1/analytics/payments/ingest', { token: admin, body: events })
    expect([r.status, r.body]).toEqual([200, { ok: true, accepted: events.length }])
  }
  const get = async (path: string) => {
    const r = await a.req('GET', path, { token: admin })
    expect(r.status).toBe(200)
    return r.body
  }

  /** Every money figure the API and the consumers' tables hold for the game. */
  const figures = async () => {
    await a.events.drain()
    const q = `gameId=${gameId}&env=prod`
    const points = (await get(`/api/v1/analytics/warehouse/revenue?${q}&days=7`)).points as Array<{
      date: string
      revenueCents: number
      refundsCents: number
      failed: number
    }>
    const payments = await get(`/api/v1/analytics/payments?${q}`)
    const list = await get(`/api/v1/analytics/payments/transactions?${q}`)
    const products = async (kind: string) =>
      (
        await a.db.all<{ name: string; n: number; total: number }>(
          `SELECT name, SUM(n) AS n, SUM(total) AS total FROM analytics_behavior_day
           WHERE game_id = ? AND kind = ? GROUP BY name ORDER BY name`,
          [gameId, kind],
        )
      ).map((p) => [p.name, Number(p.n), Number(p.total)])
    const minutes = await a.db.get<{ v: number }>(
      'SELECT SUM(revenue_cents) AS v FROM analytics_minute WHERE game_id = ?',
      [gameId],
    )
    return {
      days: points
        .filter((p) => p.revenueCents || p.refundsCents)
        .map((p) => [p.revenueCents, p.refundsCents]),
      payments: [payments.revenue, payments.refunds, payments.transactions],
      transactions: (list.items as Array<Record<string, unknown>>).map((t) => [
        t.orderId,
        t.status,
        t.amountCents,
        t.userId,
        t.productId,
      ]),
      products: await products('product'),
      refunds: await products('product.refund'),
      failed: points.filter((p) => p.failed).map((p) => p.failed),
      realtime: Number(minutes?.v ?? 0),
    }
  }
  const stored = () =>
    a.db.all<{ order_id: string; status: string; amount_cents: number; source: string }>(
      'SELECT order_id, status, amount_cents, source FROM ingest_payments WHERE game_id = ? ORDER BY order_id, status',
      [gameId],
    )

  // Order a: the client's (1 cent) two days before the server's (49.99); order b: the other way
  // round (2 cents now, 30.00 two days before), so a rebuild from yesterday cuts each pair.
  const after = {
    days: [
      [3000, 0],
      [4999, 0],
    ],
    payments: [79.99, 0, 2],
    transactions: [
      ['a', 'success', 4999, 'buyer', 'gems'],
      ['b', 'success', 3000, 'buyer', 'gems'],
    ],
    products: [
      ['cheap', 0, 0],
      ['gems', 2, 7999],
    ],
    refunds: [],
    failed: [],
    realtime: 7999,
  }

  describe('a server payment supersedes the client payment stored first', () => {
    test("revenue, payments, transactions, products and realtime hold the server's amounts once", async () => {
      await client(pay('a', 'success', 1, earlier, 'client'), pay('b', 'success', 2, now, 'client'))
      expect((await figures()).realtime).toBe(3)
      await server(pay('a', 'success', 4999, now, 'server'), pay('b', 'success', 3000, earlier, 'server'))
      const got = await figures()
      got.transactions.sort((x, y) => String(x[0]).localeCompare(String(y[0])))
      expect(got).toEqual(after)
      expect((await stored()).map((r) => [r.order_id, Number(r.amount_cents), r.source])).toEqual([
        ['a', 4999, 'server'],
        ['b', 3000, 'server'],
      ])
    })

    test("a client's retry and a server's duplicate after it change nothing", async () => {
      await client({ ...pay('a', 'success', 1, now, 'client'), event_id: 'retry-1' } as ReturnType<
        typeof pay
      >)
      await server(pay('b', 'success', 7777, now, 'server'))
      const got = await figures()
      got.transactions.sort((x, y) => String(x[0]).localeCompare(String(y[0])))
      expect(got).toEqual(after)
      expect((await stored()).map((r) => Number(r.amount_cents))).toEqual([4999, 3000])
    })

    test("a refund after is capped by the server's amount, not the client's", async () => {
      await client(pay('a', 'refunded', 1_000_000, now, 'client'))
      const got = await figures()
      expect(got.days).toEqual([
        [3000, 0],
        [4999, 4999],
      ])
      expect(got.payments).toEqual([79.99, 49.99, 2])
    })

    test("a refund between the client's success and the server's stays capped by the client's amount", async () => {
      // Counted when it came, against what the log held then (10); the rebuild below, which takes
      // all three in one batch, must count it so too.
      await client(pay('e', 'success', 10, now, 'client'), pay('e', 'refunded', 50, now, 'client'))
      await server(pay('e', 'success', 5000, now, 'server'))
      const got = await figures()
      expect(got.days).toEqual([
        [3000, 0],
        [9999, 5009],
      ])
      expect(got.products).toEqual([
        ['cheap', 0, 0],
        ['gems', 3, 12999],
      ])
    })

    test("a server's refund and a failed payment supersede the client's too", async () => {
      // The server's real order, then the attacker's 1-cent refund of it: counted (a success came
      // before it), until the server's real refund supersedes it.
      await server(pay('r', 'success', 2000, now, 'server'))
      await client(pay('r', 'refunded', 1, now, 'client'))
      expect((await figures()).days).toEqual([
        [3000, 0],
        [11999, 5010],
      ])
      await server(pay('r', 'refunded', 2000, now, 'server'))
      // A failure: the client's, two days before, moves to the server's day.
      await client(pay('f', 'failed', 5, earlier, 'client'))
      await server(pay('f', 'failed', 7, now, 'server'))
      const got = await figures()
      expect(got.days).toEqual([
        [3000, 0],
        [11999, 7009],
      ])
      expect(got.failed).toEqual([1])
      // The attacker's earlier refunds of orders a and e (4999 and 10) stay under its product.
      expect(got.refunds).toEqual([
        ['cheap', 2, 5009],
        ['gems', 1, 2000],
      ])
      expect(got.payments).toEqual([149.99, 70.09, 4])
      expect(got.transactions.filter((t) => t[0] === 'r' || t[0] === 'f')).toEqual([
        ['r', 'success', 2000, 'buyer', 'gems'],
        ['r', 'refunded', 2000, 'buyer', 'gems'],
        ['f', 'failed', 7, 'buyer', 'gems'],
      ])
    })

    test('a rebuild of each money consumer, whole and from a date between the pairs, gives the same figures', async () => {
      const before = await figures()
      const yesterday = new Date(now - DAY).toISOString().slice(0, 10)
      for (const body of [{}, { from: yesterday }] as Array<{ from?: string }>) {
        // Damaged by hand from the cut on, as a wrong definition would have left them: only the
        // rebuild repairs them.
        const cut = body.from ? Date.parse(body.from) : 0
        const damage = [
          'UPDATE analytics_daily SET revenue_cents = revenue_cents + 99 WHERE game_id = ? AND day >= ?',
          'UPDATE analytics_minute SET revenue_cents = revenue_cents + 99 WHERE game_id = ? AND minute >= ?',
          "UPDATE analytics_behavior_day SET total = total + 99 WHERE game_id = ? AND kind = 'product' AND day >= ?",
        ]
        for (const sql of damage) expect(await a.db.run(sql, [gameId, cut])).toBeGreaterThan(0)
        for (const name of ['analytics', 'behavior', 'realtime']) {
          const r = await a.req('POST', `/api/v1/analytics/consumers/${name}/rebuild`, { token: admin, body })
          expect(r.status).toBe(202)
          await a.events.drain()
        }
        expect(await figures()).toEqual(before)
      }
    })
  })

  describe('only the trusted route supersedes', () => {
    test('a signed client request cannot supersede a client payment', async () => {
      await client(pay('c', 'success', 5, now, 'client'))
      await client({ ...pay('c', 'success', 900_000, now, 'server'), event_id: 'c-again' } as ReturnType<
        typeof pay
      >)
      const rows = (await stored()).filter((r) => r.order_id === 'c')
      expect(rows.map((r) => [Number(r.amount_cents), r.source])).toEqual([[5, 'client']])
    })

    test('an SDK key cannot supersede either: /v1/batch stores no payment at all', async () => {
      const k = await a.req('POST', '/api/api-keys', {
        token: admin,
        body: { name: 'sdk', gameId, environment: 'prod' },
      })
      expect(k.status).toBe(201)
      const r = await a.req('POST', '/v1/batch', {
        headers: { 'x-api-key': k.body.key },
        body: [{ ...pay('c', 'success', 900_000, now, 'server'), event_id: 'c-sdk' }],
      })
      expect([r.status, r.body.accepted]).toEqual([200, ['c-sdk']])
      const rows = (await stored()).filter((r) => r.order_id === 'c')
      expect(rows.map((r) => [Number(r.amount_cents), r.source])).toEqual([[5, 'client']])
    })

    test('the route refuses every role but the admin (403) and no token (401); a bad payment or an unknown game is 400 naming the field', async () => {
      const body = [pay('d', 'success', 5, now, 'server')]
      const path = '/api/v1/analytics/payments/ingest'
      for (const role of ['viewer', 'operator', 'analyst', 'developer'])
        expect((await a.req('POST', path, { token: await a.token(role), body })).status).toBe(403)
      expect((await a.req('POST', path, { body })).status).toBe(401)
      const bad = await a.req('POST', path, { token: admin, body: [{ ...body[0], amount_cents: 0 }] })
      expect(bad.status).toBe(400)
      expect(JSON.stringify(bad.body)).toContain('amount_cents')
      const unknown = await a.req('POST', path, {
        token: admin,
        body: [{ ...body[0], game_id: 'no-such-game' }],
      })
      expect(unknown.status).toBe(400)
      expect(JSON.stringify(unknown.body)).toContain('game_id')
      expect((await stored()).filter((r) => r.order_id === 'd')).toEqual([])
    })
  })
})
