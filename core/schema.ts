import { t } from 'elysia'
import type { TUnionEnum } from 'elysia/type-system/types'

/**
 * A string (or number) enum for request and response schemas. Elysia 1.4's `t.UnionEnum` gives
 * itself a `default` of its first member, so an absent optional field or query parameter was
 * filled with it (a game list filtered to `DEVELOPMENT`/`RPG`, a partial update resetting the
 * genre) and the OpenAPI description showed that default. This one has no default unless given.
 */
export function Enum<const V extends readonly [string, ...string[]] | readonly [number, ...number[]]>(
  values: V,
  options: { description?: string; default?: V[number] } = {},
): TUnionEnum<V> {
  // A key set to undefined would still count as a default for Elysia: the key must be absent.
  const { default: _, ...rest } = t.UnionEnum(values, options) as TUnionEnum<V> & { default?: unknown }
  return ('default' in options ? { ...rest, default: options.default } : rest) as TUnionEnum<V>
}

type Node = Record<string | symbol, unknown>
const isCoercedString = (s: unknown) =>
  !!s &&
  typeof s === 'object' &&
  (s as Node).type === 'string' &&
  ((s as Node).format === 'integer' || (s as Node).format === 'numeric')

/**
 * The schema as JSON sees it. Elysia's `t.Integer` and `t.Numeric` are a union of the number
 * and a numeric string (so query strings coerce); a JSON body or answer holds the number only, and
 * a string there is a client's mistake. This keeps the number branch everywhere, leaving every
 * other node (and TypeBox's kind symbols) as it is.
 */
export function jsonView<S>(schema: S): S {
  if (Array.isArray(schema)) return schema.map(jsonView) as S
  if (!schema || typeof schema !== 'object') return schema
  const s = schema as Node
  const branches = s.anyOf as unknown[] | undefined
  if (Array.isArray(branches) && branches.length === 2 && branches.some(isCoercedString)) {
    const number = branches.find((b) => !isCoercedString(b))
    return jsonView(number) as S
  }
  const out: Node = {}
  for (const k of Reflect.ownKeys(s)) out[k] = typeof k === 'symbol' ? s[k] : jsonView(s[k])
  return out as S
}

/**
 * The largest page number a list takes (the analytics lists' bound too): past about 2^63 / size
 * the offset left the engines' integers and the list answered 500 (PostgreSQL, SQLite).
 */
export const PAGE_MAX = 1_000_000

/** A list's `page` query parameter: 0- or 1-based, at most `PAGE_MAX`. */
export const PageNumber = (minimum: 0 | 1, description?: string) =>
  t.Integer({ minimum, maximum: PAGE_MAX, ...(description ? { description } : {}) })
