import { type CorsPolicy, pathOf } from './edge'
import { type ErrorFamilies, httpErrorResponse } from './http'
import type { Metrics } from './metrics'
import type { FastHandler, FastMethod, FastServer } from './plugin'

type Handler = (
  request: Request & { params: Record<string, string> },
  server: FastServer,
) => Response | Promise<Response>
/** What `Bun.serve({ routes })` takes: by method, a handler or a pre-built response. */
export type RouteTable = Record<string, Partial<Record<FastMethod, Handler | Response>>>
type LogRequest = (method: string, route: string, status: number, seconds: number) => void

/**
 * The routes Bun's native router serves ahead of Elysia (`ctx.fastRoute`, `ctx.staticRoute`).
 * Static responses change at run time; the server that serves the table reloads it on every
 * change, synchronously, so a change is visible to the next request.
 */
export class NativeRoutes {
  private handlers: Record<string, Partial<Record<FastMethod, Handler>>> = {}
  private statics = new Map<string, Response>()
  private listeners = new Set<() => void>()

  constructor(
    private metrics: Metrics,
    private logRequest: LogRequest,
    private families: ErrorFamilies,
    private cors: CorsPolicy,
  ) {}

  add(method: FastMethod, path: string, handler: FastHandler): void {
    if (this.handlers[path]?.[method]) throw new Error(`fast route ${method} ${path} registered twice`)
    this.handlers[path] = { ...this.handlers[path], [method]: this.timed(method, path, handler) }
  }

  /** Sets (or, without a response, removes) the pre-built answer of one exact path. */
  setStatic(path: string, response: Response | undefined): void {
    if (response) {
      // A pre-built answer cannot vary by origin: only SDK-facing (any-origin) paths get CORS.
      if (this.cors.isPublic(path))
        for (const [k, v] of Object.entries(this.cors.headers(path, null) ?? {})) response.headers.set(k, v)
      this.statics.set(path, response)
    } else if (!this.statics.delete(path)) return
    for (const fn of this.listeners) fn()
  }

  has(path: string): boolean {
    return this.statics.has(path) || path in this.handlers
  }

  table(): RouteTable {
    const out: RouteTable = { ...this.handlers }
    // Keyed by method: any other method falls through to Elysia.
    for (const [path, r] of this.statics) out[path] = { ...out[path], GET: r }
    return out
  }

  /** Calls `fn` after every change of the table; returns the unsubscribe function. */
  onChange(fn: () => void): () => void {
    this.listeners.add(fn)
    return () => this.listeners.delete(fn)
  }

  /**
   * Wraps a fast route: the request histogram (one cached label child per status) and the error
   * body of its family, as Elysia's hooks give every other route.
   */
  private timed(method: string, path: string, handler: FastHandler): Handler {
    const children = new Map<number, { observe(v: number): void }>()
    const observe = (status: number, t0: number) => {
      let child = children.get(status)
      if (!child) {
        child = this.metrics.http.labels({ method, route: path, status: String(status) })
        children.set(status, child)
      }
      const seconds = (performance.now() - t0) / 1000
      child.observe(seconds)
      this.logRequest(method, path, status, seconds)
    }
    // A path without parameters is the request's path: no URL to parse on the error path.
    const fixed = !path.includes(':') && !path.includes('*')
    const fail = (request: Request, e: unknown) =>
      httpErrorResponse(fixed ? path : new URL(request.url).pathname, e, this.families)
    const withCors = (request: Request, r: Response): Response => {
      const origin = request.headers.get('origin')
      const h = origin && this.cors.headers(fixed ? path : pathOf(request.url), origin)
      if (h) for (const [k, v] of Object.entries(h)) r.headers.set(k, v)
      return r
    }
    return (request, server) => {
      const t0 = performance.now()
      let out: Response | Promise<Response>
      try {
        out = handler(request, request.params, server)
      } catch (e) {
        out = fail(request, e)
      }
      if (out instanceof Response) {
        observe(out.status, t0)
        return withCors(request, out)
      }
      return out.then(
        (r) => {
          observe(r.status, t0)
          return withCors(request, r)
        },
        (e) => {
          const r = fail(request, e)
          observe(r.status, t0)
          return withCors(request, r)
        },
      )
    }
  }
}
