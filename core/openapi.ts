import type { TSchema } from '@sinclair/typebox'
import { type AnyElysia, Elysia } from 'elysia'
import type { ErrorFamilies, ErrorFamily } from './http'

/*
 * @elysiajs/openapi 1.4 writes a document that the OpenAPI 3.1 schema refuses and that leaves
 * much out: a model used inline carries its `$id` each time (defined more than once), integers
 * are `anyOf` string-or-integer with `format: integer`, a body behind a parse hook (every
 * authenticated route) is documented with no content while others claim form and multipart, public
 * routes inherit the bearer requirement, and no error answer is described. This completes the
 * document from the routes themselves: their bodies, their auth macro (`permission`, `apiKey`,
 * `appScope`, none) and their API family's error body.
 */

type Json = Record<string, unknown>
type Route = { method: string; path: string; hooks: Record<string, unknown> }
type Operation = Json & { responses?: Record<string, Json>; parameters?: Json[]; requestBody?: Json }

const ERROR_SCHEMAS: Record<ErrorFamily, Json> = {
  general: {
    type: 'object',
    description: 'Spec 1 error body',
    required: ['error', 'message', 'timestamp', 'path'],
    properties: {
      error: { type: 'string', description: 'machine-readable code, for example bad_request, not_found' },
      message: { type: 'string', description: 'what went wrong, naming the field (`body.name: ...`)' },
      timestamp: { type: 'string', description: 'ISO 8601 UTC' },
      path: { type: 'string' },
      details: { description: 'for 400: {field, errors: [{field, reason}]}; for 429: {retry_after}' },
    },
  },
  analytics: {
    type: 'object',
    description: 'Server analytics error body',
    required: ['error', 'message', 'details'],
    properties: { error: { type: 'string' }, message: { type: 'string' }, details: {} },
  },
  envelope: {
    type: 'object',
    description: 'Spec 2/3 envelope: code is the HTTP status on error',
    required: ['code', 'message', 'data'],
    properties: { code: { type: 'integer' }, message: { type: 'string' }, data: {} },
  },
}
const ERROR_REF: Record<ErrorFamily, string> = {
  general: 'errors.General',
  analytics: 'errors.Analytics',
  envelope: 'errors.Envelope',
}

const isCoercedString = (s: unknown) =>
  !!s &&
  typeof s === 'object' &&
  (s as Json).type === 'string' &&
  ((s as Json).format === 'integer' || (s as Json).format === 'numeric')

/**
 * A JSON copy of a schema as the document shows it: numbers without Elysia's numeric-string
 * branch, no `$id` (inline copies of a model become `$ref`s), no TypeBox symbols.
 */
export function documented(schema: unknown, models: ReadonlySet<string>, top = true): unknown {
  if (Array.isArray(schema)) return schema.map((s) => documented(s, models, false))
  if (!schema || typeof schema !== 'object') return schema
  const s = schema as Json
  const id = typeof s.$id === 'string' ? s.$id.replace('#/components/schemas/', '') : undefined
  if (id && models.has(id) && !top) return { $ref: `#/components/schemas/${id}` }
  const branches = s.anyOf as unknown[] | undefined
  if (Array.isArray(branches) && branches.length === 2 && branches.some(isCoercedString)) {
    const { anyOf: _, ...outer } = s
    const number = branches.find((b) => !isCoercedString(b)) as Json
    return documented({ ...outer, ...number }, models, false)
  }
  const out: Json = {}
  for (const [k, v] of Object.entries(s)) {
    if (k === '$id') continue
    // core/secrets.ts's own keywords are not JSON Schema: published as extensions.
    if ((k === 'secret' && typeof v === 'string') || (k === 'destination' && v === true)) {
      out[`x-${k}`] = v
      continue
    }
    // Map keys that are data, not schema keywords, are copied as they are.
    out[k] =
      k === 'properties' || k === 'patternProperties' || k === '$defs'
        ? Object.fromEntries(Object.entries(v as Json).map(([n, x]) => [n, documented(x, models, false)]))
        : documented(v, models, false)
  }
  return out
}

function error(family: ErrorFamily, description: string): Json {
  return {
    description,
    content: { 'application/json': { schema: { $ref: `#/components/schemas/${ERROR_REF[family]}` } } },
  }
}

/** A route that declares no answer schema: its family's success body (a DELETE in spec 1 answers 204). */
function success(family: ErrorFamily, method: string): Record<string, Json> {
  if (family === 'envelope')
    return {
      '200': {
        description: 'Answered: the envelope, code 0 on success',
        content: {
          'application/json': {
            schema: {
              type: 'object',
              required: ['code', 'message', 'data'],
              properties: {
                code: {
                  type: 'integer',
                  description:
                    '0 on success; spec 2 POST /notify answers 422 here (HTTP 200) when every channel failed',
                },
                message: { type: 'string' },
                data: {},
              },
            },
          },
        },
      },
    }
  if (method === 'delete') return { '204': { description: 'Deleted; no body' } }
  return { '200': { description: 'Success', content: { 'application/json': { schema: {} } } } }
}

/** Completes one generated document; `routes` and `models` come from the app that serves it. */
export function completeDocument(doc: Json, routes: readonly Route[], families: ErrorFamilies): Json {
  const components = (doc.components ?? {}) as Json
  const schemas = (components.schemas ?? {}) as Record<string, unknown>
  const models = new Set(Object.keys(schemas))
  const byKey = new Map(
    routes.map((r) => [`${r.method.toLowerCase()} ${r.path.replace(/:(\w+)/g, '{$1}')}`, r]),
  )
  const paths: Record<string, Record<string, Operation>> = {}
  for (const [path, ops] of Object.entries((doc.paths ?? {}) as Record<string, Record<string, Operation>>)) {
    paths[path] = {}
    for (const [method, raw] of Object.entries(ops)) {
      const op = documented(raw, models, false) as Operation
      const route = byKey.get(`${method} ${path}`)
      const hooks = route?.hooks ?? {}
      const family = families.of(path)
      const detail = (hooks.detail ?? {}) as Json
      // A route's own documented answers (304, 409, ...) survive a response schema.
      const responses: Record<string, Json> = {
        ...((documented(detail.responses ?? {}, models, false) as Record<string, Json>) ?? {}),
        ...(op.responses ?? {}),
      }
      const body = hooks.body as TSchema | string | undefined
      const parse = (hooks.parse ?? []) as Array<{ fn: unknown }>
      const ownParser = parse.some((p) => typeof p.fn === 'string')
      if (body && !ownParser) {
        const schema =
          typeof body === 'string'
            ? { $ref: `#/components/schemas/${body}` }
            : documented(body, models, false)
        op.requestBody = { required: true, content: { 'application/json': { schema } } }
        responses['415'] ??= error(family, 'The body is not application/json')
        responses['413'] ??= error(family, 'The body is larger than the server accepts')
      } else if (op.requestBody && !detail.requestBody) {
        op.requestBody = undefined
      }
      if (detail.requestBody) {
        op.requestBody = documented(detail.requestBody, models, false) as Json
        responses['413'] ??= error(family, 'The body is larger than the server accepts')
      }
      // The auth guard's macros put the route's security in its detail; no macro: a public route.
      const sec = (detail.security as Json[] | undefined) ?? []
      op.security = sec
      if (body || detail.requestBody || op.parameters?.length)
        responses['400'] ??= error(family, 'Invalid input, naming the field')
      if (sec.length) {
        responses['401'] ??= error(family, 'Missing, invalid or expired credentials')
        responses['403'] ??= error(family, 'The credentials do not grant this operation')
        responses['429'] ??= error(family, 'Rate limit exceeded; Retry-After says when to retry')
      }
      if (op.parameters?.some((p) => p.in === 'path') || body || detail.requestBody)
        responses['404'] ??= error(family, 'Not found (the resource, or one the body names)')
      if (['post', 'put', 'patch', 'delete'].includes(method) && (sec.length || body))
        responses['409'] ??= error(
          family,
          "Conflicts with the resource's current state (the message says which)",
        )
      if (!Object.keys(responses).some((k) => /^[23]/.test(k)))
        Object.assign(responses, success(family, method))
      for (const [status, r] of Object.entries(responses)) {
        // An error a route declares by its description alone answers its family's body.
        if (Number(status) >= 400 && !r.content) responses[status] = { ...error(family, ''), ...r }
        if (!responses[status].description)
          responses[status] = { ...responses[status], description: `Status ${status}` }
      }
      op.responses = responses
      paths[path][method] = op
    }
  }
  // Each operation states its own security; nothing is inherited.
  const { security: _, ...rest } = doc
  const out: Json = { ...rest, paths }
  out.components = {
    ...components,
    schemas: {
      ...Object.fromEntries(Object.entries(schemas).map(([k, v]) => [k, documented(v, models, true)])),
      ...Object.fromEntries(
        Object.entries(ERROR_REF).map(([f, name]) => [name, ERROR_SCHEMAS[f as ErrorFamily]]),
      ),
    },
    securitySchemes: {
      ...((components.securitySchemes as Json) ?? {}),
      appToken: {
        type: 'apiKey',
        in: 'header',
        name: 'x-app-token',
        description: 'Spec 2 application token',
      },
    },
  }
  return out
}

/**
 * Wraps the OpenAPI plugin so that its JSON document is completed (once per route set) on its way
 * out. `app` is the root app, read when the document is asked for, so every plugin's routes count.
 */
export function apiDocs(docs: AnyElysia, app: () => AnyElysia, families: ErrorFamilies) {
  let source: unknown
  let done: Json | undefined
  return new Elysia({ name: 'liveops.api-docs' })
    .onAfterHandle(({ response }) => {
      if (!response || typeof response !== 'object' || response instanceof Response) return
      if (!('openapi' in response && 'paths' in response)) return
      if (response !== source || !done) {
        source = response
        done = completeDocument(response as Json, app().routes as unknown as Route[], families)
      }
      return done
    })
    .use(docs)
}
