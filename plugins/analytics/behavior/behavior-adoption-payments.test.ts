import { describe, expect, test } from 'bun:test'
import { forEachEngine } from '../../../test/helpers'
import { behaviorSuite, day } from './behavior-fixture'

// Feature adoption and payment detail over the behavior fixture (behavior-fixture.ts).
forEachEngine((engine) => {
  const fx = behaviorSuite(engine)
  const { get, q } = fx

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
        'o1',
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
      // Jan 16 alone: o6 (Jan 17 local) and o1's refund are not in it.
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
      expect((await get(`payments/product-trend?gameId=${fx.gameId}&env=qa`)).status).toBe(404)
    })
  })
})
