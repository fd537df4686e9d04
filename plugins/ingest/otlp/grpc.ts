import * as grpc from '@grpc/grpc-js'
import type { AuthService } from '../../../core/auth/service'
import { HttpError, httpErrorResponse } from '../../../core/http'
import type { Logger } from '../../../core/log'
import { collect } from '../signed/collect'
import type { Ingestor } from '../signed/service'
import { GRPC, exportResponseBytes, grpcCode, refusalText } from './answer'
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
 */
export interface OtlpGrpcOptions {
  host: string
  port: number
  /** Told of every answered call: the service (`logs`, `traces`) and the gRPC status code's name. */
  onCall?: (signal: Signal, code: string) => void
}

const CODE_NAMES = new Map(Object.entries(grpc.status).map(([name, n]) => [n as number, name]))

/** The headers `collect` reads, taken from the call's metadata. */
const CREDENTIALS = ['x-api-key', 'x-game-id', 'x-timestamp', 'x-nonce', 'x-signature'] as const

/** `ipv4:127.0.0.1:5000`, `ipv6:[::1]:5000` or `127.0.0.1:5000` → the address alone. */
function peerAddress(peer: string): string {
  const s = peer.replace(/^ipv[46]:/, '')
  const bracket = s.match(/^\[(.*)\]:\d+$/)
  if (bracket) return bracket[1]
  const i = s.lastIndexOf(':')
  return i > 0 ? s.slice(0, i) : s
}

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
  const server = new grpc.Server({
    // A message over the body limit: RESOURCE_EXHAUSTED from grpc-js before it is handed over.
    'grpc.max_receive_message_length': limit,
  })
  const exportCall =
    (signal: Signal): grpc.handleUnaryCall<Buffer, Uint8Array> =>
    (call, callback) => {
      const headers: Record<string, string | undefined> = { 'content-type': 'application/x-protobuf' }
      for (const name of CREDENTIALS) {
        const v = call.metadata.get(name)[0]
        if (v !== undefined) headers[name] = String(v)
      }
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
    server.bindAsync(`${o.host}:${o.port}`, grpc.ServerCredentials.createInsecure(), (err, bound) =>
      err ? reject(err) : resolve(bound),
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
