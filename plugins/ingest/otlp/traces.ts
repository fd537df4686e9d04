import { attributes } from '../otlp'
import { oversizedResource } from './bounds'

/**
 * OTLP spans (an ExportTraceServiceRequest in its JSON shape; protobuf is decoded to it first)
 * → `/v1/batch` items. A span of a function call becomes a `function.invoke` event, which the
 * writer also stores as an invocation row (spec 1's invocation analytics). Any other span is
 * refused by name in the answer's partial_success: traces carry no game events.
 *
 * A span is a function call when its own attributes say so: `faas.invoked_name` (the caller's
 * side), `faas.trigger` or `faas.invocation_id` (the function's side), or `function.id` /
 * `function_id` / `functionId`; or when its resource names a function (`faas.name`) and it is
 * that service's entry (a server span or a root span).
 */
type Obj = Record<string, unknown>
const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v)
const arr = (v: unknown): unknown[] => (Array.isArray(v) ? v : [])
const text = (v: unknown): string | undefined => (typeof v === 'string' && v !== '' ? v : undefined)

const SPAN_KIND_SERVER = 2
const STATUS_ERROR = 2

/** Which attribute names the function, in order of preference. */
const FUNCTION_KEYS = ['function_id', 'functionId', 'function.id', 'faas.invoked_name', 'faas.name']
const MARKERS = [
  'faas.invoked_name',
  'faas.trigger',
  'faas.invocation_id',
  'function.id',
  'function_id',
  'functionId',
]
/** Resource and span attributes that name the game, environment and user, as logs read them. */
const ALIASES: Array<[string, string[]]> = [
  ['game_id', ['game.id']],
  ['environment', ['env', 'deployment.environment.name', 'deployment.environment']],
  ['user_id', ['uid', 'user.id', 'enduser.id']],
  ['session_id', ['session.id']],
]

/** Nanoseconds (a decimal string or a number) as epoch milliseconds; undefined when absent or zero. */
function nanosToMs(v: unknown): number | undefined {
  if (typeof v !== 'string' && typeof v !== 'number') return undefined
  try {
    const n = BigInt(typeof v === 'number' ? Math.trunc(v) : v)
    return n > 0n ? Number(n / 1_000_000n) + Number(n % 1_000_000n) / 1e6 : undefined
  } catch {
    return undefined
  }
}

export interface DecodedItems {
  /** `/v1/batch` items, `null` where a rejected entry stands. */
  items: unknown[]
  rejected: Array<{ event_id: string; reason: string }>
}

/** The spans of a resource larger than `maxEventBytes` are `event_too_large`, unbuilt (each would carry all of it). */
export function otlpSpans(body: unknown, maxEventBytes: number): DecodedItems {
  const items: unknown[] = []
  const rejected: DecodedItems['rejected'] = []
  for (const rs of arr(isObj(body) ? body.resourceSpans : undefined)) {
    if (!isObj(rs)) continue
    const resource = attributes(isObj(rs.resource) ? rs.resource.attributes : undefined)
    const oversized = oversizedResource(resource, maxEventBytes)
    for (const ss of arr(rs.scopeSpans)) {
      for (const span of arr(isObj(ss) ? ss.spans : undefined)) {
        if (oversized) {
          rejected.push({ event_id: String(items.length), reason: 'event_too_large' })
          items.push(null)
          continue
        }
        if (!isObj(span)) {
          items.push(span)
          continue
        }
        const own = attributes(span.attributes)
        const traceId = text(span.traceId)
        const spanId = text(span.spanId)
        const entry = Number(span.kind) === SPAN_KIND_SERVER || !text(span.parentSpanId)
        const isCall =
          MARKERS.some((k) => own[k] !== undefined) || (resource['faas.name'] !== undefined && entry)
        if (!isCall) {
          rejected.push({
            event_id: String(items.length),
            reason: `span '${String(span.name ?? '')}': not a function call (no faas.invoked_name, faas.trigger, function.id or faas.name resource on its entry span); only function spans are kept`,
          })
          items.push(null)
          continue
        }
        const a: Obj = { ...resource, ...own }
        for (const [name, alts] of ALIASES)
          for (const alt of alts) if (a[name] === undefined && a[alt] !== undefined) a[name] = a[alt]
        const functionId = FUNCTION_KEYS.map((k) => a[k]).find((v) => text(v) !== undefined) ?? span.name
        const start = nanosToMs(span.startTimeUnixNano)
        const end = nanosToMs(span.endTimeUnixNano)
        const status = isObj(span.status) ? span.status : {}
        const failed = Number(status.code) === STATUS_ERROR || a['error.type'] !== undefined
        const event: Obj = {
          ...a,
          event_name: 'function.invoke',
          // A re-sent export stores its spans once (the dedup window of event ids).
          event_id: traceId && spanId ? `span:${traceId}:${spanId}` : undefined,
          ts_client: start === undefined ? undefined : Math.round(start),
          functionId: String(functionId),
          outcome: text(a.outcome) ?? (failed ? 'failure' : 'success'),
          actor: text(a.actor) ?? text(a['enduser.id']) ?? text(a.user_id),
          duration_ms:
            start !== undefined && end !== undefined && end >= start ? Math.round(end - start) : undefined,
          traceId,
          spanId,
          span_name: span.name,
        }
        if (failed && text(status.message)) event.error = status.message
        items.push(event)
      }
    }
  }
  return { items, rejected }
}
