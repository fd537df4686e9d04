import type protobuf from 'protobufjs'
import { HttpError } from '../../../core/http'
import { MAX_JSON_DEPTH, TOO_DEEP } from '../../../core/strict'
import { SIGNALS, type Signal } from './proto'

/**
 * What an OTLP export may hold before it costs more than its bytes (eighteenth session's audit:
 * one 1 MB export with an SDK key, public in every game client, held the event loop 5-33 s and
 * grew the process by gigabytes). Three bounds, each checked before the work it bounds:
 * - messages on the wire, before decoding: 500,000 empty log records fit in 1 MB and took
 *   seconds to decode, then as long again to copy and convert;
 * - entries (log records, spans), as `/v1/batch` counts events, before they are converted;
 * - attributes of a resource: each is copied into every entry of it, so 20,000 of them on 500
 *   records were ten million copies.
 * A resource larger than an event may be makes each of its entries `event_too_large` without
 * building them (`oversizedResource`).
 */

/** OpenTelemetry SDKs' default attribute count limit, here the most a resource may carry. */
export const MAX_RESOURCE_ATTRIBUTES = 128
/** Protobuf messages an export may hold per entry it may carry: 64 attributes and their values each on average. */
export const MESSAGES_PER_ENTRY = 130

const tooMany = (what: string, max: number, got: string) =>
  new HttpError(413, 'batch_too_large', `body: at most ${max} ${what} per request, got ${got}`, {
    limit: max,
  })

/** A varint at `pos`: its value (tags and lengths, below 2^53) and the position after it; undefined past `end`. */
function varint(b: Uint8Array, pos: number, end: number): [number, number] | undefined {
  let value = 0
  let scale = 1
  for (let i = pos; i < end && i < pos + 10; i++) {
    value += (b[i] & 0x7f) * scale
    if (b[i] < 0x80) return [value, i + 1]
    scale *= 128
  }
  return undefined
}

/**
 * Counts the messages of a protobuf body by its schema without decoding it, throwing 413 past
 * `budget` and 400 past the JSON routes' depth. A malformed body stops the count where it stops
 * making sense; the decoder then says why it is malformed.
 */
export function countMessages(type: protobuf.Type, body: Uint8Array, budget: number): void {
  let left = budget
  const walk = (t: protobuf.Type, start: number, end: number, depth: number): void => {
    if (depth > MAX_JSON_DEPTH) throw new HttpError(400, 'invalid_payload', `body: ${TOO_DEEP}`)
    let at = start
    while (at < end) {
      const tag = varint(body, at, end)
      if (!tag) return
      at = tag[1]
      const wire = tag[0] % 8
      if (wire === 0) {
        const skipped = varint(body, at, end)
        if (!skipped) return
        at = skipped[1]
      } else if (wire === 1) at += 8
      else if (wire === 5) at += 4
      else if (wire === 2) {
        const len = varint(body, at, end)
        if (!len) return
        at = len[1]
        const sub = t.fieldsById[Math.floor(tag[0] / 8)]?.resolvedType
        if (sub && 'fieldsById' in sub) {
          if (--left < 0) throw tooMany('protobuf messages', budget, 'more')
          walk(sub as protobuf.Type, at, Math.min(end, at + len[0]), depth + 1)
        }
        at += len[0]
      } else return
    }
  }
  walk(type, 0, body.length, 1)
}

type Obj = Record<string, unknown>
const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v)
const arr = (v: unknown): unknown[] => (Array.isArray(v) ? v : [])

/** The scope and entry list names of each signal, in OTLP/JSON and protobufjs alike. */
const SHAPE = {
  logs: { scopes: 'scopeLogs', entries: 'logRecords' },
  traces: { scopes: 'scopeSpans', entries: 'spans' },
} as const

/**
 * Checks a decoded export (a protobufjs message or parsed OTLP/JSON: the same field names)
 * before its entries are built: at most `maxEntries` entries (413 `batch_too_large`, as
 * `/v1/batch`) and `MAX_RESOURCE_ATTRIBUTES` attributes a resource (400 naming it).
 */
export function checkExportShape(signal: Signal, body: unknown, maxEntries: number): void {
  const list = SIGNALS[signal].listField
  const { scopes, entries } = SHAPE[signal]
  let count = 0
  arr(isObj(body) ? body[list] : undefined).forEach((r, i) => {
    if (!isObj(r)) return
    const attrs = arr(isObj(r.resource) ? r.resource.attributes : undefined).length
    if (attrs > MAX_RESOURCE_ATTRIBUTES)
      throw new HttpError(
        400,
        'invalid_payload',
        `${list}[${i}].resource.attributes: at most ${MAX_RESOURCE_ATTRIBUTES} attributes (each is copied into every entry), got ${attrs}`,
      )
    for (const s of arr(r[scopes])) count += arr(isObj(s) ? s[entries] : undefined).length
  })
  if (count > maxEntries) throw tooMany('entries', maxEntries, String(count))
}

/** Whether a resource's attributes alone are larger than an event may be (every entry of it would be). */
export function oversizedResource(resource: Obj, maxEntryBytes: number): boolean {
  return Buffer.byteLength(JSON.stringify(resource), 'utf8') > maxEntryBytes
}
