import type { LiveopsApp } from './app'
import { bodyTooLarge } from './http'
import type { PluginManifest } from './plugin'

/**
 * The body limit of the routes that take no credential before the body: login and refresh.
 * Enough for any real request; a stranger cannot make the server hold megabytes.
 */
export const ANONYMOUS_BODY_LIMIT = 64 * 1024
const CORE_BODY_LIMITS: Record<string, number> = {
  '/api/auth/login': ANONYMOUS_BODY_LIMIT,
  '/api/v1/auth/login': ANONYMOUS_BODY_LIMIT,
  '/api/auth/refresh': ANONYMOUS_BODY_LIMIT,
  '/api/v1/auth/refresh': ANONYMOUS_BODY_LIMIT,
}

/** The path of a request URL, without building a URL object (asked for every request with a body). */
export function pathOf(url: string): string {
  const start = url.indexOf('/', url.indexOf('//') + 2)
  if (start < 0) return '/'
  const q = url.indexOf('?', start)
  return q < 0 ? url.slice(start) : url.slice(start, q)
}

/**
 * The request as Elysia can route it. Elysia finds the path at the first `/` from the URL's 12th
 * character on (`http://` and a host of 4 or more): with `Host: x`, `http://x/zz/api/auth/login`
 * was routed as `/api/auth/login` while the body limits, CORS and the audit read `/zz/...` (a
 * 9 MB login body passed the 64 KB limit; eighteenth session's audit), and a server reached by a
 * short name (`http://ops/`) answered 404 everywhere. Such a URL is given a longer host of its
 * own; the `Host` header stays as sent.
 */
export function withRoutableUrl(req: Request): Request {
  const url = req.url
  const start = url.indexOf('/', url.indexOf('//') + 2)
  if (start < 0 || start >= 11) return req
  return new Request(`http://liveops.invalid${url.slice(start)}`, {
    method: req.method,
    headers: req.headers,
    body: req.body,
    duplex: 'half',
  } as RequestInit)
}

/**
 * The app's body limits: `server.body_limit_mb`, and the smaller ones of exact paths (core's login
 * and refresh, each plugin's `bodyLimits`). `smallest` lets a request under every limit skip the
 * path lookup.
 */
export function bodyLimits(mb: number, manifests: readonly Pick<PluginManifest, 'bodyLimits'>[]) {
  const bodyLimit = Math.round(mb * 1024 * 1024)
  const small = new Map<string, number>(Object.entries(CORE_BODY_LIMITS))
  for (const p of manifests)
    for (const [path, bytes] of Object.entries(p.bodyLimits ?? {}))
      small.set(path, Math.min(bytes, small.get(path) ?? bytes))
  return {
    bodyLimit,
    smallest: Math.min(bodyLimit, ...small.values()),
    bodyLimitFor: (path: string) => Math.min(bodyLimit, small.get(path) ?? bodyLimit),
  }
}

/**
 * Serves a built app: the fast routes from Bun's native router, everything else through Elysia.
 * `core/main.ts` and the socket-level tests use this one function.
 *
 * The body limit is the app's (`server.body_limit_mb`), answered with the family's error body:
 * a declared length over it is refused before a byte is read (`onRequest` in createApp); a body
 * sent without a length (chunked) is counted as the route reads it and refused as soon as it
 * passes it. Bun's own cap, which would answer an empty 413, is therefore set out of the way.
 */
export function listen(built: LiveopsApp, opts: { port: number; hostname: string }) {
  // A chunked body is re-wrapped; its peer address stays the socket's.
  const peers = new WeakMap<Request, Request>()
  const handle = (sent: Request): Response | Promise<Response> => {
    const req = withRoutableUrl(sent)
    if (req !== sent) peers.set(req, sent)
    if (!req.body || req.headers.has('content-length')) return built.app.handle(req)
    // Counted as it is read, never read here: the route's guard refuses a stranger before a
    // byte of it is taken (read here first, 100 anonymous 10 MB bodies held 2.3 GB before
    // their 401s, eighteenth session's audit); whoever reads past the limit meets the 413.
    const limit = built.bodyLimitFor(pathOf(req.url))
    let read = 0
    const counted = req.body.pipeThrough(
      new TransformStream<Uint8Array, Uint8Array>({
        transform(chunk, out) {
          read += chunk.byteLength
          if (read > limit) out.error(bodyTooLarge(limit))
          else out.enqueue(chunk)
        },
      }),
    )
    const wrapped = new Request(req.url, {
      method: req.method,
      headers: req.headers,
      body: counted,
      duplex: 'half',
    } as RequestInit)
    peers.set(wrapped, sent)
    return built.app.handle(wrapped)
  }
  const handlers = () => ({
    routes: built.routes.table(),
    fetch: handle,
    error: () => new Response('internal server error', { status: 500 }),
  })
  const server = Bun.serve({
    port: opts.port,
    hostname: opts.hostname,
    maxRequestBodySize: Number.MAX_SAFE_INTEGER,
    ...handlers(),
  })
  // Elysia's context `server` is the one it listens on itself, null when another server calls
  // `app.handle`: without this, every client's address read as unknown (login throttling,
  // audit entries).
  const requestIP = (r: Request) => server.requestIP(peers.get(r) ?? r)
  built.app.server = new Proxy(server, {
    get: (target, key) => {
      if (key === 'requestIP') return requestIP
      const v = Reflect.get(target, key)
      return typeof v === 'function' ? v.bind(target) : v
    },
  })
  const off = built.routes.onChange(() => server.reload(handlers()))
  return {
    port: server.port,
    hostname: server.hostname,
    /** Stops listening (`force`: also drops in-flight requests) and stops following route changes. */
    stop: (force = false) => {
      off()
      return server.stop(force)
    },
  }
}
