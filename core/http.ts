import { Elysia } from 'elysia'
import { type StorageFault, storageFault } from './db/faults'
import {
  type ValidationIssue,
  missingReason,
  pointerToField,
  queryFieldOf,
  reasonOf,
} from './validation-reasons'

// Where they were first defined; core/strict.ts, plugins and the tests read them here too.
export { missingReason, pointerToField, reasonOf }
export { clientIp, readBounded } from './request'

/**
 * Typed errors thrown by stores, services and macros. Routes never catch them: the one onError
 * below turns each into the error body of the API family the request belongs to.
 */
export class HttpError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly details?: unknown,
    readonly headers?: Record<string, string>,
  ) {
    // An answer, not a fault: capturing the stack would be the costliest part of a refusal.
    const limit = Error.stackTraceLimit
    Error.stackTraceLimit = 0
    super(message)
    Error.stackTraceLimit = limit
  }
}

export class Invalid extends HttpError {
  /** `field` is the path of the offending input, for example `body.config.variants[1].weight`. */
  constructor(message: string, details?: unknown, code = 'bad_request') {
    super(400, code, message, details)
  }
}
export class NotFound extends HttpError {
  constructor(message: string) {
    super(404, 'not_found', message)
  }
}
export class Conflict extends HttpError {
  constructor(message: string, details?: unknown) {
    super(409, 'conflict', message, details)
  }
}
export class Unauthorized extends HttpError {
  constructor(message = 'authentication required', code = 'unauthorized') {
    super(401, code, message)
  }
}
export class Forbidden extends HttpError {
  constructor(message = 'permission denied', code = 'forbidden') {
    super(403, code, message)
  }
}
export class TooManyRequests extends HttpError {
  constructor(message: string, retryAfterSeconds: number, code = 'rate_limit_exceeded', details?: unknown) {
    super(429, code, message, details ?? { retry_after: retryAfterSeconds }, {
      'retry-after': String(retryAfterSeconds),
    })
  }
}
export class ServiceUnavailable extends HttpError {
  /** `retryAfterSeconds`: when asking again may help; a part switched off by configuration says so in its message. */
  constructor(message: string, code = 'service_unavailable', retryAfterSeconds = 30) {
    super(503, code, message, undefined, { 'retry-after': String(retryAfterSeconds) })
  }
}

/** Seconds a client waits before retrying a request the store could not take (a probe runs every half second). */
export const STORE_RETRY_AFTER_S = 2

/** Shorthand used by stores: `invalidField('body.name', 'must not be blank')`. */
export function invalidField(field: string, reason: string): Invalid {
  return new Invalid(`${field}: ${reason}`, { field, reason })
}

/**
 * The error bodies of the API families sharing one server: `general` (spec 1 section 7:
 * `{error, message, timestamp, path}`), `analytics` (spec 1 server analytics: `{error, message,
 * details}`) and `envelope` (spec 2 and 3: `{code, message, data}`).
 */
export type ErrorFamily = 'general' | 'analytics' | 'envelope'

/**
 * Which family a path belongs to: the longest declared prefix wins, `general` when none matches.
 * Core declares `/api/v1/` (the enveloped notification and operations family); plugins declare
 * theirs in the manifest (`errors`).
 */
export class ErrorFamilies {
  private prefixes: Array<{ prefix: string; body: ErrorFamily }> = []
  /** Told of every store fault a request met (the database health check watches them). */
  onStorageFault: (fault: StorageFault) => void = () => undefined

  constructor(initial: ReadonlyArray<{ prefix: string; body: ErrorFamily }> = CORE_FAMILIES) {
    for (const f of initial) this.add(f.prefix, f.body)
  }

  add(prefix: string, body: ErrorFamily): void {
    const prev = this.prefixes.find((p) => p.prefix === prefix)
    if (prev && prev.body !== body)
      throw new Error(`error family of '${prefix}' declared as both '${prev.body}' and '${body}'`)
    if (!prev) this.prefixes.push({ prefix, body })
    this.prefixes.sort((a, b) => b.prefix.length - a.prefix.length)
  }

  of(path: string): ErrorFamily {
    for (const p of this.prefixes) if (path.startsWith(p.prefix)) return p.body
    return 'general'
  }
}

const CORE_FAMILIES = [{ prefix: '/api/v1/', body: 'envelope' as const }]
/** Core's prefixes alone: for code that answers before an app exists, and for core's own paths. */
export const coreFamilies = new ErrorFamilies()

/** `new Date().toISOString()`, made once per millisecond: a refusal storm asks many times in each. */
let isoAt = 0
let iso = ''
function nowIso(): string {
  const now = Date.now()
  if (now !== isoAt) {
    isoAt = now
    iso = new Date(now).toISOString()
  }
  return iso
}

export function errorBody(
  family: ErrorFamily,
  path: string,
  code: string,
  message: string,
  details?: unknown,
) {
  switch (family) {
    case 'analytics':
      return { error: code, message, details: details ?? null }
    case 'envelope':
      return { code: 0, message, data: details ?? null }
    default:
      return details === undefined
        ? { error: code, message, timestamp: nowIso(), path }
        : { error: code, message, timestamp: nowIso(), path, details }
  }
}

/** Copied by every Response made with it (half the cost of a plain object). */
const JSON_HEADERS = new Headers({ 'content-type': 'application/json' })

function errorResponse(
  families: ErrorFamilies,
  path: string,
  status: number,
  code: string,
  message: string,
  details?: unknown,
  headers?: Record<string, string>,
) {
  const family = families.of(path)
  const body = errorBody(family, path, code, message, details)
  if (family === 'envelope') (body as { code: number }).code = status
  // Every 503 says when to ask again (RFC 9110 15.6.4); the ones that know pass their own.
  const extra =
    status === 503 && !headers?.['retry-after']
      ? { ...headers, 'retry-after': String(STORE_RETRY_AFTER_S) }
      : headers
  return new Response(JSON.stringify(body), {
    status,
    headers: extra ? { 'content-type': 'application/json', ...extra } : JSON_HEADERS,
  })
}

/** The error body of a thrown HttpError, or a 500 for anything else (logged). */
export function httpErrorResponse(path: string, error: unknown, families = coreFamilies): Response {
  if (error instanceof HttpError)
    return errorResponse(
      families,
      path,
      error.status,
      error.code,
      error.message,
      error.details,
      error.headers,
    )
  // An error that says its 4xx status (the store refusing a NUL, a library's own): answered as
  // such, on fast routes as Elysia's mapping does on the others.
  const status = (error as { status?: unknown } | undefined)?.status
  if (typeof status === 'number' && status >= 400 && status < 500)
    return errorResponse(families, path, status, 'bad_request', (error as Error).message || 'bad request')
  const fault = storageFault(error)
  if (fault) {
    logUnexpected(`storage fault: ${fault.cause}: ${fault.detail}`, path)
    families.onStorageFault(fault)
    return errorResponse(families, path, 503, 'storage_unavailable', `storage unavailable: ${fault.cause}`)
  }
  logUnexpected(error, path)
  return errorResponse(families, path, 500, 'internal_error', 'internal server error')
}

function logUnexpected(error: unknown, path: string) {
  console.error(
    JSON.stringify({
      timestamp: new Date().toISOString(),
      level: 'error',
      component: 'http',
      msg: String((error as Error)?.stack ?? error),
      path,
    }),
  )
}

function validationResponse(families: ErrorFamilies, url: URL, error: unknown) {
  const path = url.pathname
  const e = error as {
    type?: string
    all?: ValidationIssue[]
    valueError?: ValidationIssue
    message?: string
    value?: unknown
  }
  // An answer that fails its own schema is the server's fault (bad stored data, a handler bug):
  // a 500, logged with where it failed, and nothing of it told to the caller.
  if (e.type === 'response') {
    const where = (e.all ?? (e.valueError ? [e.valueError] : []))
      .slice(0, 5)
      .map((i) => `response${i.path ? `.${pointerToField(i.path)}` : ''}: ${i.message ?? 'invalid'}`)
    logUnexpected(`response validation failed: ${where.join('; ') || 'invalid'}`, path)
    return errorResponse(families, path, 500, 'internal_error', 'internal server error')
  }
  const where =
    (e.type === 'property' ? queryFieldOf(url, e.value) : undefined) ??
    (e.type === 'property' ? 'query' : (e.type ?? 'body'))
  const issues = (e.all ?? (e.valueError ? [e.valueError] : [])).map((i) => {
    const field = [where, pointerToField(i.path)].filter(Boolean).join('.')
    return { field, reason: missingReason(i, where === 'body') ?? reasonOf(i) }
  })
  // One issue per field: TypeBox reports a union failure once per branch.
  const unique = [...new Map(issues.map((i) => [i.field, i])).values()]
  const first = unique[0] ?? { field: where, reason: 'invalid' }
  const message = unique.length
    ? unique.map((i) => `${i.field}: ${i.reason}`).join('; ')
    : `${where}: invalid`
  return errorResponse(families, path, 400, 'bad_request', message, { field: first.field, errors: unique })
}

/**
 * The one error mapping, made per app with the app's families. Registered before every plugin so
 * it covers them all.
 */
export function errorHandler(
  families: ErrorFamilies,
  routes: () => ReadonlyArray<{ method: string; path: string }> = () => [],
) {
  const respond = (
    path: string,
    status: number,
    code: string,
    message: string,
    headers?: Record<string, string>,
  ) => errorResponse(families, path, status, code, message, undefined, headers)
  let templates: Array<{ method: string; re: RegExp }> | undefined
  /** The methods some route answers on `path`: a known path asked with another method is a 405. */
  const allowed = (path: string) => {
    templates ??= routes().map((r) => ({
      method: r.method,
      re: new RegExp(
        `^${r.path
          .split('/')
          .map((seg) =>
            seg === '*' ? '.*' : seg.startsWith(':') ? '[^/]+' : seg.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'),
          )
          .join('/')}/?$`,
      ),
    }))
    return [...new Set(templates.filter((t) => t.re.test(path)).map((t) => t.method))].filter(
      (m) => m !== 'ALL',
    )
  }
  const answer = ({
    code,
    error,
    request,
  }: { code: unknown; error: unknown; request: Request }): Response => {
    const path = new URL(request.url).pathname
    if (error instanceof HttpError) return httpErrorResponse(path, error, families)
    // A refusal thrown by the auth guard's parse hook reaches here wrapped in a ParseError.
    const cause = (error as { cause?: unknown }).cause
    if (code === 'PARSE' && cause instanceof HttpError) return httpErrorResponse(path, cause, families)
    switch (code) {
      case 'VALIDATION':
        return validationResponse(families, new URL(request.url), error)
      case 'PARSE': {
        // Elysia tried the parser of a content type we do not take (forms, multipart, text).
        const type = request.headers.get('content-type') ?? ''
        const media = type.split(';', 1)[0].trim().toLowerCase()
        if (media && media !== 'application/json' && !media.endsWith('+json'))
          return respond(
            path,
            415,
            'unsupported_media_type',
            `content-type '${media}' is not accepted: send application/json`,
          )
        return respond(path, 400, 'bad_request', 'body: malformed JSON')
      }
      case 'NOT_FOUND': {
        const methods = allowed(path)
        if (methods.length && !methods.includes(request.method))
          return respond(
            path,
            405,
            'method_not_allowed',
            `${request.method} is not allowed on ${path}; allowed: ${methods.join(', ')}`,
            { allow: methods.join(', ') },
          )
        return respond(path, 404, 'not_found', `no route for ${request.method} ${path}`)
      }
      case 'INVALID_COOKIE_SIGNATURE':
        return respond(path, 401, 'unauthorized', 'invalid cookie')
    }
    // Anything else, an error's own 4xx status included, as on fast routes.
    return httpErrorResponse(path, error, families)
  }
  return new Elysia({ name: 'liveops.errors' })
    .error({ HttpError })
    .onError({ as: 'global' }, ({ code, error, request, set }) => {
      const res = answer({ code, error, request })
      // The after-response hooks (request metrics, http.write) read the status here: a refusal
      // from the guard's parse hook would otherwise count as the parse error's 400.
      set.status = res.status
      return res
    })
}

/** The enveloped success body of the `/api/v1` notification and operations family. */
export function ok<T>(data: T, message = 'ok') {
  return { code: 0, message, data }
}

export interface Page<T> {
  items: T[]
  total: number
  page: number
  size: number
}

/**
 * Parses `sort=field,asc|desc` against a whitelist of sortable fields mapped to columns.
 * Unknown fields or directions answer 400 naming `query.sort`.
 */
export function parseSort(
  sort: string | undefined,
  columns: Record<string, string>,
  fallback: string,
): string {
  if (!sort) return fallback
  const [field, dir = 'asc'] = sort.split(',').map((s) => s.trim())
  // Own properties only: `columns[field]` would also find `constructor`, `__proto__`, `toString`
  // and the like on the prototype and put a function's source into ORDER BY (a 500).
  const column = Object.hasOwn(columns, field) ? columns[field] : undefined
  if (!column)
    throw invalidField(
      'query.sort',
      `unknown field '${field}', expected one of ${Object.keys(columns).join(', ')}`,
    )
  const d = dir.toLowerCase()
  if (d !== 'asc' && d !== 'desc')
    throw invalidField('query.sort', `direction must be asc or desc, got '${dir}'`)
  return `${column} ${d.toUpperCase()}`
}

/** The 413 of a body over `server.body_limit_mb` (`limit` bytes), for Elysia and native routes alike. */
export const bodyTooLarge = (limit: number) =>
  new HttpError(413, 'body_too_large', `the body is over the limit of ${limit} bytes`, { limit })
