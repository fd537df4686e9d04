import { describe, expect, test } from 'bun:test'
import { LiveopsClient } from '../../../sdk/client'
import { signRequest } from '../../../sdk/sign'
import { forEachEngine } from '../../../test/helpers'
import { OUTSIDE_WINDOW, SECRET, signed } from '../testing'
import { ingestSuite } from './ingest-fixture'

// Signed ingestion on /api/ingest: events, payments, the limits and policies of environments.
forEachEngine((engine) => {
  const fx = ingestSuite(engine)
  const { ev, count } = fx

  describe('signed ingestion', () => {
    test('the SDK batches, signs and delivers; DAU and new users follow login and session_start', async () => {
      const sent: number[] = []
      const client = new LiveopsClient({
        endpoint: 'http://localhost',
        gameId: fx.gameId,
        env: 'prod',
        secret: SECRET,
        batchSize: 3,
        flushIntervalMs: 0,
        flushOnExit: false,
        fetch: async (url, init) => {
          sent.push(JSON.parse(String(init.body)).length)
          return fx.a.app.handle(new Request(url, init))
        },
      })
      for (const u of ['u1', 'u2', 'u3']) {
        client.identify(u)
        client.track('login')
      }
      client.identify('u1')
      client.track('session_start', { session_id: 's1' })
      client.track('level_up', { level: 3 })
      await client.close()
      expect(client.acknowledged).toBe(5)
      expect(sent).toEqual([3, 2])
      const r = await fx.a.req('GET', `/api/v1/analytics/warehouse/dau?gameId=${fx.gameId}&env=prod&days=1`, {
        token: fx.admin,
      })
      expect(r.status).toBe(200)
      expect(r.body.points).toEqual([
        { date: new Date().toISOString().slice(0, 10), gameId: fx.gameId, env: 'prod', dau: 3, newUsers: 3 },
      ])
      expect(
        await count(
          "SELECT COUNT(*) AS n FROM ingest_events WHERE game_id = ? AND event = 'level_up' AND level = '3'",
          [fx.gameId],
        ),
      ).toBe(1)
    })

    test('missing headers, bad timestamp, skew and bad signature answer 401 with their codes', async () => {
      const body = JSON.stringify([ev('x')])
      const r1 = await fx.a.req('POST', '/api/ingest/events', { raw: body, headers: { 'x-timestamp': '1' } })
      expect(r1.status).toBe(401)
      expect(r1.body).toMatchObject({ error: 'missing_signature_headers', path: '/api/ingest/events' })
      expect(r1.body.details.missing).toEqual(['X-Nonce', 'X-Signature'])
      const sig = await signRequest(SECRET, body)
      const r2 = await fx.a.req('POST', '/api/ingest/events', {
        raw: body,
        headers: { ...sig, 'X-Timestamp': 'soon' },
      })
      expect([r2.status, r2.body.error]).toEqual([401, 'invalid_timestamp'])
      const r3 = await signed(fx.a, '/api/ingest/events', [ev('x')], {
        timestamp: Math.floor(Date.now() / 1000) - 301,
      })
      expect([r3.status, r3.body.error]).toEqual([401, 'timestamp_skew'])
      const r4 = await signed(fx.a, '/api/ingest/events', [ev('x')], { secret: 'wrong' })
      expect([r4.status, r4.body.error]).toEqual([401, 'invalid_signature'])
      // A body changed after signing fails too.
      const r5 = await fx.a.req('POST', '/api/ingest/events', {
        raw: body.replace('"x"', '"y"'),
        headers: { ...sig },
      })
      expect([r5.status, r5.body.error]).toEqual([401, 'invalid_signature'])
    })

    test('a nonce seen in the last 15 minutes is a replay: 429 duplicate_nonce', async () => {
      const first = await signed(fx.a, '/api/ingest/events', [ev('x')], { nonce: 'nonce-1' })
      expect(first.status).toBe(200)
      const again = await signed(fx.a, '/api/ingest/events', [ev('x')], { nonce: 'nonce-1' })
      expect([again.status, again.body.error]).toEqual([429, 'duplicate_nonce'])
    })

    test('over 10 MB answers 413 before the signature is checked', async () => {
      const big = 'x'.repeat(10 * 1024 * 1024 + 1)
      const r = await fx.a.req('POST', '/api/ingest/events', {
        raw: big,
        headers: { 'x-timestamp': '1', 'x-nonce': 'n', 'x-signature': 'bad' },
      })
      expect([r.status, r.body.error]).toEqual([413, 'body_too_large'])
    })

    test('over a real socket a body without a length is bounded too, and a signed chunked batch is read', async () => {
      const base = fx.a.listen()
      const chunked = (bytes: Uint8Array) =>
        new ReadableStream<Uint8Array>({
          start(c) {
            for (let i = 0; i < bytes.length; i += 65_536) c.enqueue(bytes.subarray(i, i + 65_536))
            c.close()
          },
        })
      const post = (bytes: Uint8Array, headers: Record<string, string>) =>
        fetch(`${base}/api/ingest/events`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', ...headers },
          body: chunked(bytes),
          duplex: 'half',
        } as RequestInit)
      const big = new Uint8Array(12 * 1024 * 1024).fill(0x78)
      const r = await post(big, { 'x-timestamp': '1', 'x-nonce': 'n', 'x-signature': 'bad' })
      expect(r.status).toBe(413)
      expect(await r.json()).toMatchObject({ error: 'body_too_large', path: '/api/ingest/events' })
      const body = JSON.stringify([ev('chunked-ok')])
      const ok = await post(new TextEncoder().encode(body), { ...(await signRequest(SECRET, body)) })
      expect(ok.status).toBe(200)
    })

    test('a batch with bad events is refused whole, listing every index, field and reason', async () => {
      const before = await count('SELECT COUNT(*) AS n FROM ingest_events')
      const batch = [
        ev('fine'),
        { ...ev('numeric'), ts: Date.now() },
        { ts: String(Date.now()), game_id: fx.gameId, env: 'prod' },
        { ...ev('e'), game_id: 42, env: ['prod'] },
        'not an object',
        { event: 'in_attrs', attrs: { ts: String(Date.now()), game_id: fx.gameId, env: 'prod' } },
        { ...ev('bad ts'), ts: 'yesterday' },
        // Past JavaScript's last date: stored, it stopped every game's analytics consumers.
        { ...ev('too late'), ts: '8640000000000001' },
        { ...ev('year 10000'), ts: '253402300800000' },
        { ...ev('last ms of 9999'), ts: '253402300799999' },
      ]
      const r = await signed(fx.a, '/api/ingest/events', batch)
      expect(r.status).toBe(400)
      expect(r.body.error).toBe('invalid_events')
      expect(r.body.details.errors).toEqual([
        { index: 1, field: 'ts', reason: 'missing: ts must be a string of epoch milliseconds' },
        { index: 2, field: 'event', reason: 'required' },
        { index: 3, field: 'game_id', reason: 'must be a string' },
        { index: 3, field: 'env', reason: 'must be a string' },
        { index: 4, field: 'event', reason: 'must be a JSON object' },
        { index: 6, field: 'ts', reason: 'must be a string of epoch milliseconds' },
        // Past the event window (max_event_future_s, at most TS_MAX): refused, never stored.
        { index: 7, field: 'ts', reason: expect.stringMatching(OUTSIDE_WINDOW) },
        { index: 8, field: 'ts', reason: expect.stringMatching(OUTSIDE_WINDOW) },
        { index: 9, field: 'ts', reason: expect.stringMatching(OUTSIDE_WINDOW) },
      ])
      expect(await count('SELECT COUNT(*) AS n FROM ingest_events')).toBe(before)
    })

    test('malformed JSON and a body that is not an array answer 400 invalid_payload', async () => {
      const r1 = await signed(fx.a, '/api/ingest/events', '[{"event":')
      expect([r1.status, r1.body.error]).toEqual([400, 'invalid_payload'])
      const r2 = await signed(fx.a, '/api/ingest/events', { event: 'x' })
      expect([r2.status, r2.body.error]).toEqual([400, 'invalid_payload'])
    })

    test('unknown game or environment: 400 naming it', async () => {
      const r1 = await signed(fx.a, '/api/ingest/events', [ev('x'), { ...ev('x'), game_id: 'no-such-game' }])
      expect(r1.status).toBe(400)
      expect(r1.body).toMatchObject({
        error: 'unknown_game',
        details: { field: '[1].game_id', gameId: 'no-such-game' },
      })
      expect(r1.body.message).toContain("'no-such-game'")
      const r2 = await signed(fx.a, '/api/ingest/events', [{ ...ev('x'), env: 'qa' }])
      expect(r2.status).toBe(400)
      expect(r2.body).toMatchObject({
        error: 'unknown_environment',
        details: { field: '[0].env', env: 'qa' },
      })
    })
  })

  describe('payments and revenue', () => {
    test('payments need order_id, status and amount_cents > 0', async () => {
      const r = await signed(fx.a, '/api/ingest/payments', [
        ev('payment', { order_id: 'o-1', status: 'success', amount_cents: 100 }),
        ev('payment', { status: 'paid', amount_cents: 0 }),
      ])
      expect(r.status).toBe(400)
      expect(r.body.details.errors).toEqual([
        { index: 1, field: 'order_id', reason: 'required' },
        { index: 1, field: 'status', reason: 'must be one of success, refunded, failed' },
        { index: 1, field: 'amount_cents', reason: 'must be an integer greater than 0' },
      ])
    })

    test('an order_id repeated with the same status is stored once; revenue, refunds and failed per day', async () => {
      const p = (order: string, status: string, amount: number) =>
        ev('payment', { order_id: order, status, amount_cents: amount, currency: 'USD', uid: 'payer' })
      expect(
        (
          await signed(fx.a, '/api/ingest/payments', [
            p('o-1', 'success', 499),
            p('o-1', 'success', 499),
            p('o-2', 'success', 1000),
          ])
        ).status,
      ).toBe(200)
      expect(
        (
          await signed(fx.a, '/api/ingest/payments', [
            p('o-1', 'success', 499),
            p('o-2', 'refunded', 1000),
            p('o-3', 'failed', 50),
          ])
        ).status,
      ).toBe(200)
      const r = await fx.a.req('GET', `/api/v1/analytics/warehouse/revenue?gameId=${fx.gameId}&days=2`, {
        token: fx.admin,
      })
      expect(r.status).toBe(200)
      expect(r.body.points).toHaveLength(2)
      expect(r.body.points[1]).toEqual({
        date: new Date().toISOString().slice(0, 10),
        revenueCents: 1499,
        refundsCents: 1000,
        failed: 1,
      })
      expect(r.body.points[0]).toMatchObject({ revenueCents: 0, refundsCents: 0, failed: 0 })
      expect(await count('SELECT COUNT(*) AS n FROM ingest_payments WHERE game_id = ?', [fx.gameId])).toBe(4)
    })
  })

  describe('limits and invocations on signed ingestion', () => {
    test('the per-IP limit of an environment answers 429 rate_limit_exceeded on signed requests', async () => {
      const put = (rateLimit: Record<string, number>) =>
        fx.a.req('PUT', `/api/games/${fx.gameId}/environments/dev/settings`, {
          token: fx.admin,
          body: { rateLimit },
        })
      expect((await put({ requestsPerMinutePerIp: 1 })).status).toBe(200)
      try {
        expect((await signed(fx.a, '/api/ingest/events', [{ ...ev('ip_1'), env: 'dev' }])).status).toBe(200)
        const r = await signed(fx.a, '/api/ingest/events', [{ ...ev('ip_2'), env: 'dev' }])
        expect(r.status).toBe(429)
        expect(r.body).toMatchObject({ error: 'rate_limit_exceeded', details: { limit: 1 } })
        expect(await count("SELECT COUNT(*) AS n FROM ingest_events WHERE event = 'ip_2'")).toBe(0)
      } finally {
        expect((await put({ requestsPerMinutePerIp: 0 })).status).toBe(200)
      }
    })

    test('function.invoke outcomes: anything but success is a failure; none at all is a success', async () => {
      const call = (outcome?: string) =>
        ev('function.invoke', {
          attrs: { functionId: 'outcomes', durationMs: 5, ...(outcome ? { outcome } : {}) },
        })
      const r = await signed(fx.a, '/api/ingest/events', [
        call('success'),
        call(),
        call('failure'),
        call('error'),
        call('timeout'),
      ])
      expect(r.status).toBe(200)
      const list = async (outcome: string) =>
        (
          await fx.a.req(
            'GET',
            `/api/v1/analytics/invocations?gameId=${fx.gameId}&env=prod&functionId=outcomes&outcome=${outcome}`,
            { token: fx.admin },
          )
        ).body.total
      expect([await list('success'), await list('failure')]).toEqual([2, 3])
    })
  })

  // Last: its users are new in prod, which the DAU tests above count.
  describe('policies per environment', () => {
    test('environments interleaved in one batch each keep their own sampling rate and PII policy', async () => {
      const put = (env: string, settings: Record<string, unknown>) =>
        fx.a.req('PUT', `/api/games/${fx.gameId}/environments/${env}/settings`, {
          token: fx.admin,
          body: settings,
        })
      expect((await put('staging', { samplingRate: 0 })).status).toBe(200)
      expect((await put('dev', { pii: { email: 'allow' } })).status).toBe(200)
      const envs = ['prod', 'staging', 'dev', 'staging', 'prod', 'dev']
      const list = envs.map((env, i) => ev('mix', { env, uid: `mix-${i}`, email: `p${i}@example.com` }))
      expect((await signed(fx.a, '/api/ingest/events', list)).status).toBe(200)
      const rows = await fx.a.db.all<{ env: string; props: string }>(
        "SELECT env, props FROM ingest_events WHERE event = 'mix' ORDER BY id",
      )
      // Staging samples nothing; prod masks email (the default); dev keeps it.
      expect(rows.map((r) => [r.env, JSON.parse(r.props).email])).toEqual([
        ['prod', 'p***@example.com'],
        ['dev', 'p2@example.com'],
        ['prod', 'p***@example.com'],
        ['dev', 'p5@example.com'],
      ])
      expect((await put('staging', { samplingRate: 1 })).status).toBe(200)
      expect((await put('dev', { pii: { email: 'mask' } })).status).toBe(200)
    })
  })
})
