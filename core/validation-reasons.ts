/**
 * What a failed validation says, in words an API user can act on: the field (a TypeBox pointer as
 * `config.variants[0].weight`, a query parameter by name) and the reason (`required`, the values
 * of an enum, `unknown field`). Used by core/http.ts's error mapping and core/strict.ts.
 */

export type ValidationIssue = {
  path?: string
  message?: string
  summary?: string
  schema?: unknown
  value?: unknown
}

/**
 * A value that is not there is `required` (not TypeBox's "Expected string"); a missing body says
 * what it needs: a JSON object and its required fields.
 */
export function missingReason(i: ValidationIssue, isBody: boolean): string | undefined {
  if (!('value' in i) || i.value !== undefined) return undefined
  const s = i.schema as { type?: string; required?: string[] } | undefined
  if (isBody && !i.path && s?.type === 'object')
    return s.required?.length
      ? `required: a JSON object with ${s.required.join(', ')}`
      : 'required: a JSON object (content-type: application/json)'
  if (isBody && !i.path && s?.type === 'array') return 'required: a JSON array'
  return 'required'
}

/** The reason a value failed, in words an API user can act on (enums name their values). */
export function reasonOf(e: { message?: string; summary?: string; schema?: unknown }): string {
  const s = e.schema as { enum?: unknown[]; anyOf?: Array<{ const?: unknown }> } | undefined
  if (s && Array.isArray(s.enum)) return `must be one of ${s.enum.map((v) => JSON.stringify(v)).join(', ')}`
  // A union of literals (t.Union([t.Literal('a'), ...])) is an enum too.
  if (s && Array.isArray(s.anyOf) && s.anyOf.length && s.anyOf.every((b) => b && 'const' in b))
    return `must be one of ${s.anyOf.map((b) => JSON.stringify(b.const)).join(', ')}`
  if (e.message === 'Unexpected property') return 'unknown field'
  return e.message ?? e.summary ?? 'invalid'
}

/** Turns a TypeBox JSON pointer (`/config/variants/0/weight`) into `config.variants[0].weight`. */
export function pointerToField(pointer: string | undefined): string {
  if (!pointer) return ''
  return pointer
    .split('/')
    .filter(Boolean)
    .map((part, i) => (/^\d+$/.test(part) ? `[${part}]` : i === 0 ? part : `.${part}`))
    .join('')
}

/**
 * Elysia 1.4 validates each coerced query parameter on its own (type `property`) and forgets its
 * name; the value it found is kept, so the name is recovered from the query string. A number is
 * matched by value too: `page=99999999999999999999` or `1e20` was coerced to 1e20, whose text
 * differs from what was sent.
 */
export function queryFieldOf(url: URL, found: unknown): string | undefined {
  if (found === undefined) return undefined
  const same = (v: string) =>
    v === String(found) || (typeof found === 'number' && v.trim() !== '' && Number(v) === found)
  const keys = [...url.searchParams].filter(([, v]) => same(v)).map(([k]) => k)
  return keys.length === 1 ? `query.${keys[0]}` : undefined
}
