import { Elysia } from 'elysia'

/**
 * Cross-origin access for browsers. SDK-facing routes (the prefixes plugins list as `anyOrigin`:
 * ingestion, `/v1/batch`, public config) carry their own credentials (an API key, a signature or
 * nothing) and never cookies, so any origin may call them: `Access-Control-Allow-Origin: *`.
 * Operator routes answer only the origins of `server.cors_origins` (`*` there allows every one),
 * echoing the origin with `Vary: Origin`.
 */
export class CorsPolicy {
  private anyOrigin: string[] = []
  private origins: Set<string>
  private everyOrigin: boolean

  constructor(origins: readonly string[]) {
    this.origins = new Set(origins.map((o) => o.toLowerCase()))
    this.everyOrigin = this.origins.has('*')
  }

  /** Paths (a trailing `/` or `*` makes a prefix) that any origin may call. */
  allowAnyOrigin(paths: readonly string[]): void {
    this.anyOrigin.push(...paths.map((p) => (p.endsWith('*') ? p.slice(0, -1) : p)))
  }

  isPublic(path: string): boolean {
    return this.anyOrigin.some((p) => (p.endsWith('/') ? path.startsWith(p) : path === p))
  }

  /** The Access-Control-Allow-Origin value for `origin` on `path`, or undefined when refused. */
  allowed(path: string, origin: string | null): string | undefined {
    if (this.isPublic(path)) return '*'
    if (!origin) return undefined
    if (this.everyOrigin || this.origins.has(origin.toLowerCase())) return origin
    return undefined
  }

  /** Headers every answer to a cross-origin request carries. */
  headers(path: string, origin: string | null): Record<string, string> | undefined {
    const allow = this.allowed(path, origin)
    if (!allow) return undefined
    const h: Record<string, string> = {
      'access-control-allow-origin': allow,
      'access-control-expose-headers': EXPOSED,
    }
    if (allow !== '*') h.vary = 'Origin'
    return h
  }

  /**
   * The answer to a preflight: 204, with the allow headers when the origin may call the path
   * (the browser then sends the request) and without them when it may not (the browser stops).
   */
  preflight(path: string, request: Request): Response {
    const origin = request.headers.get('origin')
    const base = this.headers(path, origin)
    const headers: Record<string, string> = { vary: 'Origin, Access-Control-Request-Headers' }
    if (base) {
      Object.assign(headers, base, {
        'access-control-allow-methods': 'GET, HEAD, POST, PUT, PATCH, DELETE',
        'access-control-allow-headers': request.headers.get('access-control-request-headers') ?? '',
        'access-control-max-age': '600',
      })
    }
    return new Response(null, { status: 204, headers })
  }
}

/** Answer headers a page's script may read (rate limits, retry hints, caching, pagination). */
const EXPOSED =
  'Retry-After, ETag, X-RateLimit-Limit, X-RateLimit-Remaining, X-RateLimit-Reset, Content-Disposition, Location'

const isPreflight = (r: Request) => r.method === 'OPTIONS' && r.headers.has('access-control-request-method')

/** JSON answers at least this large are gzipped for clients that accept it. */
export const GZIP_MIN_BYTES = 1024

const acceptsGzip = (r: Request) => /\bgzip\b/i.test(r.headers.get('accept-encoding') ?? '')

/** Gzips a JSON body for a client that accepts it; anything else passes through untouched. */
export function gzipJson(
  request: Request,
  body: string | Uint8Array<ArrayBuffer>,
  headers: Record<string, string>,
): Response {
  const bytes = typeof body === 'string' ? new TextEncoder().encode(body) : body
  if (bytes.byteLength < GZIP_MIN_BYTES || !acceptsGzip(request)) return new Response(bytes, { headers })
  return new Response(Bun.gzipSync(bytes), {
    headers: { ...headers, 'content-encoding': 'gzip', vary: varyWith(headers.vary, 'Accept-Encoding') },
  })
}

const varyWith = (vary: string | undefined, add: string) => (vary ? `${vary}, ${add}` : add)

/**
 * The HTTP edge of every Elysia route: preflights answered before routing (so an OPTIONS never
 * meets a 404 or an auth check), CORS headers on every answer, and gzip for large JSON answers.
 */
export function edge(cors: CorsPolicy) {
  return new Elysia({ name: 'liveops.edge' })
    .onRequest(({ request, set }) => {
      const path = pathOf(request.url)
      if (isPreflight(request)) return cors.preflight(path, request)
      const h = cors.headers(path, request.headers.get('origin'))
      if (h) Object.assign(set.headers, h)
    })
    .mapResponse({ as: 'global' }, async ({ request, responseValue, set }) => {
      if (!acceptsGzip(request)) return
      if (responseValue instanceof Response) {
        const type = responseValue.headers.get('content-type') ?? ''
        if (!type.includes('json') || responseValue.headers.has('content-encoding') || !responseValue.body)
          return
        const bytes = new Uint8Array(await responseValue.arrayBuffer())
        const headers: Record<string, string> = {}
        responseValue.headers.forEach((v, k) => {
          headers[k] = v
        })
        for (const [k, v] of Object.entries(set.headers)) if (typeof v === 'string') headers[k] ??= v
        const out = gzipJson(request, bytes, headers)
        return new Response(out.body, { status: responseValue.status, headers: out.headers })
      }
      // Plain objects and arrays only: files, streams and generators (SSE) pass untouched.
      if (!isPlainJson(responseValue)) return
      // Serialized once: a small body is answered as it is rather than stringified again by Elysia.
      const json = JSON.stringify(responseValue)
      const headers: Record<string, string> = { 'content-type': 'application/json;charset=utf-8' }
      for (const [k, v] of Object.entries(set.headers)) if (typeof v === 'string') headers[k] = v
      const out = gzipJson(request, json, headers)
      return new Response(out.body, {
        status: typeof set.status === 'number' ? set.status : 200,
        headers: out.headers,
      })
    })
}

function isPlainJson(v: unknown): boolean {
  if (Array.isArray(v)) return true
  if (v === null || typeof v !== 'object') return false
  const proto = Object.getPrototypeOf(v)
  return proto === Object.prototype || proto === null
}

export function pathOf(url: string): string {
  const start = url.indexOf('/', url.indexOf('//') + 2)
  const q = url.indexOf('?', start)
  return q < 0 ? url.slice(start) : url.slice(start, q)
}
