import { describe, expect, test } from 'bun:test'
import { HttpError } from '../../../core/http'
import { MAX_RESOURCE_ATTRIBUTES, MESSAGES_PER_ENTRY, countMessages } from './bounds'
import { decodeOtlp } from './decode'
import { SIGNALS } from './proto'

// The eighteenth session's OTLP audit: what one export with an SDK key (public, in every game
// client) may make the server do, bounded before the work it would cost.

const LIMITS = { maxEntries: 500, maxEntryBytes: 64 * 1024 }
const Logs = SIGNALS.logs.request
const Traces = SIGNALS.traces.request
const encode = (type: typeof Logs, body: object) => type.encode(type.fromObject(body)).finish()
const kv = (key: string, value: string) => ({ key, value: { stringValue: value } })
const logsOf = (resource: object[], records: object[]) => ({
  resourceLogs: [{ resource: { attributes: resource }, scopeLogs: [{ logRecords: records }] }],
})

/** A length-delimited field `field` holding `bytes`. */
function wrap(field: number, bytes: Uint8Array): Uint8Array {
  const len: number[] = []
  for (let n = bytes.length; ; n = Math.floor(n / 128)) {
    if (n < 128) {
      len.push(n)
      break
    }
    len.push((n % 128) | 0x80)
  }
  const out = new Uint8Array(1 + len.length + bytes.length)
  out.set([(field << 3) | 2, ...len])
  out.set(bytes, 1 + len.length)
  return out
}

/** The error `fn` throws, as status, code and message. */
function refusal(fn: () => unknown): [number, string, string] {
  try {
    fn()
  } catch (e) {
    if (e instanceof HttpError) return [e.status, e.code, e.message]
    throw e
  }
  throw new Error('not refused')
}

describe('OTLP exports are bounded before the work they would cost', () => {
  test('500,000 empty log records (1 MB) are refused on the wire, before decoding: 413 batch_too_large', () => {
    // Built by hand (each empty record is 2 bytes): field 2 of ScopeLogs, in field 2 of ResourceLogs, in field 1.
    const body = wrap(
      1,
      wrap(
        2,
        new Uint8Array(1_000_000).fill(0x12).map((b, i) => (i % 2 ? 0 : b)),
      ),
    )
    expect(Logs.decode(wrap(1, wrap(2, new Uint8Array([0x12, 0, 0x12, 0]))))).toMatchObject({
      resourceLogs: [{ scopeLogs: [{ logRecords: [{}, {}] }] }],
    })
    const [status, code, message] = refusal(() => decodeOtlp('logs', body, 'protobuf', LIMITS))
    expect([status, code]).toEqual([413, 'batch_too_large'])
    expect(message).toContain(`at most ${500 * MESSAGES_PER_ENTRY} protobuf messages`)
  })

  test('501 records are 413 in either encoding, 500 pass; the JSON export is counted the same way', () => {
    const records = (n: number) => Array.from({ length: n }, (_, i) => ({ body: { stringValue: `e${i}` } }))
    for (const n of [501, 2_000]) {
      expect(
        refusal(() => decodeOtlp('logs', encode(Logs, logsOf([], records(n))), 'protobuf', LIMITS)),
      ).toEqual([413, 'batch_too_large', `body: at most 500 entries per request, got ${n}`])
      const json = new TextEncoder().encode(JSON.stringify(logsOf([], records(n))))
      expect(refusal(() => decodeOtlp('logs', json, 'json', LIMITS))[0]).toBe(413)
    }
    expect(decodeOtlp('logs', encode(Logs, logsOf([], records(500))), 'protobuf', LIMITS).items).toHaveLength(
      500,
    )
  })

  test('a resource of more than 128 attributes (each copied into every entry) is 400 naming it, logs and spans', () => {
    const many = Array.from({ length: MAX_RESOURCE_ATTRIBUTES + 1 }, (_, i) => kv(`a${i}`, 'v'))
    const [status, code, message] = refusal(() =>
      decodeOtlp('logs', encode(Logs, logsOf(many, [{ body: { stringValue: 'x' } }])), 'protobuf', LIMITS),
    )
    expect([status, code]).toEqual([400, 'invalid_payload'])
    expect(message).toStartWith('resourceLogs[0].resource.attributes: at most 128 attributes')
    const spans = {
      resourceSpans: [{ resource: { attributes: many }, scopeSpans: [{ spans: [{ name: 's' }] }] }],
    }
    expect(refusal(() => decodeOtlp('traces', encode(Traces, spans), 'protobuf', LIMITS))[2]).toStartWith(
      'resourceSpans[0].resource.attributes',
    )
    const fine = many.slice(0, MAX_RESOURCE_ATTRIBUTES)
    expect(
      decodeOtlp('logs', encode(Logs, logsOf(fine, [{ body: { stringValue: 'x' } }])), 'protobuf', LIMITS)
        .items,
    ).toHaveLength(1)
  })

  test("a resource larger than an event makes each of its records event_too_large, unbuilt; another resource's pass", () => {
    const body = {
      resourceLogs: [
        logsOf(
          [kv('blob', 'x'.repeat(70_000))],
          [{ body: { stringValue: 'a' } }, { body: { stringValue: 'b' } }],
        ).resourceLogs[0],
        logsOf([kv('service.name', 'shop')], [{ body: { stringValue: 'c' } }]).resourceLogs[0],
      ],
    }
    const out = decodeOtlp('logs', encode(Logs, body), 'protobuf', LIMITS)
    expect(out.items.slice(0, 2)).toEqual([null, null])
    expect(out.rejected).toEqual([
      { event_id: '0', reason: 'event_too_large' },
      { event_id: '1', reason: 'event_too_large' },
    ])
    expect(out.items[2]).toMatchObject({ event_name: 'c', 'service.name': 'shop' })
  })

  test('values nested past 64 levels are 400 on the wire, as the JSON routes refuse them', () => {
    let value: object = { stringValue: 'deep' }
    for (let i = 0; i < 35; i++) value = { arrayValue: { values: [value] } }
    const body = encode(Logs, logsOf([], [{ body: value }]))
    expect(refusal(() => countMessages(Logs, body, 1_000_000)).slice(0, 2)).toEqual([400, 'invalid_payload'])
  })

  test('a malformed body is left to the decoder, which names why', () => {
    const [status, , message] = refusal(() =>
      decodeOtlp('logs', new Uint8Array([0x0a, 0xff, 0xff, 0x01, 0x00]), 'protobuf', LIMITS),
    )
    expect(status).toBe(400)
    expect(message).toContain('not a protobuf')
  })
})
