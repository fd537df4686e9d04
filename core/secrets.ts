import { type TSchema, Type } from '@sinclair/typebox'

/**
 * Secret settings are marked in their schema, and every read, log line and audit entry masks
 * what the schema marks: no list of field names decides what is secret.
 *
 * - `Secret(T.String())`: the whole value is secret ('set' plus its last 4 characters).
 * - `SecretUrl(T.String())`: a URL whose credentials (`user:password@`) and query values are
 *   secret; scheme, host and path stay readable.
 * - `SecretValues(T.Record(T.String(), T.String()))`: a map whose every value is secret (HTTP
 *   headers: `X-Api-Key`, `Authorization`, signing secrets).
 */
export type SecretKind = 'value' | 'url' | 'values'
const KEY = 'secret'

function mark<S extends TSchema>(schema: S, kind: SecretKind): S {
  return { ...schema, [KEY]: kind }
}
export const Secret = <S extends TSchema>(schema: S): S => mark(schema, 'value')
export const SecretUrl = <S extends TSchema>(schema: S): S => mark(schema, 'url')
export const SecretValues = <S extends TSchema>(schema: S): S => mark(schema, 'values')

export function secretKind(schema: TSchema | undefined): SecretKind | undefined {
  return schema ? ((schema as Record<string, unknown>)[KEY] as SecretKind | undefined) : undefined
}

/** 'set' plus the last 4 characters of values long enough that 4 characters give nothing away. */
export function maskValue(v: unknown): string {
  if (v === undefined || v === null || v === '') return ''
  const s = String(v)
  return `set${s.length > 8 ? `:${s.slice(-4)}` : ''}`
}

/** A URL with its password and query values masked; text that is no URL is masked whole. */
export function maskUrl(v: unknown): unknown {
  if (typeof v !== 'string' || v === '') return v
  // A `$VAR` reference is shown as written: it names a variable, it holds no secret.
  if (v.startsWith('$')) return v
  let u: URL
  try {
    u = new URL(v)
  } catch {
    return maskValue(v)
  }
  if (u.password) u.password = maskValue(decodeURIComponent(u.password))
  for (const [k, val] of [...u.searchParams]) u.searchParams.set(k, maskValue(val))
  return u.toString()
}

function maskAs(kind: SecretKind, v: unknown): unknown {
  if (typeof v === 'string' && v.startsWith('$')) return v
  switch (kind) {
    case 'url':
      return maskUrl(v)
    case 'values':
      return v && typeof v === 'object' && !Array.isArray(v)
        ? Object.fromEntries(Object.entries(v).map(([k, x]) => [k, maskAs('value', x)]))
        : maskValue(v)
    default:
      return v && typeof v === 'object' ? maskValue(JSON.stringify(v)) : maskValue(v)
  }
}

/** The schemas a value at `key` of an object could be checked against. */
function childSchemas(schema: TSchema, key: string | number): TSchema[] {
  const s = schema as Record<string, unknown>
  const out: TSchema[] = []
  for (const branch of (s.anyOf ?? s.oneOf ?? s.allOf ?? []) as TSchema[])
    out.push(...childSchemas(branch, key))
  if (typeof key === 'number') {
    if (s.items && !Array.isArray(s.items)) out.push(s.items as TSchema)
    return out
  }
  const props = s.properties as Record<string, TSchema> | undefined
  if (props?.[key]) out.push(props[key])
  const patterns = s.patternProperties as Record<string, TSchema> | undefined
  if (patterns) for (const [re, p] of Object.entries(patterns)) if (new RegExp(re).test(key)) out.push(p)
  if (s.additionalProperties && typeof s.additionalProperties === 'object')
    out.push(s.additionalProperties as TSchema)
  return out
}

function kindOf(schemas: TSchema[]): SecretKind | undefined {
  for (const s of schemas) {
    const k = secretKind(s)
    if (k) return k
  }
  return undefined
}

/**
 * A copy of `value` with every part its schema marks secret masked. Walks objects, records,
 * arrays and unions (a key is secret when any branch marks it).
 */
export function maskSecrets(schema: TSchema | TSchema[], value: unknown): unknown {
  const schemas = Array.isArray(schema) ? schema : [schema]
  const kind = kindOf(schemas)
  if (kind) return maskAs(kind, value)
  if (Array.isArray(value))
    return value.map((v, i) =>
      maskSecrets(
        schemas.flatMap((s) => childSchemas(s, i)),
        v,
      ),
    )
  if (value && typeof value === 'object')
    return Object.fromEntries(
      Object.entries(value).map(([k, v]) => [
        k,
        maskSecrets(
          schemas.flatMap((s) => childSchemas(s, k)),
          v,
        ),
      ]),
    )
  return value
}

/**
 * `next` with every secret that was sent back exactly as read (masked) replaced by the stored
 * value in `prev`, so GET-modify-PUT keeps secrets it did not mean to change.
 */
export function unmaskSecrets(schema: TSchema | TSchema[], next: unknown, prev: unknown): unknown {
  const schemas = Array.isArray(schema) ? schema : [schema]
  const kind = kindOf(schemas)
  if (kind === 'values' && next && typeof next === 'object' && prev && typeof prev === 'object') {
    const p = prev as Record<string, unknown>
    return Object.fromEntries(
      Object.entries(next).map(([k, v]) => [k, p[k] !== undefined && v === maskValue(p[k]) ? p[k] : v]),
    )
  }
  if (kind)
    return prev !== undefined && JSON.stringify(maskAs(kind, prev)) === JSON.stringify(next) ? prev : next
  if (next && typeof next === 'object' && !Array.isArray(next)) {
    const p = (prev && typeof prev === 'object' ? prev : {}) as Record<string, unknown>
    return Object.fromEntries(
      Object.entries(next).map(([k, v]) => [
        k,
        unmaskSecrets(
          schemas.flatMap((s) => childSchemas(s, k)),
          v,
          p[k],
        ),
      ]),
    )
  }
  return next
}

/** For docs and tests: a schema marked secret, built from a plain string schema. */
export const SecretString = (description?: string) => Secret(Type.String({ description }))
