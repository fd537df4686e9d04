import type { TSchema } from '@sinclair/typebox'
import { type TypeCheck, TypeCompiler } from '@sinclair/typebox/compiler'
import { Value } from '@sinclair/typebox/value'
import { type AnyElysia, Elysia, t } from 'elysia'
import { HttpError, Invalid, bodyTooLarge, invalidField, readBounded } from './http'
import { jsonView } from './schema'
import { missingReason, pointerToField, reasonOf } from './validation-reasons'

/*
 * Elysia 1.4 normalizes a body before it validates it: a JSON array, string or null sent where an
 * object is expected becomes `{}`, a string spreads into `{"0": ...}`, a wrongly typed nested
 * object of optional fields vanishes, and properties a closed object does not declare are
 * dropped silently. So every JSON body is checked here first, as it arrived, against its route's
 * schema, from a global transform hook: that runs after the auth guard's parse hook (401 and 403
 * come first) and before Elysia touches the body.
 */

type Schemaish = TSchema & {
  type?: string
  properties?: Record<string, TSchema>
  additionalProperties?: boolean
  items?: TSchema
}

/** How deep a JSON body may nest: deeper is 400, never a stack overflow in a check (a 500). */
export const MAX_JSON_DEPTH = 64

/** Why a body deeper than MAX_JSON_DEPTH is refused (after `body: `), the same on every route. */
export const TOO_DEEP = `nested deeper than ${MAX_JSON_DEPTH} levels`

/**
 * Whether `value` nests objects and arrays deeper than MAX_JSON_DEPTH (the value itself is level
 * 1). Walks without recursion, so no depth overflows it. Ingestion runs it on every batch: two
 * flat stacks and `for...in` walk a 100-event batch about twice as fast as `Object.values` with
 * a tuple per node (JSON.parse makes only own enumerable keys, so both see the same children).
 */
export function exceedsJsonDepth(value: unknown): boolean {
  if (value === null || typeof value !== 'object') return false
  const values: object[] = [value]
  const depths: number[] = [1]
  while (values.length) {
    const v = values.pop()!
    const depth = depths.pop()!
    if (depth > MAX_JSON_DEPTH) return true
    if (Array.isArray(v)) {
      for (let i = 0; i < v.length; i++) {
        const child = v[i]
        if (child !== null && typeof child === 'object') {
          values.push(child)
          depths.push(depth + 1)
        }
      }
    } else {
      for (const k in v) {
        const child = (v as Record<string, unknown>)[k]
        if (child !== null && typeof child === 'object') {
          values.push(child)
          depths.push(depth + 1)
        }
      }
    }
  }
  return false
}

/** Throws 400 when `value` nests objects and arrays deeper than MAX_JSON_DEPTH. */
export function checkDepth(value: unknown, field = 'body'): void {
  if (exceedsJsonDepth(value)) throw invalidField(field, TOO_DEEP)
}

/**
 * Throws 400 naming the first text (a value or a key) that holds U+0000. PostgreSQL's text cannot
 * store it (a notify's title, a login's email answered 500 there) and SQLite and MariaDB can, so
 * every engine refuses it alike, before a route runs. Recursive: bodies reach here after
 * `checkDepth`, so at most 64 levels.
 */
export function checkNul(value: unknown, field = 'body'): void {
  if (typeof value === 'string') {
    if (value.includes('\0')) throw invalidField(field, 'holds a NUL character (U+0000)')
    return
  }
  if (value === null || typeof value !== 'object') return
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) checkNul(value[i], `${field}[${i}]`)
    return
  }
  for (const k in value) {
    if (k.includes('\0')) throw invalidField(field, 'a key holds a NUL character (U+0000)')
    checkNul((value as Record<string, unknown>)[k], `${field}.${k}`)
  }
}

/** Throws 400 naming the first property that `schema` does not declare (closed objects only). */
export function rejectUnknown(schema: TSchema, value: unknown, path: string): void {
  const s = schema as Schemaish
  // TypeBox lets an array through an object whose fields are all optional.
  if (s.type === 'object' && Array.isArray(value))
    throw invalidField(path, 'must be a JSON object, not an array')
  if (s.type === 'object' && s.properties && value && typeof value === 'object' && !Array.isArray(value)) {
    for (const [k, v] of Object.entries(value)) {
      const child = s.properties[k]
      if (child) rejectUnknown(child, v, `${path}.${k}`)
      else if (s.additionalProperties === false) throw invalidField(`${path}.${k}`, 'unknown field')
    }
  } else if (s.type === 'array' && s.items && Array.isArray(value)) {
    value.forEach((item, i) => rejectUnknown(s.items!, item, `${path}[${i}]`))
  }
}

/** Throws 400 naming the first field of `value` that `check` refuses, with every issue in `details`. */
export function checkBody(check: TypeCheck<TSchema>, schema: TSchema, value: unknown): void {
  // Defaults the schema itself declares may fill what is absent; nothing else is coerced.
  // (The copy only where the schema has a default to fill: a body of 500,000 keys took 370 ms to copy.)
  const v =
    value !== null && typeof value === 'object' && declaresDefault(schema)
      ? Value.Default(schema, structuredClone(value))
      : value
  if (check.Check(v)) return
  // A POST without a body (none, or empty) says what it needs, once.
  const absent = value === undefined || value === ''
  const errors = absent
    ? [{ field: 'body', reason: missingReason({ path: '', schema, value: undefined }, true) ?? 'required' }]
    : firstErrors(check, v, 20).map((e) => ({
        field: ['body', pointerToField(e.path)].filter(Boolean).join('.'),
        reason: missingReason(e, true) ?? reasonOf(e),
      }))
  // One issue per field: a union reports its failure once per branch.
  const unique = [...new Map(errors.map((e) => [e.field, e])).values()]
  const first = unique[0] ?? { field: 'body', reason: 'invalid' }
  throw new Invalid(unique.map((e) => `${e.field}: ${e.reason}`).join('; ') || 'body: invalid', {
    field: first.field,
    reason: first.reason,
    errors: unique,
  })
}

/** The first `n` issues `check` finds, without listing the rest (one per unknown key of a huge body). */
function firstErrors(check: TypeCheck<TSchema>, value: unknown, n: number) {
  const out = []
  for (const e of check.Errors(value)) {
    out.push(e)
    if (out.length >= n) break
  }
  return out
}

const withDefaults = new WeakMap<TSchema, boolean>()
/** Whether a `default` is declared anywhere in `schema` (remembered per schema). */
function declaresDefault(schema: TSchema): boolean {
  let known = withDefaults.get(schema)
  if (known === undefined) {
    const walk = (s: unknown): boolean =>
      s !== null && typeof s === 'object' && ('default' in s || Object.values(s).some(walk))
    known = walk(schema)
    withDefaults.set(schema, known)
  }
  return known
}

export class UnsupportedMediaType extends HttpError {
  constructor(type: string) {
    super(
      415,
      'unsupported_media_type',
      `content-type '${type || '(none)'}' is not accepted: send application/json`,
    )
  }
}

type Route = { method: string; path: string; hooks: Record<string, unknown> }

/**
 * The body check `strictBodies` gives an Elysia route, for a raw request (a fast route, served
 * ahead of Elysia): over `limitBytes` 413 (by Content-Length before reading; a body without one
 * as soon as it passes the limit), a content type other than JSON 415,
 * malformed JSON 400 `body: malformed JSON`, then the schema check as it arrived (400 naming the
 * field). Returns the per-request reader; the schema is compiled once.
 */
export function jsonBodyReader<S extends TSchema>(
  schema: S,
  limitBytes: number,
  /**
   * A quicker test that admits only bodies the schema admits (hand-written for a hot route);
   * whatever it does not admit goes through the schema check, which names the field.
   */
  admit?: (body: unknown) => boolean,
) {
  const json = jsonView(schema)
  const check = TypeCompiler.Compile(json)
  return async (request: Request): Promise<S['static']> => {
    const declared = request.headers.get('content-length')
    if (declared !== null && Number(declared) > limitBytes) throw bodyTooLarge(limitBytes)
    const type = request.headers.get('content-type') ?? ''
    if (type && !isJson(type)) throw new UnsupportedMediaType(type)
    // A body without a length (chunked) is read up to the limit, as `listen` does for Elysia's.
    const bytes = declared === null ? await readBounded(request, limitBytes) : undefined
    if (bytes && bytes.byteLength > limitBytes) throw bodyTooLarge(limitBytes)
    let body: unknown
    try {
      body = bytes ? JSON.parse(new TextDecoder().decode(bytes)) : await request.json()
    } catch {
      throw new Invalid('body: malformed JSON')
    }
    // The valid body passes without checkBody's copy; a refused one gets its error.
    if (!admit?.(body) && !check.Check(body)) {
      checkDepth(body)
      checkBody(check, json, body)
    }
    return body as S['static']
  }
}

const isJson = (type: string) => {
  if (type === 'application/json') return true
  const t = type.split(';', 1)[0].trim().toLowerCase()
  return t === 'application/json' || (t.startsWith('application/') && t.endsWith('+json'))
}

/**
 * The JSON body schema of every route of `app` that declares one and leaves parsing to Elysia
 * (routes with `parse: 'none'` or `'text'` read their own bytes), by `METHOD /template`, as JSON
 * sees it (`jsonView`; secret marks kept).
 */
export function routeBodies(a: AnyElysia): Map<string, TSchema> {
  const out = new Map<string, TSchema>()
  const models = ((a as unknown as { definitions?: { type?: Record<string, TSchema> } }).definitions?.type ??
    {}) as Record<string, TSchema>
  for (const r of a.routes as unknown as Route[]) {
    const body = r.hooks.body as TSchema | string | undefined
    if (!body) continue
    const parse = (r.hooks.parse ?? []) as Array<{ fn: unknown }>
    if (parse.some((p) => typeof p.fn === 'string')) continue
    const schema = typeof body === 'string' ? models[body] : body
    if (schema) out.set(`${r.method} ${r.path}`, jsonView(schema))
  }
  return out
}

/**
 * The strict JSON body check for every route of `app` that declares a body schema and leaves
 * parsing to Elysia (routes with `parse: 'none'` read their own bytes: ingestion). A body in any
 * other content type answers 415.
 */
export function strictBodies(app: () => AnyElysia) {
  let table: Map<string, { schema: TSchema; check: TypeCheck<TSchema> }> | undefined
  const build = () =>
    new Map(
      [...routeBodies(app())].map(([key, schema]) => [key, { schema, check: TypeCompiler.Compile(schema) }]),
    )
  return new Elysia({ name: 'liveops.strict-bodies' }).onTransform(
    { as: 'global' },
    ({ request, route, body }) => {
      if (request.method === 'GET' || request.method === 'HEAD') return
      checkDepth(body)
      checkNul(body)
      table ??= build()
      const entry = table.get(`${request.method} ${route}`)
      if (!entry) return
      const type = request.headers.get('content-type') ?? ''
      if (type && !isJson(type)) throw new UnsupportedMediaType(type)
      checkBody(entry.check, entry.schema, body)
    },
  )
}

/**
 * A field of the resource's own read that an update accepts back unchanged (GET-modify-PUT):
 * identity and timestamps. Document it in the update schema with `ReadOnly()`.
 */
export const ReadOnly = (description = 'read-only: accepted when unchanged (GET-modify-PUT), else 400') =>
  t.Optional(t.Unknown({ description }))

/**
 * `body` without the read-only fields it echoed. A `fixed` field (id, name, createdAt) must equal
 * the current value, else 400 naming it; a `derived` one (updatedAt, apiKeys) is ignored, since it
 * changes on its own between the read and the write.
 */
export function withoutEchoed<T extends Record<string, unknown>>(
  current: object,
  body: T,
  fixed: readonly string[],
  derived: readonly string[] = [],
): T {
  const out: Record<string, unknown> = { ...body }
  for (const f of fixed) {
    if (!(f in body)) continue
    const now = (current as Record<string, unknown>)[f]
    if (JSON.stringify(body[f]) !== JSON.stringify(now))
      throw invalidField(`body.${f}`, `cannot change (read-only; it is ${JSON.stringify(now)})`)
    delete out[f]
  }
  for (const f of derived) delete out[f]
  return out as T
}
