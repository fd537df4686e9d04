import type { Environment } from '../games/types'
import type { NormEvent } from './validate'

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

const kindOf = (key: string): Kind | undefined => KINDS.find(([, re]) => re.test(key))?.[0]

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

/** Applies one level (top or attrs) of the policy in place; returns the first denied field. */
function scrub(
  obj: Obj,
  policy: Environment['settings'],
  allow: Set<string> | undefined,
  prefix: string,
): string | undefined {
  for (const key of Object.keys(obj)) {
    const kind = kindOf(key)
    const action = kind ? policy.pii[kind] : 'allow'
    if (action === 'deny') return `${prefix}${key}`
    if (action === 'drop' || (allow && !allow.has(key) && !RESERVED.has(key))) delete obj[key]
    else if (action === 'mask' && kind) obj[key] = mask(kind, obj[key])
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
  events.forEach((e, index) => {
    const settings = envs.get(`${e.gameId}\u0001${e.env}`)?.settings
    if (!settings) return void kept.push(e)
    const allow = settings.propertyAllowList.length ? new Set(settings.propertyAllowList) : undefined
    const noPii =
      settings.pii.email === 'allow' && settings.pii.phone === 'allow' && settings.pii.ip === 'allow'
    if (noPii && !allow) return void kept.push(e)
    const props: Obj = { ...e.props }
    const attrs =
      props.attrs && typeof props.attrs === 'object' && !Array.isArray(props.attrs)
        ? { ...(props.attrs as Obj) }
        : undefined
    const field =
      scrub(props, settings, allow, '') ?? (attrs ? scrub(attrs, settings, allow, 'attrs.') : undefined)
    if (field) {
      const kind = kindOf(field.replace(/^attrs\./, ''))
      return void denied.push({
        index,
        field,
        reason: `personal data (${kind}) is denied in environment '${e.env}'`,
      })
    }
    if (attrs) props.attrs = attrs
    kept.push({ ...e, props })
  })
  return { kept, denied }
}
