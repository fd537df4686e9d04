import { beforeAll, describe, expect, test } from 'bun:test'
import { gzipSync } from 'node:zlib'
import { forEachEngine } from '../../../test/helpers'
import { OUTSIDE_WINDOW, signed } from '../testing'
import { ingestSuite } from './ingest-fixture'

// The /v1 routes: batches under an API key (/v1/batch) and OTLP logs (/v1/logs).
forEachEngine((engine) => {
  const fx = ingestSuite(engine)
  const { count } = fx

  describe('/v1/batch with an API key', () => {
    let key: string
    beforeAll(async () => {
      const r = await fx.a.req('POST', '/api/api-keys', {
        token: fx.admin,
        body: { name: 'sdk', gameId: fx.gameId, environment: 'staging' },
      })
      expect(r.status).toBe(201)
      key = r.body.key
    })
    const batch = (raw: BodyInit, headers: Record<string, string> = {}) =>
      fx.a.req('POST', '/v1/batch', {
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
        // Past JavaScript's last date, and past the event window (max_event_future_s).
        { event_id: 'e6', reason: expect.stringMatching(OUTSIDE_WINDOW) },
        { event_id: 'e7', reason: expect.stringMatching(OUTSIDE_WINDOW) },
      ])
      expect(
        await count("SELECT COUNT(*) AS n FROM ingest_events WHERE game_id = ? AND env = 'staging'", [
          fx.gameId,
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
      const r = await fx.a.req('POST', '/v1/batch', { raw: '[]', headers: { 'x-api-key': 'lok_nope' } })
      expect([r.status, r.body.error]).toEqual([401, 'invalid_api_key'])
      const r2 = await fx.a.req('POST', '/v1/batch', { raw: '[]' })
      expect([r2.status, r2.body.error]).toEqual([401, 'missing_signature_headers'])
      // The key is judged before the body is read: an oversized upload under a bad key is a 401,
      // not a 413 (the server did not take the 2 MB in).
      const big = await fx.a.req('POST', '/v1/batch', {
        raw: `[${'"x",'.repeat(500_000)}"x"]`,
        headers: { 'x-api-key': 'lok_nope' },
      })
      expect([big.status, big.body.error]).toEqual([401, 'invalid_api_key'])
    })

    test('sampling rate 0 keeps nothing (still accepted); the per-key rate limit answers 429 rate_limit_exceeded', async () => {
      const put = (settings: Record<string, unknown>) =>
        fx.a.req('PUT', `/api/games/${fx.gameId}/environments/staging/settings`, {
          token: fx.admin,
          body: settings,
        })
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
        fx.a.req('PUT', `/api/games/${fx.gameId}/environments/staging/settings`, {
          token: fx.admin,
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
      const r = await fx.a.req('POST', '/v1/logs', {
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
      const bad = await fx.a.req('POST', '/v1/logs', { raw: '{}', headers: { 'x-api-key': 'lok_nope' } })
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
                { key: 'game_id', value: { stringValue: fx.gameId } },
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
      const r = await signed(fx.a, '/v1/logs', body)
      expect(r.status).toBe(200)
      expect(r.body).toEqual({
        partialSuccess: { rejectedLogRecords: 1, errorMessage: '2: event_name: required' },
      })
      const online = await fx.a.req(
        'GET',
        `/api/v1/analytics/warehouse/online?gameId=${fx.gameId}&env=dev&minutes=2`,
        { token: fx.admin },
      )
      expect(online.body.points.at(-1).online).toBe(2)
      const dau = await fx.a.req(
        'GET',
        `/api/v1/analytics/warehouse/dau?gameId=${fx.gameId}&env=dev&days=1`,
        {
          token: fx.admin,
        },
      )
      expect(dau.body.points[0].dau).toBe(1)
    })
  })
})
