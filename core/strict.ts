import type { TSchema } from '@sinclair/typebox'
import { invalidField } from './http'

/*
 * Elysia 1.4 normalizes bodies, silently dropping properties an `additionalProperties: false`
 * object does not declare, so a typo such as `descripton` would vanish instead of answering 400.
 * Routes close that gap from a transform hook, which sees the raw input before Elysia does:
 *
 *   transform: ({ body }) => rejectUnknown(GameCreate, body, 'body')
 */

type Schemaish = TSchema & {
  type?: string
  properties?: Record<string, TSchema>
  additionalProperties?: boolean
  items?: TSchema
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
