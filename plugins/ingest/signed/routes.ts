import { Elysia } from 'elysia'
import type { AuthService } from '../../../core/auth/service'
import { httpErrorResponse } from '../../../core/http'
import type { FastHandler, PluginContext } from '../../../core/plugin'
import { otlpHttpHandler, otlpRequestBody, otlpResponses } from '../otlp/http'
import * as S from '../schema'
import { accept, clientIp, collect, signedEvents } from './collect'
import { type Ingestor, readBody } from './service'
import { PAYMENT_STATUSES } from './validate'

/** The headers the signature check and the game binding read. */
const signedHeaders = (request: Request) => ({
  'x-game-id': request.headers.get('x-game-id') ?? undefined,
  'x-timestamp': request.headers.get('x-timestamp') ?? undefined,
  'x-nonce': request.headers.get('x-nonce') ?? undefined,
  'x-signature': request.headers.get('x-signature') ?? undefined,
})

export function ingestRoutes(
  ing: Ingestor,
  auth: AuthService,
  guard: PluginContext<unknown>['guard'],
  fastRoute: PluginContext<unknown>['fastRoute'],
) {
  const signedDoc =
    'Signed (X-Timestamp, X-Nonce, X-Signature; optional X-Game-Id). 401 bad signature, 403 ingest_disabled, 413 over the body limit, 429 duplicate_nonce or rate_limit_exceeded, 400 invalid_payload / invalid_events (every bad index, field and reason; nothing stored) / unknown_game / unknown_environment.'
  const batchDoc =
    'x-api-key bound to a game and environment, or signed. JSON array or NDJSON, gzip accepted; body <= 1 MB, event <= 64 KB, <= 500 events.'
  // These routes read their own bytes (`parse: 'none'`): their bodies and credentials are documented here
  // (plain OpenAPI objects, `as never` past the detail type's readonly-free shape).
  // The event object of spec 1 ("Event and payment ingestion"), as `validate.ts` checks it.
  const eventsBody = (
    description: string,
    extra: { required: string[]; properties: object } = { required: [], properties: {} },
  ) => ({
    required: true,
    description,
    content: {
      'application/json': {
        schema: {
          type: 'array',
          items: {
            type: 'object',
            required: ['event', 'ts', 'env', ...extra.required],
            additionalProperties: true,
            properties: {
              event: {
                type: 'string',
                minLength: 1,
                description: 'the event name: session_start, level_complete, ad_impression, ...',
              },
              ts: {
                type: 'string',
                pattern: '^[0-9]+$',
                description:
                  "epoch milliseconds as a string (a number is rejected as a missing ts), at most the ingest plugin's max_event_age_days (400) old and max_event_future_s (86,400) ahead",
              },
              game_id: {
                type: 'string',
                description: 'required unless X-Game-Id is sent (then it must match)',
              },
              env: { type: 'string', minLength: 1 },
              event_id: {
                type: 'string',
                maxLength: 128,
                description: "the client's id: a retried event is stored and counted once",
              },
              uid: { type: 'string', description: 'the user (also user_id)' },
              user_id: { type: 'string' },
              session_id: { type: 'string' },
              attrs: { type: 'object', description: 'business fields (they may also sit at top level)' },
              ...extra.properties,
            },
          },
        },
      },
    },
  })
  const signed = [{ ingestSignature: [] }]
  const batchBody = {
    required: true,
    description: batchDoc,
    content: {
      // A single object is a one-line NDJSON batch.
      'application/json': {
        schema: { oneOf: [{ type: 'array', items: { type: 'object' } }, { type: 'object' }] },
      },
      'application/x-ndjson': { schema: { type: 'string' } },
    },
  }
  // The hottest write path: served from Bun's native router too (ctx.fastRoute), so a batch or
  // a rejected signature costs no Elysia hooks; the Elysia routes below share the handlers.
  const signedRoute =
    (path: string, payments: boolean): FastHandler =>
    async (request, _params, server) => {
      const headers = signedHeaders(request)
      const body = await readBody(request, Math.round(ing.config.max_body_mb * 1024 * 1024))
      // Answered, not thrown: forged traffic takes the cheapest path there is.
      const denied = ing.signatureError(headers, body) ?? (await ing.replayAcrossInstances(headers))
      if (denied) return httpErrorResponse(path, denied)
      const set = { headers: {} as Record<string, string> }
      await accept(
        ing,
        signedEvents(ing, body, headers, payments),
        clientIp(server, request),
        set,
        headers['x-nonce'],
      )
      return Response.json({ ok: true }, { headers: set.headers })
    }
  // OTLP/HTTP: both encodings, answered in the request's (otlp/http.ts).
  const otlpRoute = (signal: 'logs' | 'traces') => ({
    parse: 'none' as const,
    detail: {
      tags: ['ingest'],
      summary:
        signal === 'logs'
          ? 'OTLP/HTTP logs (protobuf or JSON): each log record becomes an event'
          : 'OTLP/HTTP traces (protobuf or JSON): each function-call span becomes an invocation',
      description:
        'x-api-key bound to a game and environment, or signed (the signature covers the body bytes). gzip accepted; body <= 1 MB after decoding, <= 500 records or spans. A protobuf request is answered protobuf, its refusals as google.rpc.Status (code and `error: message`); a JSON one JSON. 415 for another content-type. The same services over OTLP/gRPC: `ingest.otlp.grpc` (docs/otlp.md).',
      security: [{ apiKey: [] }, ...signed],
      requestBody: otlpRequestBody(signal) as never,
      responses: otlpResponses(signal) as never,
    },
  })
  const signedEventsRoute = signedRoute('/api/ingest/events', false)
  const signedPaymentsRoute = signedRoute('/api/ingest/payments', true)
  fastRoute('POST', '/api/ingest/events', signedEventsRoute)
  fastRoute('POST', '/api/ingest/payments', signedPaymentsRoute)
  return new Elysia({ name: 'ingest' })
    .use(guard)
    .post('/api/ingest/events', ({ request, server }) => signedEventsRoute(request, {}, server), {
      parse: 'none',
      response: { 200: S.OkOut },
      detail: {
        tags: ['ingest'],
        summary: 'Ingest a JSON array of events; answers after they are durable',
        description: signedDoc,
        security: signed,
        requestBody: eventsBody('A JSON array of events') as never,
      },
    })
    .post('/api/ingest/payments', ({ request, server }) => signedPaymentsRoute(request, {}, server), {
      parse: 'none',
      response: { 200: S.OkOut },
      detail: {
        tags: ['ingest'],
        summary:
          'Ingest payment events: order_id, status (success, refunded, failed), amount_cents > 0; a repeated order_id and status is stored once',
        description: signedDoc,
        security: signed,
        requestBody: eventsBody(
          'A JSON array of payment events (order_id, status, amount_cents besides the event fields)',
          {
            required: ['order_id', 'status', 'amount_cents'],
            properties: {
              order_id: { type: 'string', minLength: 1 },
              status: { type: 'string', enum: [...PAYMENT_STATUSES] },
              amount_cents: { type: 'integer', minimum: 1 },
              currency: { type: 'string' },
            },
          },
        ) as never,
      },
    })
    .post(
      '/v1/batch',
      ({ request, headers, server, set }) =>
        collect(ing, auth, request, headers, clientIp(server, request), set),
      {
        parse: 'none',
        response: { 200: S.BatchOut },
        detail: {
          tags: ['ingest'],
          summary: 'SDK batch collection',
          description: batchDoc,
          security: [{ apiKey: [] }, ...signed],
          requestBody: batchBody as never,
        },
      },
    )
    .post('/v1/logs', otlpHttpHandler(ing, auth, 'logs'), otlpRoute('logs'))
    .post('/v1/traces', otlpHttpHandler(ing, auth, 'traces'), otlpRoute('traces'))
}
