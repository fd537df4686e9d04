import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import * as grpc from '@grpc/grpc-js'
import { SpanKind, SpanStatusCode } from '@opentelemetry/api'
import { ExportResultCode } from '@opentelemetry/core'
import { ProtobufLogsSerializer, ProtobufTraceSerializer } from '@opentelemetry/otlp-transformer'
import { signRequest } from '../../../sdk/sign'
import { type TestApp, forEachEngine, makeApp } from '../../../test/helpers'
import { SECRET, game } from '../testing'
import { type Transport, freePort, logExporter, logRecords, send, spans, traceExporter } from './exporters'
import { RpcStatus } from './proto'

const TRANSPORTS: Transport[] = ['http/protobuf', 'http/json', 'grpc']
/** The body limit of these apps (`batch_max_body_kb`). */
const LIMIT_KB = 64

/** A raw unary call to a collector service: the bytes as given, the status as answered. */
function rawCall(port: number, service: string, body: Uint8Array, metadata: Record<string, string>) {
  const client = new grpc.Client(`127.0.0.1:${port}`, grpc.credentials.createInsecure())
  const md = new grpc.Metadata()
  for (const [k, v] of Object.entries(metadata)) md.set(k, v)
  return new Promise<{ code: number; details: string; bytes?: Buffer }>((resolve) =>
    client.makeUnaryRequest(
      `/${service}/Export`,
      (b: Buffer) => b,
      (b: Buffer) => b,
      Buffer.from(body),
      md,
      (err, bytes) => {
        client.close()
        resolve(err ? { code: err.code, details: err.details } : { code: 0, details: '', bytes })
      },
    ),
  )
}
const LOGS = 'opentelemetry.proto.collector.logs.v1.LogsService'
const TRACES = 'opentelemetry.proto.collector.trace.v1.TraceService'

forEachEngine((engine) => {
  let a: TestApp
  let admin: string
  let gameId: string
  let key: string
  let grpcPort: number
  let target: { http: string; grpc: string }

  beforeAll(async () => {
    grpcPort = await freePort()
    a = await makeApp(engine, {
      plugins: {
        games: {},
        ingest: {
          signing_secret: SECRET,
          purge_interval_minutes: 0,
          batch_max_body_kb: LIMIT_KB,
          otlp: { grpc: { enabled: true, host: '127.0.0.1', port: grpcPort } },
        },
        analytics: {},
      },
      config: { telemetry: { prometheus: { enabled: true, path: '/metrics/prometheus' } } },
    })
    admin = await a.token('admin')
    const g = await a.req('POST', '/api/games', { token: admin, body: game })
    gameId = g.body.id
    const k = await a.req('POST', '/api/api-keys', {
      token: admin,
      body: { name: 'otel', gameId, environment: 'staging' },
    })
    expect(k.status).toBe(201)
    key = k.body.key
    target = { http: a.listen(), grpc: `http://127.0.0.1:${grpcPort}` }
  })
  afterAll(() => a.stop())

  const events = (event: string) =>
    a.req('GET', `/api/v1/analytics/behavior/events?gameId=${gameId}&env=staging&event=${event}`, {
      token: admin,
    })
  const invocations = (functionId: string) =>
    a.req('GET', `/api/v1/analytics/invocations?gameId=${gameId}&env=staging&functionId=${functionId}`, {
      token: admin,
    })

  for (const transport of TRANSPORTS) {
    const tag = transport.replace('/', '_')
    describe(transport, () => {
      test('log records sent by the OpenTelemetry exporter arrive as events', async () => {
        const records = await logRecords({ 'service.name': 'arena' }, [
          { body: `match_end_${tag}`, attributes: { 'user.id': `u-${tag}`, score: 42 } },
          { eventName: `lobby_join_${tag}`, body: 'joined the lobby', attributes: { 'session.id': 's1' } },
        ])
        const r = await send(logExporter(transport, target, { headers: { 'x-api-key': key } }), records)
        expect(r.error).toBeUndefined()
        expect(r.code).toBe(ExportResultCode.SUCCESS)
        const ended = await events(`match_end_${tag}`)
        expect(ended.status).toBe(200)
        expect(ended.body.total).toBe(1)
        expect(ended.body.items[0]).toMatchObject({
          event: `match_end_${tag}`,
          userId: `u-${tag}`,
          properties: expect.objectContaining({ score: 42, 'service.name': 'arena' }),
        })
        // The record's own time, not the receive time.
        const sent = records[0].hrTime[0] * 1000 + Math.floor(records[0].hrTime[1] / 1e6)
        expect(new Date(ended.body.items[0].timestamp).getTime()).toBe(sent)
        expect((await events(`lobby_join_${tag}`)).body.total).toBe(1)
      })

      test('spans of a function call become invocations; other spans are refused by name', async () => {
        const fn = `spawn-${tag}`
        let traceId = ''
        const finished = await spans({ 'service.name': 'game-server' }, (tracer) => {
          const ok = tracer.startSpan('invoke spawn', {
            kind: SpanKind.SERVER,
            attributes: { 'faas.trigger': 'http', 'function.id': fn, 'enduser.id': 'player-7' },
          })
          traceId = ok.spanContext().traceId
          ok.end()
          const failed = tracer.startSpan('invoke spawn', {
            kind: SpanKind.CLIENT,
            attributes: { 'faas.invoked_name': fn },
          })
          failed.setStatus({ code: SpanStatusCode.ERROR, message: 'out of slots' })
          failed.end()
          tracer.startSpan('render frame').end()
        })
        const r = await send(traceExporter(transport, target, { headers: { 'x-api-key': key } }), finished)
        // A partial success is a success to the exporter (it logs the refusal).
        expect(r.code).toBe(ExportResultCode.SUCCESS)
        const list = await invocations(fn)
        expect(list.status).toBe(200)
        expect(list.body.total).toBe(2)
        const byOutcome = Object.fromEntries(list.body.items.map((i: { outcome: string }) => [i.outcome, i]))
        expect(byOutcome.success).toMatchObject({ functionId: fn, actor: 'player-7', traceId })
        expect(byOutcome.failure).toMatchObject({ functionId: fn, actor: null })
        expect(byOutcome.success.durationMs).toBeGreaterThanOrEqual(0)
        const summary = await a.req(
          'GET',
          `/api/v1/analytics/invocations/summary?gameId=${gameId}&env=staging`,
          { token: admin },
        )
        expect(summary.body.topFunctions).toContainEqual(
          expect.objectContaining({ functionId: fn, total: 2, failed: 1 }),
        )
        // The same export again stores nothing new (each span's trace and span id is its event id).
        expect(
          (await send(traceExporter(transport, target, { headers: { 'x-api-key': key } }), finished)).code,
        ).toBe(ExportResultCode.SUCCESS)
        expect((await invocations(fn)).body.total).toBe(2)
      })

      test('a gzip-compressed export is decoded within the same limit', async () => {
        const records = await logRecords({}, [
          { body: `zipped_${tag}`, attributes: { pad: 'p'.repeat(2000) } },
        ])
        const r = await send(
          logExporter(transport, target, { headers: { 'x-api-key': key }, gzip: true }),
          records,
        )
        expect(r.error).toBeUndefined()
        expect((await events(`zipped_${tag}`)).body.total).toBe(1)
        // 200 KB of one letter compresses to a few hundred bytes; decoded, it is over 64 KB.
        const bomb = await logRecords({}, [{ body: `bomb_${tag}`, attributes: { pad: 'b'.repeat(200_000) } }])
        const over = await send(
          logExporter(transport, target, { headers: { 'x-api-key': key }, gzip: true }),
          bomb,
        )
        expect(over.code).toBe(ExportResultCode.FAILED)
        expect((await events(`bomb_${tag}`)).body.total).toBe(0)
      })

      test('a wrong key is refused: 401 / UNAUTHENTICATED', async () => {
        const records = await logRecords({}, [{ body: `never_${tag}` }])
        const r = await send(
          logExporter(transport, target, { headers: { 'x-api-key': 'lok_wrong' } }),
          records,
        )
        expect(r.code).toBe(ExportResultCode.FAILED)
        const said = `${r.error?.message} ${JSON.stringify(r.error)}`
        expect(said).toMatch(transport === 'grpc' ? /UNAUTHENTICATED|"code":16/ : /401/)
        expect((await events(`never_${tag}`)).body.total).toBe(0)
      })

      test('an export over the body limit is refused: 413 / RESOURCE_EXHAUSTED', async () => {
        const big = 'x'.repeat(8 * 1024)
        const records = await logRecords(
          {},
          Array.from({ length: 12 }, (_, i) => ({ body: `huge_${tag}`, attributes: { i, big } })),
        )
        const r = await send(logExporter(transport, target, { headers: { 'x-api-key': key } }), records)
        expect(r.code).toBe(ExportResultCode.FAILED)
        const said = `${r.error?.message} ${JSON.stringify(r.error)}`
        expect(said).toMatch(transport === 'grpc' ? /RESOURCE_EXHAUSTED|"code":8/ : /413/)
        expect((await events(`huge_${tag}`)).body.total).toBe(0)
      })
    })
  }

  describe('answers in the request encoding', () => {
    const post = (path: string, body: BodyInit, headers: Record<string, string>) =>
      fetch(`${target.http}${path}`, { method: 'POST', body, headers })

    test('protobuf: Export*ServiceResponse with partial_success; JSON: the same in JSON', async () => {
      const finished = await spans({}, (tracer) => tracer.startSpan('not a function').end())
      const bytes = ProtobufTraceSerializer.serializeRequest(finished) as Uint8Array<ArrayBuffer>
      const r = await post('/v1/traces', bytes, {
        'content-type': 'application/x-protobuf',
        'x-api-key': key,
      })
      expect(r.status).toBe(200)
      expect(r.headers.get('content-type')).toBe('application/x-protobuf')
      const answer = ProtobufTraceSerializer.deserializeResponse(new Uint8Array(await r.arrayBuffer()))
      expect(Number(answer.partialSuccess?.rejectedSpans)).toBe(1)
      expect(answer.partialSuccess?.errorMessage).toContain("span 'not a function': not a function call")

      const logs = await post(
        '/v1/logs',
        JSON.stringify({ resourceLogs: [{ scopeLogs: [{ logRecords: [{}] }] }] }),
        {
          'content-type': 'application/json',
          'x-api-key': key,
        },
      )
      expect(logs.status).toBe(200)
      expect(await logs.json()).toEqual({
        partialSuccess: { rejectedLogRecords: 1, errorMessage: '0: event_name: required' },
      })
    })

    test('a malformed protobuf: 400 naming why (google.rpc.Status), INVALID_ARGUMENT over gRPC', async () => {
      // Field 1 (resource_logs), length-delimited, claiming 100 bytes that are not there.
      const broken = new Uint8Array([0x0a, 0x64, 0x01, 0x02])
      const r = await post('/v1/logs', broken, { 'content-type': 'application/x-protobuf', 'x-api-key': key })
      expect(r.status).toBe(400)
      expect(r.headers.get('content-type')).toBe('application/x-protobuf')
      const status = RpcStatus.toObject(RpcStatus.decode(new Uint8Array(await r.arrayBuffer())))
      expect(status.code).toBe(grpc.status.INVALID_ARGUMENT)
      expect(status.message).toStartWith('invalid_payload: body: not a protobuf ExportLogsServiceRequest: ')
      const g = await rawCall(grpcPort, LOGS, broken, { 'x-api-key': key })
      expect(g.code).toBe(grpc.status.INVALID_ARGUMENT)
      expect(g.details).toStartWith('invalid_payload: body: not a protobuf ExportLogsServiceRequest: ')
      // JSON that is not JSON, in the usual error body.
      const j = await post('/v1/traces', '{oops', { 'content-type': 'application/json', 'x-api-key': key })
      expect([j.status, (await j.json()).error]).toEqual([400, 'invalid_payload'])
      // Another content-type names itself, after the key was checked.
      const x = await post('/v1/logs', 'a,b', { 'content-type': 'text/csv', 'x-api-key': key })
      expect([x.status, (await x.json()).message]).toEqual([415, expect.stringContaining("'text/csv'")])
    })

    test('signed gRPC calls: the signature over the message bytes, a bad one UNAUTHENTICATED', async () => {
      const records = await logRecords({ game_id: gameId, 'deployment.environment': 'dev' }, [
        { body: 'signed_grpc', attributes: { 'user.id': 'sg' } },
      ])
      const bytes = ProtobufLogsSerializer.serializeRequest(records) as Uint8Array
      const headers = await signRequest(SECRET, bytes)
      const ok = await rawCall(grpcPort, LOGS, bytes, { ...headers })
      expect(ok.code).toBe(0)
      const answer = ProtobufLogsSerializer.deserializeResponse(new Uint8Array(ok.bytes ?? []))
      expect(answer.partialSuccess).toBeUndefined()
      const dev = await a.req(
        'GET',
        `/api/v1/analytics/behavior/events?gameId=${gameId}&env=dev&event=signed_grpc`,
        {
          token: admin,
        },
      )
      expect(dev.body.total).toBe(1)
      const replay = await rawCall(grpcPort, LOGS, bytes, { ...headers })
      expect([replay.code, replay.details]).toEqual([
        grpc.status.RESOURCE_EXHAUSTED,
        expect.stringMatching(/^duplicate_nonce/),
      ])
      const forged = await signRequest('not-the-secret', bytes)
      const bad = await rawCall(grpcPort, TRACES, bytes, { ...forged })
      expect(bad.code).toBe(grpc.status.UNAUTHENTICATED)
      const none = await rawCall(grpcPort, TRACES, new Uint8Array(), {})
      expect(none.code).toBe(grpc.status.UNAUTHENTICATED)
      // Counted by service and status code.
      const metrics = String((await a.req('GET', '/metrics/prometheus')).body)
      expect(metrics).toMatch(
        /^svc_ingest_otlp_grpc_calls_total\{service="traces",code="UNAUTHENTICATED"\} [1-9]/m,
      )
      expect(metrics).toMatch(/^svc_ingest_otlp_grpc_calls_total\{service="logs",code="OK"\} [1-9]/m)
    })

    test("a record naming another environment than the SDK key's is refused in partial_success", async () => {
      const records = await logRecords({ 'deployment.environment': 'prod' }, [{ body: 'cross_env' }])
      const bytes = ProtobufLogsSerializer.serializeRequest(records) as Uint8Array
      const g = await rawCall(grpcPort, LOGS, bytes, { 'x-api-key': key })
      expect(g.code).toBe(0)
      const answer = ProtobufLogsSerializer.deserializeResponse(new Uint8Array(g.bytes ?? []))
      expect(Number(answer.partialSuccess?.rejectedLogRecords)).toBe(1)
      expect(answer.partialSuccess?.errorMessage).toContain(
        "environment: must be the API key's environment 'staging'",
      )
    })
  })
})
