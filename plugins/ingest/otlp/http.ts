import type { AuthService } from '../../../core/auth/service'
import { HttpError, httpErrorResponse } from '../../../core/http'
import { type Headers, type Server, clientIp, collect } from '../signed/collect'
import type { Ingestor } from '../signed/service'
import { exportResponse, exportResponseBytes, statusBytes } from './answer'
import { encodingOf } from './decode'
import type { Signal } from './proto'

/**
 * `POST /v1/logs` and `POST /v1/traces` (OTLP/HTTP): the `/v1/batch` pipeline (API key or
 * signature, limits, privacy, durable write) behind either encoding. A protobuf request is
 * answered protobuf, its refusals too (google.rpc.Status, as the OTLP spec says); a JSON one
 * JSON, its refusals in the usual error body.
 */
export const OTLP_PATHS: Record<Signal, string> = { logs: '/v1/logs', traces: '/v1/traces' }

export function otlpHttpHandler(ing: Ingestor, auth: AuthService, signal: Signal) {
  const path = OTLP_PATHS[signal]
  // Destructured in the parameter list: Elysia reads it to decide what to parse.
  return async ({
    request,
    headers,
    server,
    set,
  }: {
    request: Request
    headers: Headers
    server: Server
    set: { headers: Record<string, unknown> }
  }): Promise<Response | Record<string, unknown>> => {
    let protobuf = false
    try {
      protobuf = encodingOf(headers['content-type']) === 'protobuf'
    } catch {
      // Refused after authentication, inside collect (a stranger learns nothing first).
    }
    if (!protobuf) {
      const { rejected } = await collect(ing, auth, request, headers, clientIp(server, request), set, signal)
      return exportResponse(signal, rejected)
    }
    try {
      const { rejected } = await collect(ing, auth, request, headers, clientIp(server, request), set, signal)
      return new Response(exportResponseBytes(signal, rejected) as Uint8Array<ArrayBuffer>, {
        headers: { ...(set.headers as Record<string, string>), 'content-type': 'application/x-protobuf' },
      })
    } catch (e) {
      if (!(e instanceof HttpError)) return httpErrorResponse(path, e)
      return new Response(statusBytes(e) as Uint8Array<ArrayBuffer>, {
        status: e.status,
        headers: { ...e.headers, 'content-type': 'application/x-protobuf' },
      })
    }
  }
}

/** The OpenAPI request body of an export: both encodings. */
export function otlpRequestBody(signal: Signal) {
  const message = signal === 'logs' ? 'ExportLogsServiceRequest' : 'ExportTraceServiceRequest'
  const what =
    signal === 'logs'
      ? 'each log record becomes an event (name: the event.name attribute or event_name field, else a string body)'
      : 'each span of a function call becomes a function.invoke event and an invocation row (faas.* or function.id attributes); other spans are refused in partial_success'
  return {
    required: true,
    description: `An OTLP ${message} (opentelemetry.proto.collector.${signal === 'logs' ? 'logs' : 'trace'}.v1): ${what}.`,
    content: {
      'application/x-protobuf': {
        schema: { type: 'string', format: 'binary', description: `protobuf-encoded ${message}` },
      },
      'application/json': {
        schema: {
          type: 'object',
          description: `${message} in the OTLP/JSON encoding (lowerCamelCase fields, hex trace and span ids)`,
        },
      },
    },
  }
}

/** The OpenAPI answer of an export: Export*ServiceResponse in the request's encoding. */
export function otlpResponses(signal: Signal) {
  const message = signal === 'logs' ? 'ExportLogsServiceResponse' : 'ExportTraceServiceResponse'
  const field = signal === 'logs' ? 'rejectedLogRecords' : 'rejectedSpans'
  return {
    200: {
      description: `${message}: empty when everything was kept, else partialSuccess with the ${field} count and an errorMessage naming each refusal; protobuf-encoded for a protobuf request`,
      content: {
        'application/x-protobuf': { schema: { type: 'string', format: 'binary' } },
        'application/json': {
          schema: {
            type: 'object',
            properties: {
              partialSuccess: {
                type: 'object',
                properties: { [field]: { type: 'integer' }, errorMessage: { type: 'string' } },
              },
            },
          },
        },
      },
    },
  }
}
