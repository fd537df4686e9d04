import { afterAll, beforeAll, expect } from 'bun:test'
import type { Engine, TestApp } from '../../test/helpers'
import { mlApp, newGame } from './testing'

/**
 * `POST /api/ml-models/{id}/predict` is served from Bun's native router (ctx.fastRoute) on a
 * socket, and through Elysia by `app.handle`. These tests send each request both ways and hold
 * the answers equal, so the fast route keeps every documented behaviour. They are the
 * predict-route-*.test.ts files beside this one (answers: predictions, their errors and the
 * OpenAPI description; traffic: A/B tests, canaries, forwarding and the rate limit).
 */

export const loyal = { sessions: 9.5, days_since_purchase: 0.5 }
export const leaving = { sessions: 0.2, days_since_purchase: 11 }

type Sent = { token?: string | null; body?: unknown; raw?: string; headers?: Record<string, string> }

/**
 * The ml app of the calling file's suite on `engine`, listening, started once: `fx.a`, `fx.base`
 * (its URL), `fx.admin` and `fx.gameId` once it began; `socket`, `handled` and `same` send a
 * prediction request (above), `deploy` deploys a model as admin.
 */
export function predictSuite(engine: Engine) {
  /** Elysia reports every answered write with an `http.write` event; the native route does not. */
  const predictWrites: string[] = []
  const fx = { a: undefined as unknown as TestApp, base: '', admin: '', gameId: '', predictWrites }
  beforeAll(async () => {
    fx.a = await mlApp(engine, { flush_ms: 5 })
    fx.base = fx.a.listen()
    fx.admin = await fx.a.token('admin')
    fx.gameId = await newGame(fx.a, fx.admin)
    fx.a.bus.on('http.write', (w) => {
      if (w.path.endsWith('/predict')) predictWrites.push(w.path)
    })
  })
  afterAll(() => fx.a.stop())

  /** Over the socket: Bun's native router answers. */
  async function socket(id: string, o: Sent = {}) {
    const headers: Record<string, string> = { ...o.headers }
    if (o.token) headers.authorization = `Bearer ${o.token}`
    if (o.body !== undefined) headers['content-type'] ??= 'application/json'
    const res = await fetch(`${fx.base}/api/ml-models/${id}/predict`, {
      method: 'POST',
      headers,
      body: o.body !== undefined ? JSON.stringify(o.body) : o.raw,
    })
    const text = await res.text()
    const json = (res.headers.get('content-type') ?? '').includes('json') && text ? JSON.parse(text) : text
    return { status: res.status, body: json, headers: res.headers }
  }
  /** Through `app.handle` (Elysia). */
  const handled = (id: string, o: Sent = {}) =>
    fx.a.req('POST', `/api/ml-models/${id}/predict`, {
      token: o.token,
      body: o.body,
      raw: o.raw,
      headers: {
        ...(o.raw !== undefined ? { 'content-length': String(Buffer.byteLength(o.raw)) } : {}),
        ...o.headers,
      },
    })
  /** Both ways; the error answers must be the same (but for their timestamps). */
  async function same(id: string, o: Sent, status: number) {
    const s = await socket(id, o)
    const h = await handled(id, o)
    expect(s.status).toBe(status)
    expect(h.status).toBe(status)
    const strip = (b: unknown) =>
      b && typeof b === 'object' ? { ...(b as Record<string, unknown>), timestamp: undefined } : b
    expect(strip(s.body)).toEqual(strip(h.body))
    return s
  }
  const deploy = (id: string, body: Record<string, unknown> = {}) =>
    fx.a.req('POST', `/api/ml-models/${id}/deploy`, { token: fx.admin, body })

  return Object.assign(fx, { socket, handled, same, deploy })
}
