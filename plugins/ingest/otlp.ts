import { oversizedResource } from './otlp/bounds'
import type { DecodedItems } from './otlp/traces'

/**
 * OTLP/HTTP logs in the JSON encoding (ExportLogsServiceRequest): each log record becomes one
 * event. Resource attributes are merged under the record's own; the event name is the
 * `event.name` (or `event`) attribute, else the string body.
 */
type Obj = Record<string, unknown>
const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v)
const arr = (v: unknown): unknown[] => (Array.isArray(v) ? v : [])

/** An OTLP AnyValue as a plain value. */
export function anyValue(v: unknown): unknown {
  if (!isObj(v)) return undefined
  if ('stringValue' in v) return v.stringValue
  if ('intValue' in v) return Number(v.intValue)
  if ('doubleValue' in v) return Number(v.doubleValue)
  if ('boolValue' in v) return v.boolValue
  if (isObj(v.arrayValue)) return arr(v.arrayValue.values).map(anyValue)
  if (isObj(v.kvlistValue)) return attributes(v.kvlistValue.values)
  return undefined
}

export function attributes(list: unknown): Obj {
  const out: Obj = {}
  for (const kv of arr(list)) if (isObj(kv) && typeof kv.key === 'string') out[kv.key] = anyValue(kv.value)
  return out
}

const ALIASES: Array<[string, string[]]> = [
  ['game_id', ['game.id']],
  ['environment', ['env', 'deployment.environment']],
  ['user_id', ['uid', 'user.id', 'enduser.id']],
  ['session_id', ['session.id']],
]

/**
 * Plain event objects in the `/v1/batch` item shape; a record that is not an object maps to a
 * rejection string. The records of a resource larger than `maxEventBytes` are refused as
 * `event_too_large` without being built (each would carry all of it).
 */
export function otlpRecords(body: unknown, maxEventBytes: number): DecodedItems {
  const out: unknown[] = []
  const rejected: DecodedItems['rejected'] = []
  for (const rl of arr(isObj(body) ? body.resourceLogs : undefined)) {
    if (!isObj(rl)) continue
    const resource = attributes(isObj(rl.resource) ? rl.resource.attributes : undefined)
    const oversized = oversizedResource(resource, maxEventBytes)
    for (const sl of arr(rl.scopeLogs)) {
      for (const rec of arr(isObj(sl) ? sl.logRecords : undefined)) {
        if (oversized) {
          rejected.push({ event_id: String(out.length), reason: 'event_too_large' })
          out.push(null)
          continue
        }
        if (!isObj(rec)) {
          out.push(rec)
          continue
        }
        const a: Obj = { ...resource, ...attributes(rec.attributes) }
        for (const [name, alts] of ALIASES)
          for (const alt of alts) if (a[name] === undefined && a[alt] !== undefined) a[name] = a[alt]
        const bodyValue = anyValue(rec.body)
        const name =
          a['event.name'] ??
          (rec.eventName || undefined) ??
          a.event ??
          (typeof bodyValue === 'string' ? bodyValue : undefined)
        const nanos = rec.timeUnixNano ?? rec.observedTimeUnixNano
        const ts = nanos !== undefined && Number(nanos) > 0 ? Math.round(Number(nanos) / 1e6) : undefined
        const event: Obj = { ...a, event_name: name, ts_client: ts }
        if (typeof rec.traceId === 'string' && rec.traceId) event.traceId ??= rec.traceId
        if (rec.severityText !== undefined) event.severity = rec.severityText
        out.push(event)
      }
    }
  }
  return { items: out, rejected }
}
