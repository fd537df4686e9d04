import type { HttpError } from '../../../core/http'
import { RpcStatus, SIGNALS, type Signal } from './proto'

/**
 * What an OTLP export is answered, in both encodings and over gRPC: an Export*ServiceResponse
 * whose partial_success counts the refused records or spans and names why; refusals as
 * google.rpc.Status (HTTP protobuf) or gRPC status codes.
 */
export interface Rejection {
  event_id: string
  reason: string
}

/** At most this many reasons are spelled out in error_message; the count says how many there were. */
const SHOWN = 10

/** The response in its OTLP/JSON shape: `{}` when all was kept. */
export function exportResponse(signal: Signal, rejected: Rejection[]): Record<string, unknown> {
  if (!rejected.length) return {}
  const shown = rejected
    .slice(0, SHOWN)
    .map((r) => `${r.event_id}: ${r.reason}`)
    .join('; ')
  const more = rejected.length > SHOWN ? ` (and ${rejected.length - SHOWN} more)` : ''
  return {
    partialSuccess: { [SIGNALS[signal].rejectedField]: rejected.length, errorMessage: shown + more },
  }
}

/** The same response, protobuf-encoded. */
export function exportResponseBytes(signal: Signal, rejected: Rejection[]): Uint8Array {
  const type = SIGNALS[signal].response
  return type.encode(type.fromObject(exportResponse(signal, rejected))).finish()
}

/** gRPC status codes (grpc/status.h) of the HTTP refusals ingestion answers. */
export const GRPC = {
  INVALID_ARGUMENT: 3,
  PERMISSION_DENIED: 7,
  RESOURCE_EXHAUSTED: 8,
  INTERNAL: 13,
  UNAVAILABLE: 14,
  UNAUTHENTICATED: 16,
} as const

export function grpcCode(httpStatus: number): number {
  if (httpStatus === 401) return GRPC.UNAUTHENTICATED
  if (httpStatus === 403) return GRPC.PERMISSION_DENIED
  if (httpStatus === 413 || httpStatus === 429) return GRPC.RESOURCE_EXHAUSTED
  if (httpStatus === 503) return GRPC.UNAVAILABLE
  if (httpStatus >= 400 && httpStatus < 500) return GRPC.INVALID_ARGUMENT
  return GRPC.INTERNAL
}

/** The one line a refusal is told as: its code, then what to fix (`invalid_payload: body: ...`). */
export const refusalText = (e: HttpError) => `${e.code}: ${e.message}`

/** google.rpc.Status bytes of a refusal (the OTLP/HTTP protobuf error body). */
export function statusBytes(e: HttpError): Uint8Array {
  return RpcStatus.encode(
    RpcStatus.fromObject({ code: grpcCode(e.status), message: refusalText(e) }),
  ).finish()
}
