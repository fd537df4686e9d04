import type { TSchema } from '@sinclair/typebox'
import { invalidField } from '../../core/http'

/*
 * Two gaps in how Elysia 1.4 applies schemas, closed for this plugin's routes from a transform
 * hook (which runs on the raw input, before Elysia's own validation):
 *  - it normalizes bodies, silently dropping properties an `additionalProperties: false` object
 *    does not know, so a typo such as `targetting` would vanish instead of answering 400;
 *  - a query integer that fails its bounds is reported on a field named `property`.
 * Both read the constraints from the route's own schema, so nothing is restated here.
 */

type Schemaish = TSchema & {
  type?: string
  properties?: Record<string, TSchema>
  additionalProperties?: boolean
  items?: TSchema
  minimum?: number
  maximum?: number
  anyOf?: Schemaish[]
}

/** Throws 400 naming the first property that `schema` does not declare (closed objects only). */
export function rejectUnknown(schema: TSchema, value: unknown, path: string): void {
  const s = schema as Schemaish
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

/** Throws 400 naming the query parameter whose value is not an integer within the schema's bounds. */
export function checkQueryIntegers(schema: TSchema, query: Record<string, unknown>): void {
  const props = (schema as Schemaish).properties ?? {}
  for (const [k, p] of Object.entries(props)) {
    // Elysia rewrites a query integer in place into a union of a numeric string and the integer.
    const s =
      (p as Schemaish).type === 'integer'
        ? (p as Schemaish)
        : (p as Schemaish).anyOf?.find((b) => b.type === 'integer')
    const raw = query[k]
    if (!s || raw === undefined || raw === '') continue
    const n = Number(raw)
    const field = `query.${k}`
    if (!Number.isInteger(n)) throw invalidField(field, `must be an integer, got '${raw}'`)
    if (s.minimum !== undefined && n < s.minimum) throw invalidField(field, `must be at least ${s.minimum}`)
    if (s.maximum !== undefined && n > s.maximum) throw invalidField(field, `must be at most ${s.maximum}`)
  }
}
