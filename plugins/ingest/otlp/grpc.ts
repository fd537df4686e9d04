import * as grpc from '@grpc/grpc-js'
import type { AuthService } from '../../../core/auth/service'
import { HttpError, Unauthorized, httpErrorResponse } from '../../../core/http'
import type { Logger } from '../../../core/log'
import { collect } from '../signed/collect'
import type { Ingestor } from '../signed/service'
import { GRPC, exportResponseBytes, grpcCode, refusalText } from './answer'
import { callGuard, peerAddress } from './grpc-guard'
import { OTLP_PATHS } from './http'
import { SIGNALS, type Signal } from './proto'

/**
 * OTLP/gRPC: `opentelemetry.proto.collector.logs.v1.LogsService/Export` and
 * `...trace.v1.TraceService/Export` on a port of their own (`ingest.otlp.grpc`). Each call goes
 * through the very pipeline of `/v1/logs` and `/v1/traces`: the metadata carries the same
 * credentials as the HTTP headers (`x-api-key`, or `x-timestamp` / `x-nonce` / `x-signature`
 * over the message bytes, with an optional `x-game-id`), and the same limits apply. Refusals
 * are gRPC status codes: UNAUTHENTICATED (401), PERMISSION_DENIED (403), INVALID_ARGUMENT (400,
 * 415), RESOURCE_EXHAUSTED (413, 429; grpc-js itself for a message over the body limit).
 * The credential is checked on the metadata before the message is read (grpc-guard.ts).
 */
export interface OtlpGrpcOptions {
  host: string
  port: number
  /** A call whose message has not arrived this long after its start is ended (DEADLINE_EXCEEDED). */
  read_timeout_ms: number
  /** Told of every answered call: the service (`logs`, `traces`) and the gRPC status code's name. */
  onCall?: (signal: Signal, code: string) => void
}

const CODE_NAMES = new Map(Object.entries(grpc.status).map(([name, n]) => [n as number, name]))

/** The headers `collect` reads, taken from the call's metadata. */
const CREDENTIALS = ['x-api-key', 'x-game-id', 'x-timestamp', 'x-nonce', 'x-signature'] as const

function credentials(metadata: grpc.Metadata): Record<string, string | undefined> {
  const headers: Record<string, string | undefined> = {}
  for (const name of CREDENTIALS) {
    const v = metadata.get(name)[0]
    if (v !== undefined) headers[name] = String(v)
  }
  return headers
}

/** Streams one connection may have open at once (grpc-js sets no bound of its own). */
const MAX_STREAMS = 32
/** Calls whose message is being read at once: from one address, and in all (each holds up to the body limit). */
const MAX_READING_PER_PEER = 16
const MAX_READING = 64
/** A connection is asked to go away after this long, and cut after the grace (at least the read timeout). */
const CONNECTION_AGE_MS = 10 * 60_000
const CONNECTION_GRACE_MS = 30_000
/** A connection with no call for this long is closed. */
const CONNECTION_IDLE_MS = 5 * 60_000

/** A service definition passing the message bytes through untouched: the signature covers them. */
const rawService = (signal: Signal): grpc.ServiceDefinition => ({
  Export: {
    path: `/${SIGNALS[signal].service}/Export`,
    requestStream: false,
    responseStream: false,
    requestSerialize: (b: Buffer) => b,
    requestDeserialize: (b: Buffer) => b,
    responseSerialize: (b: Uint8Array) => Buffer.from(b.buffer, b.byteOffset, b.byteLength),
    responseDeserialize: (b: Buffer) => b,
  },
})

export async function startOtlpGrpc(
  ing: Ingestor,
  auth: AuthService,
  log: Logger,
  o: OtlpGrpcOptions,
): Promise<{ port: number; stop(): Promise<void> }> {
  const limit = ing.config.batch_max_body_kb * 1024
  const signalOf = new Map<string, Signal>(
    (['logs', 'traces'] as const).map((s) => [`/${SIGNALS[s].service}/Export`, s]),
  )
  const server = new grpc.Server({
    // A message over the body limit: RESOURCE_EXHAUSTED from grpc-js before it is handed over.
    'grpc.max_receive_message_length': limit,
    // What one connection may hold: streams at once, and how long it lives. An exporter's channel
    // reconnects when told to go away (GOAWAY); a call under way gets the grace to finish.
    'grpc.max_concurrent_streams': MAX_STREAMS,
    'grpc.max_connection_age_ms': CONNECTION_AGE_MS,
    'grpc.max_connection_age_grace_ms': Math.max(CONNECTION_GRACE_MS, o.read_timeout_ms),
    'grpc.max_connection_idle_ms': CONNECTION_IDLE_MS,
    interceptors: [
      callGuard({
        check: async (metadata) => {
          const headers = credentials(metadata)
          const key = headers['x-api-key']
          if (!key) return ing.signatureHeadersError(headers)
          const p = await auth.verifyApiKey(key)
          if (!p) return new Unauthorized('missing or invalid x-api-key', 'invalid_api_key')
          return undefined
        },
        readTimeoutMs: o.read_timeout_ms,
        maxReading: MAX_READING,
        maxReadingPerPeer: MAX_READING_PER_PEER,
        onRefuse: (path, code) => {
          const signal = signalOf.get(path)
          if (signal) o.onCall?.(signal, CODE_NAMES.get(code) ?? String(code))
        },
      }),
    ],
  })
  const exportCall =
    (signal: Signal): grpc.handleUnaryCall<Buffer, Uint8Array> =>
    (call, callback) => {
      const headers = { 'content-type': 'application/x-protobuf', ...credentials(call.metadata) }
      const body = call.request
      const request = new Request(`http://otlp-grpc${OTLP_PATHS[signal]}`, {
        method: 'POST',
        body: body as Uint8Array<ArrayBuffer>,
        headers: { ...(headers as Record<string, string>), 'content-length': String(body.byteLength) },
      })
      const ip = () => peerAddress(call.getPeer())
      const set = { headers: {} as Record<string, unknown> }
      const refuse = (code: number, details: string) => {
        o.onCall?.(signal, CODE_NAMES.get(code) ?? String(code))
        callback({ code, details })
      }
      collect(ing, auth, request, headers, ip, set, signal).then(
        ({ rejected }) => {
          o.onCall?.(signal, 'OK')
          callback(null, exportResponseBytes(signal, rejected))
        },
        async (e: unknown) => {
          if (e instanceof HttpError) return refuse(grpcCode(e.status), refusalText(e))
          // A store fault (503) or a fault of ours (500), logged as the HTTP routes log them.
          const r = httpErrorResponse(OTLP_PATHS[signal], e)
          const said = (await r.json().catch(() => ({}))) as { error?: string; message?: string }
          refuse(
            r.status === 503 ? GRPC.UNAVAILABLE : GRPC.INTERNAL,
            `${said.error ?? 'internal_error'}: ${said.message ?? 'internal server error'}`,
          )
        },
      )
    }
  for (const signal of ['logs', 'traces'] as const)
    server.addService(rawService(signal), { Export: exportCall(signal) })
  const port = await new Promise<number>((resolve, reject) =>
    // An IPv6 address (`::1`, `::`) is bracketed in a gRPC target.
    server.bindAsync(
      `${o.host.includes(':') && !o.host.startsWith('[') ? `[${o.host}]` : o.host}:${o.port}`,
      grpc.ServerCredentials.createInsecure(),
      (err, bound) => (err ? reject(err) : resolve(bound)),
    ),
  )
  log.info('OTLP/gRPC listening', { host: o.host, port })
  return {
    port,
    stop: () =>
      new Promise<void>((resolve) => {
        // Calls under way finish; what still runs after two seconds is cut.
        const cut = setTimeout(() => {
          server.forceShutdown()
          resolve()
        }, 2000)
        server.tryShutdown(() => {
          clearTimeout(cut)
          resolve()
        })
      }),
  }
}
