import { HttpError } from '../../../core/http'
import { otlpRecords } from '../otlp'
import { boundedDepth, parseJson } from '../signed/service'
import { MESSAGES_PER_ENTRY, checkExportShape, countMessages } from './bounds'
import { SIGNALS, type Signal } from './proto'
import { type DecodedItems, otlpSpans } from './traces'

/**
 * An OTLP export body (protobuf or JSON) → `/v1/batch` items, the two encodings meeting in the
 * JSON shape: protobuf is decoded and turned into what OTLP/JSON would have sent (64-bit
 * integers as decimal strings, trace and span ids as hex).
 */
export type Encoding = 'protobuf' | 'json'

/** The encoding a Content-Type names; 415 naming it when it is neither (none at all is JSON). */
export function encodingOf(contentType: string | undefined): Encoding {
  const type = (contentType ?? '').split(';')[0].trim().toLowerCase()
  if (type === 'application/x-protobuf' || type === 'application/protobuf') return 'protobuf'
  if (type === '' || type === 'application/json') return 'json'
  throw new HttpError(
    415,
    'unsupported_media_type',
    `content-type: '${type}' is not an OTLP encoding (application/x-protobuf or application/json)`,
  )
}

const ID_FIELDS = new Set(['traceId', 'spanId', 'parentSpanId'])

/** base64 ids (protobufjs' `bytes: String`) → hex, as OTLP/JSON carries them; recursively. */
function hexIds(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(hexIds)
  if (typeof v !== 'object' || v === null) return v
  const out: Record<string, unknown> = {}
  for (const [k, x] of Object.entries(v))
    out[k] = ID_FIELDS.has(k) && typeof x === 'string' ? Buffer.from(x, 'base64').toString('hex') : hexIds(x)
  return out
}

/** What an export may carry: `/v1/batch`'s events per request and bytes per event. */
export interface OtlpLimits {
  maxEntries: number
  maxEntryBytes: number
}

/**
 * A protobuf Export*ServiceRequest in its OTLP/JSON shape; 400 naming why it does not decode,
 * 413 past what `limits` allow (counted on the wire, then on the decoded message: bounds.ts).
 */
export function decodeProtobuf(
  signal: Signal,
  body: Uint8Array,
  limits: OtlpLimits,
): Record<string, unknown> {
  const type = SIGNALS[signal].request
  countMessages(type, body, limits.maxEntries * MESSAGES_PER_ENTRY)
  let message: ReturnType<typeof type.decode>
  try {
    message = type.decode(body)
  } catch (e) {
    throw new HttpError(
      400,
      'invalid_payload',
      `body: not a protobuf ${type.name}: ${e instanceof Error ? e.message : String(e)}`,
    )
  }
  checkExportShape(signal, message, limits.maxEntries)
  return hexIds(type.toObject(message, { longs: String, bytes: String, defaults: false })) as Record<
    string,
    unknown
  >
}

export function decodeOtlp(
  signal: Signal,
  body: Uint8Array,
  encoding: Encoding,
  limits: OtlpLimits,
): DecodedItems {
  let parsed: unknown
  // The decoder stops at its own depth (about 100 messages); what it made is held to the JSON
  // routes' 64 levels, as the same export in JSON is (`parseJson`).
  if (encoding === 'protobuf') parsed = boundedDepth(decodeProtobuf(signal, body, limits))
  else {
    parsed = parseJson(body)
    // An Export*ServiceRequest is an object; an array or a scalar is not an empty export.
    if (!parsed || typeof parsed !== 'object' || Array.isArray(parsed))
      throw new HttpError(
        400,
        'invalid_payload',
        `body: must be an OTLP ${SIGNALS[signal].request.name} object`,
      )
  }
  checkExportShape(signal, parsed, limits.maxEntries)
  if (signal === 'traces') return otlpSpans(parsed, limits.maxEntryBytes)
  return otlpRecords(parsed, limits.maxEntryBytes)
}
