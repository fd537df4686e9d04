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
/** Key name -> kind, remembered: a batch repeats the same few names. Bounded, as names come from clients. */
const kinds = new Map<string, Kind | typeof NONE>()
const kindOf = (key: string): Kind | undefined => {
  let k = kinds.get(key)
  if (k === undefined) {
    k = KINDS.find(([, re]) => re.test(key))?.[0] ?? NONE
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

/** Whether applying the policy to one level (top or attrs) would change or refuse anything. */
function touches(obj: Obj, policy: Policy, allow: Set<string> | undefined): boolean {
  for (const key in obj) if (actionFor(key, policy, allow) !== 'keep') return true
  return false
}

/** Applies one level (top or attrs) of the policy in place; returns the first denied field. */
function scrub(obj: Obj, policy: Policy, allow: Set<string> | undefined, prefix: string): string | undefined {
  for (const key of Object.keys(obj)) {
    const action = actionFor(key, policy, allow)
    if (action === 'deny') return `${prefix}${key}`
    if (action === 'drop') delete obj[key]
    else if (action !== 'keep') obj[key] = mask(action, obj[key])
  }
  return undefined
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
    const nested =
      e.props.attrs && typeof e.props.attrs === 'object' && !Array.isArray(e.props.attrs)
        ? (e.props.attrs as Obj)
        : undefined
    // Most events carry nothing the policy acts on: kept as they are, without copies.
    if (!touches(e.props, settings, allow) && !(nested && touches(nested, settings, allow))) {
      kept.push(e)
      continue
    }
    const props: Obj = { ...e.props }
    const attrs = nested ? { ...nested } : undefined
    const field =
      scrub(props, settings, allow, '') ?? (attrs ? scrub(attrs, settings, allow, 'attrs.') : undefined)
    if (field) {
      const kind = kindOf(field.replace(/^attrs\./, ''))
      denied.push({
        index,
        field,
        reason: `personal data (${kind}) is denied in environment '${e.env}'`,
      })
      continue
    }
    if (attrs) props.attrs = attrs
    kept.push({ ...e, props })
  }
  return { kept, denied }
}
