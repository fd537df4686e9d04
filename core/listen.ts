import type { LiveopsApp } from './app'
import { readBounded } from './http'

/**
 * Serves a built app: the fast routes from Bun's native router, everything else through Elysia.
 * `core/main.ts` and the socket-level tests use this one function.
 *
 * The body limit is the app's (`server.body_limit_mb`), answered with the family's error body:
 * a declared length over it is refused before a byte is read (`onRequest` in createApp); a body
 * sent without a length (chunked) is read here up to the limit and refused as soon as it passes
 * it. Bun's own cap, which would answer an empty 413, is therefore set out of the way.
 */
export function listen(built: LiveopsApp, opts: { port: number; hostname: string }) {
  // A chunked body is re-wrapped once read; its peer address stays the socket's.
  const peers = new WeakMap<Request, Request>()
  const handle = async (req: Request): Promise<Response> => {
    if (!req.body || req.headers.has('content-length')) return built.app.handle(req)
    const body = await readBounded(req, built.bodyLimit)
    const headers = new Headers(req.headers)
    headers.delete('transfer-encoding')
    // Over the limit: the same request without its body, declaring what was read so far, meets
    // the one refusal in createApp (family body, metrics, request log).
    headers.set('content-length', String(body.byteLength))
    const wrapped = new Request(req.url, {
      method: req.method,
      headers,
      body: body.byteLength > built.bodyLimit ? null : (body as Uint8Array<ArrayBuffer>),
    })
    peers.set(wrapped, req)
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
