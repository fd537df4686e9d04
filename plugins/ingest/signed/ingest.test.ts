import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { gzipSync } from 'node:zlib'
import { LiveopsClient } from '../../../sdk/client'
import { signRequest } from '../../../sdk/sign'
import { type TestApp, forEachEngine } from '../../../test/helpers'
import { SECRET, ingestApp, signed } from '../testing'

forEachEngine((engine) => {
  let a: TestApp
  let admin: string
  let gameId: string
  const ev = (event: string, extra: Record<string, unknown> = {}) => ({
    event,
    ts: String(Date.now()),
    game_id: gameId,
    env: 'prod',
    ...extra,
  })
  const count = async (sql: string, params: (string | number)[] = []) =>
    Number((await a.db.get<{ n: number }>(sql, params))?.n ?? 0)

  beforeAll(async () => {
    ;({ a, admin, gameId } = await ingestApp(engine))
  })
  afterAll(() => a.stop())

  describe('signed ingestion', () => {
    test('the SDK batches, signs and delivers; DAU and new users follow login and session_start', async () => {
      const sent: number[] = []
      const client = new LiveopsClient({
        endpoint: 'http://localhost',
        gameId,
        env: 'prod',
        secret: SECRET,
        batchSize: 3,
        flushIntervalMs: 0,
        flushOnExit: false,
        fetch: async (url, init) => {
          sent.push(JSON.parse(String(init.body)).length)
          return a.app.handle(new Request(url, init))
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
      const r = await a.req('GET', `/api/v1/analytics/warehouse/dau?gameId=${gameId}&env=prod&days=1`, {
        token: admin,
      })
      expect(r.status).toBe(200)
      expect(r.body.points).toEqual([
        { date: new Date().toISOString().slice(0, 10), gameId, env: 'prod', dau: 3, newUsers: 3 },
      ])
      expect(
        await count(
          "SELECT COUNT(*) AS n FROM ingest_events WHERE game_id = ? AND event = 'level_up' AND level = '3'",
          [gameId],
        ),
      ).toBe(1)
    })

    test('missing headers, bad timestamp, skew and bad signature answer 401 with their codes', async () => {
      const body = JSON.stringify([ev('x')])
      const r1 = await a.req('POST', '/api/ingest/events', { raw: body, headers: { 'x-timestamp': '1' } })
      expect(r1.status).toBe(401)
      expect(r1.body).toMatchObject({ error: 'missing_signature_headers', path: '/api/ingest/events' })
      expect(r1.body.details.missing).toEqual(['X-Nonce', 'X-Signature'])
      const sig = await signRequest(SECRET, body)
      const r2 = await a.req('POST', '/api/ingest/events', {
        raw: body,
        headers: { ...sig, 'X-Timestamp': 'soon' },
      })
      expect([r2.status, r2.body.error]).toEqual([401, 'invalid_timestamp'])
      const r3 = await signed(a, '/api/ingest/events', [ev('x')], {
        timestamp: Math.floor(Date.now() / 1000) - 301,
      })
      expect([r3.status, r3.body.error]).toEqual([401, 'timestamp_skew'])
      const r4 = await signed(a, '/api/ingest/events', [ev('x')], { secret: 'wrong' })
      expect([r4.status, r4.body.error]).toEqual([401, 'invalid_signature'])
      // A body changed after signing fails too.
      const r5 = await a.req('POST', '/api/ingest/events', {
        raw: body.replace('"x"', '"y"'),
        headers: { ...sig },
      })
      expect([r5.status, r5.body.error]).toEqual([401, 'invalid_signature'])
    })

    test('a nonce seen in the last 15 minutes is a replay: 429 duplicate_nonce', async () => {
      const first = await signed(a, '/api/ingest/events', [ev('x')], { nonce: 'nonce-1' })
      expect(first.status).toBe(200)
      const again = await signed(a, '/api/ingest/events', [ev('x')], { nonce: 'nonce-1' })
      expect([again.status, again.body.error]).toEqual([429, 'duplicate_nonce'])
    })

    test('over 10 MB answers 413 before the signature is checked', async () => {
      const big = 'x'.repeat(10 * 1024 * 1024 + 1)
      const r = await a.req('POST', '/api/ingest/events', {
        raw: big,
        headers: { 'x-timestamp': '1', 'x-nonce': 'n', 'x-signature': 'bad' },
      })
      expect([r.status, r.body.error]).toEqual([413, 'body_too_large'])
    })

    test('over a real socket a body without a length is bounded too, and a signed chunked batch is read', async () => {
      const base = a.listen()
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
        { ts: String(Date.now()), game_id: gameId, env: 'prod' },
        { ...ev('e'), game_id: 42, env: ['prod'] },
        'not an object',
        { event: 'in_attrs', attrs: { ts: String(Date.now()), game_id: gameId, env: 'prod' } },
        { ...ev('bad ts'), ts: 'yesterday' },
        // Past JavaScript's last date: stored, it stopped every game's analytics consumers.
        { ...ev('too late'), ts: '8640000000000001' },
        { ...ev('year 10000'), ts: '253402300800000' },
        { ...ev('last ms of 9999'), ts: '253402300799999' },
      ]
      const r = await signed(a, '/api/ingest/events', batch)
      expect(r.status).toBe(400)
      expect(r.body.error).toBe('invalid_events')
      expect(r.body.details.errors).toEqual([
        { index: 1, field: 'ts', reason: 'missing: ts must be a string of epoch milliseconds' },
        { index: 2, field: 'event', reason: 'required' },
        { index: 3, field: 'game_id', reason: 'must be a string' },
        { index: 3, field: 'env', reason: 'must be a string' },
        { index: 4, field: 'event', reason: 'must be a JSON object' },
        { index: 6, field: 'ts', reason: 'must be a string of epoch milliseconds' },
        {
          index: 7,
          field: 'ts',
          reason: 'must be epoch milliseconds no later than 9999-12-31T23:59:59.999Z',
        },
        {
          index: 8,
          field: 'ts',
          reason: 'must be epoch milliseconds no later than 9999-12-31T23:59:59.999Z',
        },
      ])
      expect(await count('SELECT COUNT(*) AS n FROM ingest_events')).toBe(before)
    })

    test('malformed JSON and a body that is not an array answer 400 invalid_payload', async () => {
      const r1 = await signed(a, '/api/ingest/events', '[{"event":')
      expect([r1.status, r1.body.error]).toEqual([400, 'invalid_payload'])
      const r2 = await signed(a, '/api/ingest/events', { event: 'x' })
      expect([r2.status, r2.body.error]).toEqual([400, 'invalid_payload'])
    })

    test('unknown game or environment: 400 naming it', async () => {
      const r1 = await signed(a, '/api/ingest/events', [ev('x'), { ...ev('x'), game_id: 'no-such-game' }])
      expect(r1.status).toBe(400)
      expect(r1.body).toMatchObject({
        error: 'unknown_game',
        details: { field: '[1].game_id', gameId: 'no-such-game' },
      })
      expect(r1.body.message).toContain("'no-such-game'")
      const r2 = await signed(a, '/api/ingest/events', [{ ...ev('x'), env: 'qa' }])
      expect(r2.status).toBe(400)
      expect(r2.body).toMatchObject({
        error: 'unknown_environment',
        details: { field: '[0].env', env: 'qa' },
      })
    })
  })

  describe('payments and revenue', () => {
    test('payments need order_id, status and amount_cents > 0', async () => {
      const r = await signed(a, '/api/ingest/payments', [
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
          await signed(a, '/api/ingest/payments', [
            p('o-1', 'success', 499),
            p('o-1', 'success', 499),
            p('o-2', 'success', 1000),
          ])
        ).status,
      ).toBe(200)
      expect(
        (
          await signed(a, '/api/ingest/payments', [
            p('o-1', 'success', 499),
            p('o-2', 'refunded', 1000),
            p('o-3', 'failed', 50),
          ])
        ).status,
      ).toBe(200)
      const r = await a.req('GET', `/api/v1/analytics/warehouse/revenue?gameId=${gameId}&days=2`, {
        token: admin,
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
      expect(await count('SELECT COUNT(*) AS n FROM ingest_payments WHERE game_id = ?', [gameId])).toBe(4)
    })
  })

  describe('/v1/batch with an API key', () => {
    let key: string
    beforeAll(async () => {
      const r = await a.req('POST', '/api/api-keys', {
        token: admin,
        body: { name: 'sdk', gameId, environment: 'staging' },
      })
      expect(r.status).toBe(201)
      key = r.body.key
    })
    const batch = (raw: BodyInit, headers: Record<string, string> = {}) =>
      a.req('POST', '/v1/batch', {
        raw,
        headers: { 'x-api-key': key, 'content-type': 'application/json', ...headers },
      })

    test('a JSON array: good items accepted, bad ones rejected with their event_id and reason', async () => {
      const r = await batch(
        JSON.stringify([
          { event_id: 'e1', event_name: 'login', user_id: 'b1', ts_client: Date.now() },
          { event_id: 'e2', event_type: 'heartbeat', device_id: 'd9' },
          { event_id: 'e3' },
          { event_id: 'e4', event_name: 'x', environment: 'prod' },
          { event_id: 'e5', event_name: 'x', ts_client: 'not a time' },
          { event_id: 'e6', event_name: 'x', ts: '8640000000000001' },
          { event_id: 'e7', event_name: 'x', ts_client: '+275760-09-13T00:00:00.000Z' },
        ]),
      )
      expect(r.status).toBe(200)
      expect(r.body.accepted).toEqual(['e1', 'e2'])
      expect(r.body.rejected).toEqual([
        { event_id: 'e3', reason: 'event_name: required' },
        { event_id: 'e4', reason: "environment: must be the API key's environment 'staging'" },
        { event_id: 'e5', reason: 'ts_client: must be epoch milliseconds or an ISO 8601 date-time' },
        {
          event_id: 'e6',
          reason: 'ts_client: must be epoch milliseconds no later than 9999-12-31T23:59:59.999Z',
        },
        {
          event_id: 'e7',
          reason: 'ts_client: must be epoch milliseconds no later than 9999-12-31T23:59:59.999Z',
        },
      ])
      expect(
        await count("SELECT COUNT(*) AS n FROM ingest_events WHERE game_id = ? AND env = 'staging'", [
          gameId,
        ]),
      ).toBe(2)
    })

    test('NDJSON, gzip, and a line that does not parse', async () => {
      const nd = `${JSON.stringify({ event_id: 'n1', event_name: 'tap' })}\n{oops\n${JSON.stringify({ event_id: 'n2', event_name: 'tap' })}\n`
      const r = await batch(gzipSync(nd), {
        'content-encoding': 'gzip',
        'content-type': 'application/x-ndjson',
      })
      expect(r.status).toBe(200)
      expect(r.body).toEqual({
        accepted: ['n1', 'n2'],
        rejected: [{ event_id: '1', reason: 'invalid JSON' }],
      })
      const bad = await batch(new Uint8Array([1, 2, 3]), { 'content-encoding': 'gzip' })
      expect([bad.status, bad.body.error]).toEqual([400, 'invalid_payload'])
    })

    test('limits: over 500 events 413, an event over 64 KB rejected, a body over 1 MB 413', async () => {
      const many = JSON.stringify(
        Array.from({ length: 501 }, (_, i) => ({ event_id: `m${i}`, event_name: 'x' })),
      )
      expect((await batch(many)).status).toBe(413)
      const r = await batch(
        JSON.stringify([{ event_id: 'big', event_name: 'x', blob: 'y'.repeat(65 * 1024) }]),
      )
      expect(r.body.rejected).toEqual([{ event_id: 'big', reason: 'event_too_large' }])
      const huge = await batch(
        JSON.stringify([{ event_id: 'h', event_name: 'x', blob: 'y'.repeat(1024 * 1024) }]),
      )
      expect([huge.status, huge.body.error]).toEqual([413, 'body_too_large'])
    })

    test('a bad key answers 401; no key and no signature 401', async () => {
      const r = await a.req('POST', '/v1/batch', { raw: '[]', headers: { 'x-api-key': 'lok_nope' } })
      expect([r.status, r.body.error]).toEqual([401, 'invalid_api_key'])
      const r2 = await a.req('POST', '/v1/batch', { raw: '[]' })
      expect([r2.status, r2.body.error]).toEqual([401, 'missing_signature_headers'])
      // The key is judged before the body is read: an oversized upload under a bad key is a 401,
      // not a 413 (the server did not take the 2 MB in).
      const big = await a.req('POST', '/v1/batch', {
        raw: `[${'"x",'.repeat(500_000)}"x"]`,
        headers: { 'x-api-key': 'lok_nope' },
      })
      expect([big.status, big.body.error]).toEqual([401, 'invalid_api_key'])
    })

    test('sampling rate 0 keeps nothing (still accepted); the per-key rate limit answers 429 rate_limit_exceeded', async () => {
      const put = (settings: Record<string, unknown>) =>
        a.req('PUT', `/api/games/${gameId}/environments/staging/settings`, { token: admin, body: settings })
      expect((await put({ samplingRate: 0 })).status).toBe(200)
      const before = await count("SELECT COUNT(*) AS n FROM ingest_events WHERE env = 'staging'")
      const r = await batch(JSON.stringify([{ event_id: 's1', event_name: 'tap', user_id: 'x' }]))
      expect(r.body.accepted).toEqual(['s1'])
      expect(await count("SELECT COUNT(*) AS n FROM ingest_events WHERE env = 'staging'")).toBe(before)
      expect((await put({ samplingRate: 1, rateLimit: { requestsPerMinutePerKey: 1 } })).status).toBe(200)
      expect((await batch('[]')).status).toBe(200)
      const limited = await batch('[]')
      expect(limited.status).toBe(429)
      expect(limited.body).toMatchObject({ error: 'rate_limit_exceeded', details: { limit: 1 } })
      expect(Number(limited.headers.get('retry-after'))).toBeGreaterThan(0)
      expect((await put({ rateLimit: { requestsPerMinutePerKey: 0 } })).status).toBe(200)
    })

    test('a burst past the per-second limit of the key answers 429 rate_limit_exceeded (spec 1 section 8)', async () => {
      const put = (rateLimit: Record<string, number>) =>
        a.req('PUT', `/api/games/${gameId}/environments/staging/settings`, {
          token: admin,
          body: { rateLimit },
        })
      expect((await put({ requestsPerMinutePerKey: 1000, burstPerSecondPerKey: 2 })).status).toBe(200)
      // Five at once span at most two one-second windows, so at most four pass.
      const rs = await Promise.all(Array.from({ length: 5 }, () => batch('[]')))
      const limited = rs.filter((r) => r.status === 429)
      expect(limited.length).toBeGreaterThan(0)
      expect(limited[0].body).toMatchObject({
        error: 'rate_limit_exceeded',
        details: { limit: 2, retry_after: 1 },
      })
      expect(rs.filter((r) => r.status === 200).length).toBeGreaterThanOrEqual(2)
      expect((await put({ requestsPerMinutePerKey: 0, burstPerSecondPerKey: 100 })).status).toBe(200)
    })

    test('a body that is neither a JSON array nor NDJSON answers 400 invalid_payload', async () => {
      for (const raw of ['garbage', '{oops\nnot json either\n', '[{"event_id": 1,']) {
        const r = await batch(raw)
        expect([raw, r.status, r.body.error]).toEqual([raw, 400, 'invalid_payload'])
      }
    })

    test('the 64 KB event limit counts UTF-8 bytes, not characters', async () => {
      // 40,000 characters, 80,000 bytes.
      const wide = { event_id: 'wide', event_name: 'x', blob: 'é'.repeat(40_000) }
      const r = await batch(JSON.stringify([wide]))
      expect(r.body.rejected).toEqual([{ event_id: 'wide', reason: 'event_too_large' }])
      const nd = await batch(
        `${JSON.stringify(wide)}\n${JSON.stringify({ event_id: 'ok', event_name: 'x' })}\n`,
      )
      expect(nd.body).toEqual({ accepted: ['ok'], rejected: [{ event_id: '0', reason: 'event_too_large' }] })
    })

    test('OTLP logs with the API key land in its environment', async () => {
      const before = await count(
        "SELECT COUNT(*) AS n FROM ingest_events WHERE env = 'staging' AND event = 'otlp_keyed'",
      )
      const r = await a.req('POST', '/v1/logs', {
        raw: JSON.stringify({
          resourceLogs: [
            {
              scopeLogs: [
                {
                  logRecords: [
                    {
                      timeUnixNano: String(Date.now() * 1e6),
                      body: { stringValue: 'otlp_keyed' },
                      attributes: [{ key: 'user.id', value: { stringValue: 'k1' } }],
                    },
                  ],
                },
              ],
            },
          ],
        }),
        headers: { 'x-api-key': key, 'content-type': 'application/json' },
      })
      expect(r.status).toBe(200)
      expect(
        await count("SELECT COUNT(*) AS n FROM ingest_events WHERE env = 'staging' AND event = 'otlp_keyed'"),
      ).toBe(before + 1)
      const bad = await a.req('POST', '/v1/logs', { raw: '{}', headers: { 'x-api-key': 'lok_nope' } })
      expect([bad.status, bad.body.error]).toEqual([401, 'invalid_api_key'])
    })
  })

  describe('OTLP logs', () => {
    test('log records become events; session.start counts as session_start', async () => {
      const now = Date.now()
      const body = {
        resourceLogs: [
          {
            resource: {
              attributes: [
                { key: 'game_id', value: { stringValue: gameId } },
                { key: 'deployment.environment', value: { stringValue: 'dev' } },
              ],
            },
            scopeLogs: [
              {
                logRecords: [
                  {
                    timeUnixNano: String(now * 1e6),
                    body: { stringValue: 'session.start' },
                    attributes: [
                      { key: 'user.id', value: { stringValue: 'otel-1' } },
                      { key: 'session.id', value: { stringValue: 'S' } },
                    ],
                  },
                  {
                    timeUnixNano: String(now * 1e6),
                    attributes: [
                      { key: 'event.name', value: { stringValue: 'heartbeat' } },
                      { key: 'user_id', value: { stringValue: 'otel-2' } },
                    ],
                  },
                  { attributes: [] },
                ],
              },
            ],
          },
        ],
      }
      const r = await signed(a, '/v1/logs', body)
      expect(r.status).toBe(200)
      expect(r.body).toEqual({
        partialSuccess: { rejectedLogRecords: 1, errorMessage: '2: event_name: required' },
      })
      const online = await a.req(
        'GET',
        `/api/v1/analytics/warehouse/online?gameId=${gameId}&env=dev&minutes=2`,
        { token: admin },
      )
      expect(online.body.points.at(-1).online).toBe(2)
      const dau = await a.req('GET', `/api/v1/analytics/warehouse/dau?gameId=${gameId}&env=dev&days=1`, {
        token: admin,
      })
      expect(dau.body.points[0].dau).toBe(1)
    })
  })

  describe('limits and invocations on signed ingestion', () => {
    test('the per-IP limit of an environment answers 429 rate_limit_exceeded on signed requests', async () => {
      const put = (rateLimit: Record<string, number>) =>
        a.req('PUT', `/api/games/${gameId}/environments/dev/settings`, { token: admin, body: { rateLimit } })
      expect((await put({ requestsPerMinutePerIp: 1 })).status).toBe(200)
      try {
        expect((await signed(a, '/api/ingest/events', [{ ...ev('ip_1'), env: 'dev' }])).status).toBe(200)
        const r = await signed(a, '/api/ingest/events', [{ ...ev('ip_2'), env: 'dev' }])
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
      const r = await signed(a, '/api/ingest/events', [
        call('success'),
        call(),
        call('failure'),
        call('error'),
        call('timeout'),
      ])
      expect(r.status).toBe(200)
      const list = async (outcome: string) =>
        (
          await a.req(
            'GET',
            `/api/v1/analytics/invocations?gameId=${gameId}&env=prod&functionId=outcomes&outcome=${outcome}`,
            { token: admin },
          )
        ).body.total
      expect([await list('success'), await list('failure')]).toEqual([2, 3])
    })
  })

  // Last: its users are new in prod, which the DAU tests above count.
  describe('policies per environment', () => {
    test('environments interleaved in one batch each keep their own sampling rate and PII policy', async () => {
      const put = (env: string, settings: Record<string, unknown>) =>
        a.req('PUT', `/api/games/${gameId}/environments/${env}/settings`, { token: admin, body: settings })
      expect((await put('staging', { samplingRate: 0 })).status).toBe(200)
      expect((await put('dev', { pii: { email: 'allow' } })).status).toBe(200)
      const envs = ['prod', 'staging', 'dev', 'staging', 'prod', 'dev']
      const list = envs.map((env, i) => ev('mix', { env, uid: `mix-${i}`, email: `p${i}@example.com` }))
      expect((await signed(a, '/api/ingest/events', list)).status).toBe(200)
      const rows = await a.db.all<{ env: string; props: string }>(
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
