import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { t } from 'elysia'
import { requestGuard } from '../../core/auth/guard'
import type { Principal } from '../../core/auth/service'
import { HttpError } from '../../core/http'
import { RateLimiter } from '../../core/ratelimit'
import { jsonBodyReader } from '../../core/strict'
import { type TestApp, chunkedBody, clearOfMinute, forEachEngine, makeApp } from '../helpers'

/** The status and code an HttpError carries, or what else was thrown. */
async function refusal(fn: () => unknown): Promise<{ status: number; code: string; message: string }> {
  try {
    await fn()
  } catch (e) {
    if (e instanceof HttpError) return { status: e.status, code: e.code, message: e.message }
    throw e
  }
  throw new Error('expected a refusal')
}

const post = (headers: Record<string, string>, body?: string) =>
  new Request('http://localhost/api/x', { method: 'POST', headers, body })

forEachEngine((engine) => {
  let a: TestApp
  beforeAll(async () => {
    a = await makeApp(engine, { plugins: { games: {} } })
  })
  afterAll(() => a.stop())

  describe('requestGuard: the permission macro for a raw request', () => {
    test('Bearer JWT, service_token cookie or x-admin-token; 401 without, 403 for a role without the permission', async () => {
      const identified = new WeakMap<Request, Principal>()
      const guard = requestGuard({ auth: a.auth, limiter: new RateLimiter(0, 0), identified })
      const check = guard.permission('games:write')
      const operator = await a.token('operator')
      const headers: Record<string, string> = {}

      const r = post({ authorization: `Bearer ${operator}` })
      const who = check(r, headers)
      // The in-memory limiter is synchronous: no promise to wait for.
      expect(who).not.toBeInstanceOf(Promise)
      expect((who as Principal).roles).toEqual(['operator'])
      expect(identified.get(r)?.roles).toEqual(['operator'])
      expect(headers).toEqual({})

      expect(((await check(post({ cookie: `a=1; service_token=${operator}` }), {})) as Principal).kind).toBe(
        'user',
      )
      expect(((await check(post({ 'x-admin-token': 'test-admin-token' }), {})) as Principal).kind).toBe(
        'admin',
      )
      // A bad Bearer token falls back to the admin token, as the macro does.
      expect(
        (
          (await check(
            post({ authorization: 'Bearer nope', 'x-admin-token': 'test-admin-token' }),
            {},
          )) as Principal
        ).kind,
      ).toBe('admin')

      expect(await refusal(() => check(post({}), {}))).toMatchObject({ status: 401, code: 'unauthorized' })
      expect(await refusal(() => check(post({ authorization: 'Bearer nope' }), {}))).toMatchObject({
        status: 401,
      })
      expect(await refusal(() => check(post({ 'x-admin-token': 'wrong' }), {}))).toMatchObject({
        status: 401,
      })
      const viewer = await a.token('viewer')
      const denied = await refusal(() => check(post({ authorization: `Bearer ${viewer}` }), {}))
      expect(denied).toMatchObject({ status: 403, code: 'forbidden' })
      expect(denied.message).toContain('games:write')
      // A refused caller is still named for the audit trail.
      const refused = post({ authorization: `Bearer ${viewer}` })
      await refusal(() => check(refused, {}))
      expect(identified.get(refused)?.roles).toEqual(['viewer'])
      // An undeclared area fails when the route is set up, not per request.
      expect(() => guard.permission('nosuch:write' as never)).toThrow()
    })

    test('counts the rate limit per principal, fills X-RateLimit-*, answers 429; the admin token is exempt', async () => {
      const check = requestGuard({ auth: a.auth, limiter: new RateLimiter(2, 0) }).permission('games:read')
      const viewer = await a.token('viewer')
      const h1: Record<string, string> = {}
      await clearOfMinute()
      const sent = Date.now()
      await check(post({ authorization: `Bearer ${viewer}` }), h1)
      expect(h1['x-ratelimit-limit']).toBe('2')
      expect(h1['x-ratelimit-remaining']).toBe('1')
      expect(Number(h1['x-ratelimit-reset'])).toBeGreaterThan(sent / 1000)
      await check(post({ authorization: `Bearer ${viewer}` }), {})
      const over = await refusal(() => check(post({ authorization: `Bearer ${viewer}` }), {}))
      expect(over).toMatchObject({ status: 429, code: 'rate_limit_exceeded' })
      const admin: Record<string, string> = {}
      for (let i = 0; i < 3; i++) await check(post({ 'x-admin-token': 'test-admin-token' }), admin)
      expect(admin).toEqual({})
      // A limiter that answers later (a shared one) is waited for.
      const later = requestGuard({
        auth: a.auth,
        limiter: { enabled: true, hit: async () => ({ limit: 9, remaining: 8, reset: 1 }) },
      }).permission('games:read')
      const h2: Record<string, string> = {}
      const p = later(post({ authorization: `Bearer ${viewer}` }), h2)
      expect(p).toBeInstanceOf(Promise)
      expect(((await p) as Principal).roles).toEqual(['viewer'])
      expect(h2['x-ratelimit-remaining']).toBe('8')
    })
  })
})

describe('jsonBodyReader: strictBodies for a raw request', () => {
  const Body = t.Object(
    { name: t.String({ minLength: 1 }), n: t.Optional(t.Integer({ minimum: 0 })) },
    { additionalProperties: false },
  )
  const read = jsonBodyReader(Body, 100)
  // As a server receives it: with its Content-Length.
  const json = (body: string, type = 'application/json') =>
    post(
      { 'content-length': String(Buffer.byteLength(body)), ...(type ? { 'content-type': type } : {}) },
      body,
    )

  test('a valid body is returned as sent', async () => {
    expect(await read(json('{"name":"a","n":2}'))).toEqual({ name: 'a', n: 2 })
    expect(await read(json('{"name":"a"}', 'application/json; charset=utf-8'))).toEqual({ name: 'a' })
    expect(await read(json('{"name":"a"}', 'application/vnd.x+json'))).toEqual({ name: 'a' })
    expect(await read(json('{"name":"a"}', ''))).toEqual({ name: 'a' })
  })

  test('413 over the limit, 415 for another type, 400 for malformed JSON and naming the field', async () => {
    const big = JSON.stringify({ name: 'x'.repeat(200) })
    expect(await refusal(() => read(json(big)))).toMatchObject({ status: 413, code: 'body_too_large' })
    expect(await refusal(() => read(json('name=a', 'application/x-www-form-urlencoded')))).toMatchObject({
      status: 415,
      code: 'unsupported_media_type',
    })
    expect(await refusal(() => read(json('{"name":')))).toEqual({
      status: 400,
      code: 'bad_request',
      message: 'body: malformed JSON',
    })
    const missing = await refusal(() => read(json('{"n":1}')))
    expect(missing.status).toBe(400)
    expect(missing.message).toContain('body.name')
    const negative = await refusal(() => read(json('{"name":"a","n":-1}')))
    expect(negative.message).toContain('body.n')
    expect((await refusal(() => read(json('[1]')))).status).toBe(400)
  })

  test('a body without a length (chunked) is read up to the limit and refused past it', async () => {
    const chunked = (text: string) =>
      new Request('http://localhost/api/x', {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: chunkedBody(text, 16),
        duplex: 'half',
      } as RequestInit)
    expect(await read(chunked('{"name":"chunky","n":3}'))).toEqual({ name: 'chunky', n: 3 })
    const over = await refusal(() => read(chunked(JSON.stringify({ name: 'x'.repeat(120) }))))
    expect(over).toEqual({
      status: 413,
      code: 'body_too_large',
      message: 'the body is over the limit of 100 bytes',
    })
    expect((await refusal(() => read(chunked('{"name":')))).message).toBe('body: malformed JSON')
  })

  test('admit lets its bodies skip the schema walk; what it refuses is still checked', async () => {
    let admitted = 0
    const quick = jsonBodyReader(Body, 100, (b) => {
      const ok = typeof b === 'object' && b !== null && typeof (b as { name?: unknown }).name === 'string'
      if (ok) admitted++
      return ok
    })
    expect(await quick(json('{"name":"a"}'))).toEqual({ name: 'a' })
    expect(admitted).toBe(1)
    expect((await refusal(() => quick(json('{"name":1}')))).message).toContain('body.name')
  })
})
