import { type TSchema, Type } from '@sinclair/typebox'
import { invalidField } from './http'

/**
 * Secret settings are marked in their schema, and every read, log line and audit entry masks
 * what the schema marks: no list of field names decides what is secret.
 *
 * - `Secret(T.String())`: the whole value is secret ('set' plus its last 4 characters).
 * - `SecretUrl(T.String())`: a URL whose credentials (`user:password@`, the user too: a token is
 *   often the user with an empty password), path, query values (a key without a value: the key)
 *   and fragment are secret (chat webhooks carry their token in the path); scheme, host and port
 *   and the names of query values stay readable.
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

/**
 * Where the secrets beside it are sent (an SMTP host and port). A masked secret sent back keeps
 * the stored one only while every destination of its object (and every `SecretUrl`, which is
 * one too) is unchanged: otherwise the write is refused with "enter the secret again", so a
 * writer cannot point a channel at its own sink and receive the stored secret.
 */
export const Destination = <S extends TSchema>(schema: S): S => ({ ...schema, destination: true })
const isDestination = (schemas: TSchema[]) =>
  schemas.some((s) => (s as Record<string, unknown>).destination === true || secretKind(s) === 'url')

export function secretKind(schema: TSchema | undefined): SecretKind | undefined {
  return schema ? ((schema as Record<string, unknown>)[KEY] as SecretKind | undefined) : undefined
}

/** 'set' plus the last 4 characters of values long enough that 4 characters give nothing away. */
export function maskValue(v: unknown): string {
  if (v === undefined || v === null || v === '') return ''
  const s = String(v)
  return `set${s.length > 8 ? `:${s.slice(-4)}` : ''}`
}

/** A URL part as written, its escapes decoded when they decode. */
function decoded(part: string): string {
  try {
    return decodeURIComponent(part)
  } catch {
    return part
  }
}

/** One query entry masked: its value, or the key itself when it has none (`?TOKEN`). */
function maskEntry(k: string, val: string): string {
  const q = new URLSearchParams()
  if (val !== '') {
    q.append(k, maskValue(val))
    return q.toString()
  }
  q.append(maskValue(k), '')
  return q.toString().slice(0, -1)
}

/**
 * A URL with its user, password, path, query values (a key without a value: the key) and
 * fragment masked; text that is no URL is masked whole.
 */
export function maskUrl(v: unknown): unknown {
  if (typeof v !== 'string' || v === '') return v
  let u: URL
  try {
    u = new URL(v)
  } catch {
    return maskValue(v)
  }
  if (u.username) u.username = maskValue(decoded(u.username))
  if (u.password) u.password = maskValue(decoded(u.password))
  if (u.pathname.length > 1) u.pathname = `/${maskValue(u.pathname.slice(1))}`
  if (u.search.length > 1) u.search = [...u.searchParams].map(([k, val]) => maskEntry(k, val)).join('&')
  if (u.hash.length > 1) u.hash = maskValue(decoded(u.hash.slice(1)))
  return u.toString()
}

/**
 * Masks by the schema's mark alone: a value that looks like a reference (`$NAME`), a hash
 * (`$2b$12$...`) or anything else is masked all the same (issue 34 point 6).
 */
function maskAs(kind: SecretKind, v: unknown): unknown {
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
 * Whether `next` carries one of the masked parts of the stored URL `prev` (its user, password,
 * path, a query value or a key without one, its fragment).
 */
function carriesMaskedPart(next: unknown, prev: unknown): boolean {
  if (typeof next !== 'string' || typeof prev !== 'string') return false
  let n: URL
  let p: URL
  try {
    n = new URL(next)
    p = new URL(prev)
  } catch {
    return next === maskValue(prev)
  }
  const same = (np: string, pp: string) => pp !== '' && decoded(np) === maskValue(decoded(pp))
  if (same(n.username, p.username) || same(n.password, p.password)) return true
  if (p.pathname.length > 1 && n.pathname === `/${maskValue(p.pathname.slice(1))}`) return true
  if (same(n.hash.slice(1), p.hash.slice(1))) return true
  return [...p.searchParams].some(([k, v]) =>
    v === '' ? n.searchParams.has(maskValue(k)) : n.searchParams.getAll(k).includes(maskValue(v)),
  )
}

const againMessage =
  'enter the secret again: its destination changed, and a masked secret is kept only for the same one'

/**
 * `next` with every secret sent back as read (masked) replaced by the stored value in `prev`, so
 * GET-modify-PUT keeps secrets it did not mean to change. A masked secret is kept only while
 * its destinations are unchanged (`Destination`, `SecretUrl`): a changed URL or host with a
 * masked secret throws 400 naming the secret's field (`field` is the path of `next`).
 */
export function unmaskSecrets(
  schema: TSchema | TSchema[],
  next: unknown,
  prev: unknown,
  field = 'body',
): unknown {
  return unmask(Array.isArray(schema) ? schema : [schema], next, prev, field).value
}

interface Unmasked {
  value: unknown
  /** The fields whose stored secret was kept because the masked read was sent back. */
  kept: string[]
}

function unmask(schemas: TSchema[], next: unknown, prev: unknown, field: string): Unmasked {
  const kind = kindOf(schemas)
  if (kind === 'values' && next && typeof next === 'object' && prev && typeof prev === 'object') {
    const p = prev as Record<string, unknown>
    const kept: string[] = []
    const value = Object.fromEntries(
      Object.entries(next).map(([k, v]) => {
        if (p[k] === undefined || v !== maskValue(p[k])) return [k, v]
        kept.push(`${field}.${k}`)
        return [k, p[k]]
      }),
    )
    return { value, kept }
  }
  if (kind === 'url' && prev !== undefined) {
    const masked = maskAs(kind, prev)
    if (masked === next) return { value: prev, kept: masked === prev ? [] : [field] }
    if (carriesMaskedPart(next, prev)) throw invalidField(field, againMessage)
    return { value: next, kept: [] }
  }
  if (kind) {
    if (prev === undefined) return { value: next, kept: [] }
    const masked = maskAs(kind, prev)
    return JSON.stringify(masked) === JSON.stringify(next)
      ? { value: prev, kept: JSON.stringify(masked) === JSON.stringify(prev) ? [] : [field] }
      : { value: next, kept: [] }
  }
  if (!next || typeof next !== 'object' || Array.isArray(next)) return { value: next, kept: [] }
  const p = (prev && typeof prev === 'object' ? prev : {}) as Record<string, unknown>
  const kept: string[] = []
  const moved: string[] = []
  const value = Object.fromEntries(
    Object.entries(next).map(([k, v]) => {
      const child = schemas.flatMap((s) => childSchemas(s, k))
      const r = unmask(child, v, p[k], `${field}.${k}`)
      kept.push(...r.kept)
      if (isDestination(child) && prev !== undefined && JSON.stringify(r.value) !== JSON.stringify(p[k]))
        moved.push(k)
      return [k, r.value]
    }),
  )
  // A destination left out that was stored moves too (an explicit `security` dropped falls back
  // to the port's default, which may be none).
  if (prev !== undefined)
    for (const k of Object.keys(p))
      if (
        !(k in (next as object)) &&
        p[k] !== undefined &&
        isDestination(schemas.flatMap((s) => childSchemas(s, k)))
      )
        moved.push(k)
  if (kept.length && moved.length) throw invalidField(kept[0], againMessage)
  return { value, kept }
}

/** What an audit entry shows in place of a part of a body no schema property declares. */
export const NOT_RECORDED = '(not recorded)'

/** The schemas a property `key` of an object is declared by (its `properties`, in every branch). */
function declaredChildren(schema: TSchema, key: string): TSchema[] {
  const s = schema as Record<string, unknown>
  const out: TSchema[] = []
  for (const branch of (s.anyOf ?? s.oneOf ?? s.allOf ?? []) as TSchema[])
    out.push(...declaredChildren(branch, key))
  const props = s.properties as Record<string, TSchema> | undefined
  if (props?.[key]) out.push(props[key])
  return out
}

const declared = (s: TSchema) => {
  const x = s as Record<string, unknown>
  return typeof x.type === 'string' || 'anyOf' in x || 'oneOf' in x || 'const' in x || 'enum' in x
}

/**
 * What an audit entry keeps of a request body: every part its schema declares, with what the
 * schema marks secret masked. A part no property declares (a map's values, an unknown value)
 * is not recorded, since nothing says whether it holds a secret.
 */
export function auditView(schema: TSchema | TSchema[], value: unknown): unknown {
  const schemas = Array.isArray(schema) ? schema : [schema]
  const kind = kindOf(schemas)
  if (kind) return maskAs(kind, value)
  if (!schemas.some(declared)) return NOT_RECORDED
  if (Array.isArray(value))
    return value.map((v, i) =>
      auditView(
        schemas.flatMap((s) => childSchemas(s, i)),
        v,
      ),
    )
  if (value && typeof value === 'object')
    return Object.fromEntries(
      Object.entries(value).map(([k, v]) => {
        const children = schemas.flatMap((s) => declaredChildren(s, k))
        return [k, children.length ? auditView(children, v) : NOT_RECORDED]
      }),
    )
  return value
}

/** For docs and tests: a schema marked secret, built from a plain string schema. */
export const SecretString = (description?: string) => Secret(Type.String({ description }))
