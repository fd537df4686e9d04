/**
 * The console's one door to the API: the same public routes a script calls. The tokens live in
 * this module's memory only (never in storage or cookies): a reload signs out.
 */

/** A refusal or failure, with the API's own message. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly code?: string,
    /** Seconds, from Retry-After (429, 503). */
    readonly retryAfter?: number,
    readonly body?: unknown,
  ) {
    super(message)
  }
}

export interface User {
  id: string
  email: string
  name: string
  roles: string[]
}

export interface Tokens {
  token: string
  refreshToken: string
  expiresIn: number
  user: User
}

/** The spec 2/3 answer: `{code, message, data}`. */
export interface Envelope<T> {
  code: number
  message: string
  data: T
}

export type Query = Record<string, string | number | boolean | undefined | null>

export interface RequestOptions {
  query?: Query
  /** Sent as JSON. */
  body?: unknown
  /** Sent as it is (CSV, iCalendar text), with `type` as its content type. */
  raw?: BodyInit
  type?: string
  signal?: AbortSignal
  headers?: Record<string, string>
}

interface Held {
  access: string
  refresh: string
  timer?: ReturnType<typeof setTimeout>
}

let held: Held | undefined
let refreshing: Promise<boolean> | undefined
const hooks: { refreshed?: (t: Tokens) => void; ended?: (why: string) => void } = {}

/** Called after every token rotation (roles may have changed) and when the session ends. */
export function onSession(h: typeof hooks): void {
  Object.assign(hooks, h)
}

/** Keeps the tokens in memory and rotates them when three quarters of the access token's life have passed. */
export function hold(t: Tokens): void {
  if (held?.timer) clearTimeout(held.timer)
  held = { access: t.token, refresh: t.refreshToken }
  const ms = Math.max(5, t.expiresIn * 0.75) * 1000
  held.timer = setTimeout(() => void refresh(), ms)
}

/** Forgets the tokens. */
export function drop(): void {
  if (held?.timer) clearTimeout(held.timer)
  held = undefined
}

export const accessToken = (): string | undefined => held?.access

/** One rotation at a time; false when the refresh token no longer works (the session ended). */
function refresh(): Promise<boolean> {
  const current = held
  if (!current) return Promise.resolve(false)
  refreshing ??= (async () => {
    try {
      const t = await send<Tokens>(
        'POST',
        '/api/auth/refresh',
        { body: { refreshToken: current.refresh } },
        false,
      )
      hold(t)
      hooks.refreshed?.(t)
      return true
    } catch (e) {
      // A throttled or unreachable server is not the end of the session; a refused token is.
      if (e instanceof ApiError && e.status === 401) {
        drop()
        hooks.ended?.('Your session ended. Sign in again.')
      }
      return false
    } finally {
      refreshing = undefined
    }
  })()
  return refreshing
}

export function url(path: string, query?: Query): string {
  const q = new URLSearchParams()
  for (const [k, v] of Object.entries(query ?? {}))
    if (v !== undefined && v !== null && v !== '') q.set(k, String(v))
  const s = q.toString()
  return s ? `${path}?${s}` : path
}

function retryAfter(res: Response): number | undefined {
  const v = Number(res.headers.get('retry-after'))
  return Number.isFinite(v) && v > 0 ? v : undefined
}

/** The message of any of the API's three error bodies, else the status line. */
async function failure(res: Response): Promise<ApiError> {
  let body: unknown
  const text = await res.text().catch(() => '')
  try {
    body = JSON.parse(text)
  } catch {
    body = text
  }
  const o = (body && typeof body === 'object' ? body : {}) as { message?: unknown; error?: unknown }
  const message =
    typeof o.message === 'string' && o.message
      ? o.message
      : typeof body === 'string' && body
        ? body.slice(0, 300)
        : `${res.status} ${res.statusText}`
  return new ApiError(
    res.status,
    message,
    typeof o.error === 'string' ? o.error : undefined,
    retryAfter(res),
    body,
  )
}

/** Sends a request; on a 401 rotates the tokens once and tries again. */
export async function raw(
  method: string,
  path: string,
  o: RequestOptions = {},
  retry = true,
): Promise<Response> {
  const headers: Record<string, string> = { accept: 'application/json', ...o.headers }
  if (held) headers.authorization = `Bearer ${held.access}`
  let body: BodyInit | undefined
  if (o.body !== undefined) {
    headers['content-type'] = 'application/json'
    body = JSON.stringify(o.body)
  } else if (o.raw !== undefined) {
    headers['content-type'] = o.type ?? 'text/plain'
    body = o.raw
  }
  let res: Response
  try {
    res = await fetch(url(path, o.query), { method, headers, body, signal: o.signal })
  } catch (e) {
    if ((e as Error).name === 'AbortError') throw e
    throw new ApiError(0, 'The server did not answer. Check the connection and try again.')
  }
  if (res.status === 401 && retry && held && (await refresh())) return raw(method, path, o, false)
  if (!res.ok) throw await failure(res)
  return res
}

async function send<T>(method: string, path: string, o: RequestOptions = {}, retry = true): Promise<T> {
  const res = await raw(method, path, o, retry)
  if (res.status === 204) return undefined as T
  const type = res.headers.get('content-type') ?? ''
  return (type.includes('json') ? await res.json() : await res.text()) as T
}

export const api = {
  get: <T>(path: string, query?: Query, signal?: AbortSignal) => send<T>('GET', path, { query, signal }),
  post: <T>(path: string, body?: unknown, query?: Query) => send<T>('POST', path, { body, query }),
  put: <T>(path: string, body?: unknown) => send<T>('PUT', path, { body }),
  del: <T>(path: string) => send<T>('DELETE', path),
  send,
  /** The `data` of a spec 2/3 envelope. */
  v1: async <T>(method: string, path: string, o: RequestOptions = {}) =>
    (await send<Envelope<T>>(method, path, o)).data,
}
