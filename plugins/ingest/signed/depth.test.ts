import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { gzipSync } from 'node:zlib'
import { signRequest } from '../../../sdk/sign'
import { type TestApp, forEachEngine } from '../../../test/helpers'
import { RpcStatus, SIGNALS } from '../otlp/proto'
import { SECRET, ingestApp, signed } from '../testing'

/*
 * Audit M3: ingestion reads its own bytes, so core's 64-level JSON depth check never ran for it;
 * a deep event was stored, and 100,000 nested arrays answered 500 (a stack overflow in the event
 * size check). Every ingestion body now keeps the bound docs/security.md ("Input bounds") promises.
 */

const TOO_DEEP = { error: 'invalid_payload', message: 'body: nested deeper than 64 levels' }
/** `levels` objects nested inside one another: `{"a":{"a":...1}}`. */
const nest = (levels: number) => `${'{"a":'.repeat(levels)}1${'}'.repeat(levels)}`
/** 100,000 nested arrays: the body that overflowed the stack. */
const ARRAYS = `${'['.repeat(100_000)}${']'.repeat(100_000)}`

forEachEngine((engine) => {
  let a: TestApp
  let admin: string
  let gameId: string
  let key: string
  const stored = async (event?: string) =>
    Number(
      (
        await a.db.get<{ n: number }>(
          `SELECT COUNT(*) AS n FROM ingest_events WHERE game_id = ?${event ? ' AND event = ?' : ''}`,
          event ? [gameId, event] : [gameId],
        )
      )?.n ?? 0,
    )
  /**
   * A JSON array of one event whose attrs nest to `depth` levels in all (the array is level 1,
   * the event 2, attrs from 3).
   */
  const signedBody = (event: string, depth: number, extra = '') =>
    `[{"event":"${event}","ts":"${Date.now()}","game_id":"${gameId}","env":"prod"${extra},"attrs":${nest(depth - 2)}}]`
  const batchItem = (event: string, attrsDepth: number) =>
    `{"event_id":"${event}","event_name":"${event}","user_id":"d1","ts_client":${Date.now()},"attrs":${nest(attrsDepth)}}`
  const batch = (raw: BodyInit, headers: Record<string, string> = {}) =>
    a.req('POST', '/v1/batch', {
      raw,
      headers: { 'x-api-key': key, 'content-type': 'application/json', ...headers },
    })

  beforeAll(async () => {
    ;({ a, admin, gameId } = await ingestApp(engine))
    const r = await a.req('POST', '/api/api-keys', {
      token: admin,
      body: { name: 'sdk', gameId, environment: 'staging' },
    })
    expect(r.status).toBe(201)
    key = r.body.key
  })
  afterAll(() => a.stop())

  describe('/v1/batch with an API key', () => {
    test('a JSON array 64 levels deep is stored; 65 levels and 100,000 nested arrays are 400, nothing stored', async () => {
      const ok = await batch(`[${batchItem('deep_64', 62)}]`)
      expect([ok.status, ok.body]).toEqual([200, { accepted: ['deep_64'], rejected: [] }])
      expect(await stored('deep_64')).toBe(1)
      const before = await stored()
      // 65 levels, and the audit's repro: attrs 65 objects deep under the event (67 in all).
      for (const raw of [`[${batchItem('deep_65', 63)}]`, `[${batchItem('deep_67', 65)}]`, ARRAYS]) {
        const r = await batch(raw)
        expect(r.status, raw.slice(0, 60)).toBe(400)
        expect(r.body).toMatchObject({ ...TOO_DEEP, path: '/v1/batch' })
      }
      expect(await stored()).toBe(before)
    })

    test('NDJSON, gzip too: a line past 64 levels refuses the whole body', async () => {
      // A line's event is level 1, so its attrs may nest 63 levels.
      const fine = batchItem('nd_64', 63)
      const ok = await batch(gzipSync(`${fine}\n`), {
        'content-encoding': 'gzip',
        'content-type': 'application/x-ndjson',
      })
      expect([ok.status, ok.body.accepted]).toEqual([200, ['nd_64']])
      const before = await stored()
      // A line over 64 KB is rejected unparsed (event_too_large): 30,000 arrays fit in one.
      const arrays = `${'['.repeat(30_000)}${']'.repeat(30_000)}`
      for (const deep of [batchItem('nd_65', 64), arrays]) {
        const r = await batch(gzipSync(`${batchItem('nd_ok', 1)}\n${deep}\n`), {
          'content-encoding': 'gzip',
          'content-type': 'application/x-ndjson',
        })
        expect(r.status).toBe(400)
        expect(r.body).toMatchObject(TOO_DEEP)
      }
      expect(await stored()).toBe(before)
      expect(await stored('nd_ok')).toBe(0)
    })

    test('OTLP/JSON logs past 64 levels are 400 too', async () => {
      const record = (depth: number) =>
        `{"resourceLogs":[{"scopeLogs":[{"logRecords":[{"timeUnixNano":"${Date.now() * 1e6}","body":{"stringValue":"otlp_deep"},"attributes":[{"key":"x","value":${nest(depth - 9)}}]}]}]}]}`
      const otlp = (raw: string) =>
        a.req('POST', '/v1/logs', { raw, headers: { 'x-api-key': key, 'content-type': 'application/json' } })
      const ok = await otlp(record(64))
      expect(ok.status).toBe(200)
      const before = await stored()
      for (const raw of [record(65), ARRAYS]) {
        const r = await otlp(raw)
        expect(r.status).toBe(400)
        expect(r.body).toMatchObject({ ...TOO_DEEP, path: '/v1/logs' })
      }
      expect(await stored()).toBe(before)
    })

    test('OTLP/protobuf logs past 64 levels are 400 as their JSON is (the decoder alone allows about 100)', async () => {
      // An attribute's value: `levels` key-value lists, one in another (each is four JSON levels:
      // the AnyValue, its kvlistValue, the values array, the pair), around a string.
      const nested = (levels: number): Record<string, unknown> =>
        levels === 0
          ? { stringValue: 'leaf' }
          : { kvlistValue: { values: [{ key: 'k', value: nested(levels - 1) }] } }
      const body = (levels: number, event: string) =>
        SIGNALS.logs.request
          .encode(
            SIGNALS.logs.request.fromObject({
              resourceLogs: [
                {
                  scopeLogs: [
                    {
                      logRecords: [
                        {
                          timeUnixNano: String(Date.now() * 1e6),
                          body: { stringValue: event },
                          attributes: [{ key: 'x', value: nested(levels) }],
                        },
                      ],
                    },
                  ],
                },
              ],
            }),
          )
          .finish()
      const proto = (raw: Uint8Array) =>
        a.app.handle(
          new Request('http://localhost/v1/logs', {
            method: 'POST',
            body: raw as unknown as BodyInit,
            headers: { 'x-api-key': key, 'content-type': 'application/x-protobuf' },
          }),
        )
      // 13 lists: the leaf's AnyValue at level 62 of the request's JSON shape; 14: level 66.
      expect((await proto(body(13, 'otlp_pb_ok'))).status).toBe(200)
      const before = await stored()
      const r = await proto(body(14, 'otlp_pb_deep'))
      expect(r.status).toBe(400)
      const status = RpcStatus.toObject(RpcStatus.decode(new Uint8Array(await r.arrayBuffer())))
      expect(status.message).toBe('invalid_payload: body: nested deeper than 64 levels')
      expect(await stored()).toBe(before)
    })
  })

  test('the server-side writes (Elysia parses them, so core checks them) refuse the same bodies', async () => {
    const before = await stored()
    for (const path of ['/api/v1/analytics/ingest', '/api/v1/analytics/payments/ingest']) {
      for (const raw of [signedBody('server_65', 65), ARRAYS]) {
        const r = await a.req('POST', path, {
          token: admin,
          raw,
          headers: { 'content-type': 'application/json' },
        })
        expect([path, r.status, r.body.message]).toEqual([path, 400, TOO_DEEP.message])
      }
    }
    expect(await stored()).toBe(before)
  })

  describe('signed ingestion', () => {
    test('events and payments 64 levels deep are stored; 65 levels and 100,000 nested arrays are 400, nothing stored', async () => {
      const payment = (n: string) => `,"order_id":"${n}","status":"success","amount_cents":100`
      // A payments route takes only payment events.
      for (const [path, name, extra] of [
        ['/api/ingest/events', 'signed_64', ''],
        ['/api/ingest/payments', 'payment', payment('o64')],
      ]) {
        const ok = await signed(a, path, signedBody(name, 64, extra))
        expect([path, ok.status]).toEqual([path, 200])
      }
      expect([await stored('signed_64'), await stored('payment')]).toEqual([1, 1])
      const before = await stored()
      for (const [path, raw] of [
        ['/api/ingest/events', signedBody('signed_65', 65)],
        ['/api/ingest/events', ARRAYS],
        ['/api/ingest/payments', signedBody('signed_65', 65, payment('o65'))],
        ['/api/ingest/payments', ARRAYS],
      ]) {
        const r = await signed(a, path, raw)
        expect([path, raw.length, r.status]).toEqual([path, raw.length, 400])
        expect(r.body).toMatchObject({ ...TOO_DEEP, path })
      }
      expect(await stored()).toBe(before)
    })

    test("over a real socket (Bun's native route) too", async () => {
      const base = a.listen()
      const before = await stored()
      for (const raw of [signedBody('socket_65', 65), ARRAYS]) {
        const r = await fetch(`${base}/api/ingest/events`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', ...(await signRequest(SECRET, raw)) },
          body: raw,
        })
        expect(r.status).toBe(400)
        expect(await r.json()).toMatchObject({ ...TOO_DEEP, path: '/api/ingest/events' })
      }
      expect(await stored()).toBe(before)
    })
  })
})
