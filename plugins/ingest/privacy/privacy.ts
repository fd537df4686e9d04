import type { Environment } from '../../games/types'
import { type NormEvent, sameStreamAsPrevious, streamKey } from '../signed/validate'

type Obj = Record<string, unknown>
type Kind = 'email' | 'phone' | 'ip'

/** Property names that carry each kind of personal data, at top level or inside `attrs`. */
const KINDS: ReadonlyArray<[Kind, RegExp]> = [
  ['email', /^(e[-_]?mail|email[-_]?address|mail)$/i],
  ['phone', /^(phone|phone[-_]?number|mobile|msisdn|tel)$/i],
  ['ip', /^(ip|ip[-_]?addr(ess)?|client[-_]?ip|remote[-_]?addr)$/i],
]

/**
 * Fields the service itself reads (identity, hot columns, payments, experiments, invocations):
 * the allow-list never removes them, or rollups and analysis would break.
 */
const RESERVED = new Set([
  'event',
  'ts',
  'game_id',
  'env',
  'uid',
  'user_id',
  'session_id',
  'attrs',
  'event_id',
  'event_name',
  'event_type',
  'ts_client',
  'device_id',
  'environment',
  'order_id',
  'status',
  'amount_cents',
  'currency',
  'duration_ms',
  'durationMs',
  'network',
  'level',
  'exp',
  'variant',
  'functionId',
  'function_id',
  'actor',
  'outcome',
  'traceId',
  'trace_id',
])

const NONE = 'none'
/**
 * OpenTelemetry's attribute names of an address (semantic conventions, old and new), which an
 * OTLP log's attributes carry as they are; other dotted names are judged by their last part
 * (`user.email`, `client.ip`).
 */
const OTEL_ADDRESSES = new Set([
  'client.address',
  'source.address',
  'network.peer.address',
  'net.peer.ip',
  'net.sock.peer.addr',
  'http.client_ip',
])
/** Key name -> kind, remembered: a batch repeats the same few names. Bounded, as names come from clients. */
const kinds = new Map<string, Kind | typeof NONE>()
const kindOf = (key: string): Kind | undefined => {
  let k = kinds.get(key)
  if (k === undefined) {
    const last = key.slice(key.lastIndexOf('.') + 1)
    k = OTEL_ADDRESSES.has(key.toLowerCase())
      ? 'ip'
      : (KINDS.find(([, re]) => re.test(key) || (last !== key && re.test(last)))?.[0] ?? NONE)
    if (kinds.size < 10_000) kinds.set(key, k)
  }
  return k === NONE ? undefined : k
}

/** `jane.doe@example.com` -> `j***@example.com`; phones keep the last 4 digits; IPs lose the host part. */
export function mask(kind: Kind, value: unknown): unknown {
  if (typeof value !== 'string') return value === undefined || value === null ? value : '***'
  if (kind === 'email') {
    const at = value.lastIndexOf('@')
    return at > 0 ? `${value[0]}***${value.slice(at)}` : '***'
  }
  if (kind === 'phone') {
    const digits = value.replace(/\D/g, '')
    return digits.length > 4 ? `***${digits.slice(-4)}` : '***'
  }
  if (value.includes(':')) return `${value.split(':').slice(0, 3).join(':')}::`
  const parts = value.split('.')
  return parts.length === 4 ? `${parts.slice(0, 3).join('.')}.0` : '***'
}

export interface Denial {
  index: number
  field: string
  reason: string
}

type Policy = Environment['settings']

/** What the policy does with one property: keep it, refuse the event, drop it, or mask it as a kind. */
function actionFor(
  key: string,
  policy: Policy,
  allow: Set<string> | undefined,
): 'keep' | 'deny' | 'drop' | Kind {
  const kind = kindOf(key)
  const pii = kind ? policy.pii[kind] : 'allow'
  if (pii === 'deny') return 'deny'
  if (pii === 'drop' || (allow && !allow.has(key) && !RESERVED.has(key))) return 'drop'
  if (pii === 'mask' && kind) return kind
  return 'keep'
}

/** Below this many levels a nested value is left as it is (JSON bodies nest at most 64). */
const MAX_DEPTH = 64

interface Applied {
  /** The object or array with the policy applied: the same one when nothing changed (no copy). */
  out: unknown
  /** The path of the first field the policy refuses, and its kind. */
  denied?: { field: string; kind: Kind | undefined }
}

/**
 * The policy over one object: the allow-list (when given) at this level, the personal-data kinds
 * at every depth (a `profile.email`, an OTLP log's nested attributes), a nested object or array
 * copied only where something changes. The top level and `attrs` take the allow-list; deeper
 * levels only the kinds (the allow-list names an event's own fields).
 */
function apply(
  obj: Obj,
  policy: Policy,
  allow: Set<string> | undefined,
  path: string,
  depth: number,
): Applied {
  let out: Obj | undefined
  // for...in: no array of keys per object (JSON.parse makes own enumerable keys only); the
  // changes go to the copy, never to what is being walked.
  for (const key in obj) {
    const action = actionFor(key, policy, allow)
    if (action === 'deny') return { out: obj, denied: { field: `${path}${key}`, kind: kindOf(key) } }
    if (action === 'keep') {
      const v = obj[key]
      if (v === null || typeof v !== 'object' || depth >= MAX_DEPTH) continue
      const inner = depth === 0 && key === 'attrs' && !Array.isArray(v) ? allow : undefined
      const r = applyValue(v as object, policy, inner, `${path}${key}`, depth + 1)
      if (r.denied) return r
      if (r.out !== v) {
        out ??= { ...obj }
        out[key] = r.out
      }
      continue
    }
    out ??= { ...obj }
    if (action === 'drop') delete out[key]
    else out[key] = mask(action, obj[key])
  }
  return { out: out ?? obj }
}

/** `apply` for a nested value: an object, or each object of an array. */
function applyValue(
  v: object,
  policy: Policy,
  allow: Set<string> | undefined,
  path: string,
  depth: number,
): Applied {
  if (!Array.isArray(v)) return apply(v as Obj, policy, allow, `${path}.`, depth)
  let out: unknown[] | undefined
  for (let i = 0; i < v.length; i++) {
    const x = v[i]
    if (x === null || typeof x !== 'object' || depth >= MAX_DEPTH) continue
    const r = applyValue(x, policy, undefined, `${path}[${i}]`, depth + 1)
    if (r.denied) return r
    if (r.out !== x) {
      out ??= [...v]
      out[i] = r.out
    }
  }
  return { out: out ?? v }
}

/**
 * The environment's PII policy (email, phone, ip: allow, mask, drop, deny) and property
 * allow-list, applied to what is stored of each event. Hot columns and the service's own fields
 * are untouched. Events carrying a denied kind are returned as denials; the caller refuses them.
 */
export function protect(
  events: NormEvent[],
  envs: Map<string, Environment>,
): { kept: NormEvent[]; denied: Denial[] } {
  const kept: NormEvent[] = []
  const denied: Denial[] = []
  let settings: Policy | undefined
  let allow: Set<string> | undefined
  let noPii = true
  for (let index = 0; index < events.length; index++) {
    const e = events[index]
    // A run of events of one game and environment shares its policy.
    if (!sameStreamAsPrevious(events, index)) {
      settings = envs.get(streamKey(e.gameId, e.env))?.settings
      allow = settings?.propertyAllowList.length ? new Set(settings.propertyAllowList) : undefined
      noPii =
        !settings ||
        (settings.pii.email === 'allow' && settings.pii.phone === 'allow' && settings.pii.ip === 'allow')
    }
    if (!settings || (noPii && !allow)) {
      kept.push(e)
      continue
    }
    // Most events carry nothing the policy acts on: kept as they are, without copies.
    const r = apply(e.props, settings, allow, '', 0)
    if (r.denied) {
      denied.push({
        index,
        field: r.denied.field,
        reason: `personal data (${r.denied.kind}) is denied in environment '${e.env}'`,
      })
      continue
    }
    kept.push(r.out === e.props ? e : { ...e, props: r.out as Obj })
  }
  return { kept, denied }
}
