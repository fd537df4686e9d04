import { afterAll, beforeAll, expect, test } from 'bun:test'
import { Validator } from '@seriousme/openapi-schema-validator'
import { signJwt } from '../../core/auth/jwt'
import { plugins } from '../../plugins'
import { TEST_JWT_SECRET, type TestApp, forEachEngine, makeApp } from '../helpers'

/*
 * Issue 15 points 3 and 7: the OpenAPI description passes the official OpenAPI 3.1 schema (an
 * independent validator from npm), documents every operation's answers, and every operation it
 * marks protected answers 401 to a caller without credentials or with an expired token, before
 * reading a body or query that is wrong on purpose.
 */
type Json = Record<string, unknown>
type Op = Json & {
  responses: Record<string, Json>
  security?: Json[]
  parameters?: Json[]
  requestBody?: Json
}
const METHODS = ['get', 'post', 'put', 'delete', 'patch']

forEachEngine((engine) => {
  let a: TestApp
  let doc: { paths: Record<string, Record<string, Op>>; components: Json }
  const ops = () =>
    Object.entries(doc.paths).flatMap(([path, o]) =>
      Object.entries(o)
        .filter(([m]) => METHODS.includes(m))
        .map(([method, op]) => ({ path, method, op })),
    )
  beforeAll(async () => {
    // With a signing secret, so the signed ingestion routes check signatures (401) instead of answering 403 ingest_disabled.
    a = await makeApp(engine, {
      plugins: {
        ...Object.fromEntries(Object.keys(plugins).map((n) => [n, {}])),
        ingest: { signing_secret: 'sig-secret-2291' },
      },
    })
    doc = (await a.req('GET', '/v3/api-docs')).body
  })
  afterAll(() => a.stop())

  test('the description is valid OpenAPI 3.1 (official schema)', async () => {
    const result = await new Validator().validate(structuredClone(doc) as never)
    expect(result.errors ?? []).toEqual([])
    expect(result.valid).toBe(true)
  })

  test('no schema is defined twice, and integers are integers (no string-or-integer anyOf)', () => {
    const text = JSON.stringify(doc)
    expect(text).not.toContain('"$id"')
    expect(text).not.toContain('"format":"integer"')
    expect(text).not.toContain('"format":"numeric"')
  })

  test('every operation documents a success answer and, when it takes input or credentials, its 4xx with a body', () => {
    const missing: string[] = []
    for (const { path, method, op } of ops()) {
      const codes = Object.keys(op.responses ?? {})
      if (!codes.some((c) => /^[23]/.test(c))) missing.push(`${method} ${path}: no success`)
      const needs4xx = (op.security?.length ?? 0) > 0 || op.requestBody || op.parameters?.length
      if (needs4xx && !codes.some((c) => c.startsWith('4'))) missing.push(`${method} ${path}: no 4xx`)
      for (const c of codes.filter((c) => c.startsWith('4') && c !== '404' && c !== '304'))
        if (!op.responses[c].content) missing.push(`${method} ${path}: ${c} without a body`)
    }
    expect(missing).toEqual([])
    expect(ops().length).toBeGreaterThan(60)
  })

  test('no optional query parameter or body field has a default (an absent one stays absent)', () => {
    const found: string[] = []
    const walk = (schema: unknown, at: string) => {
      if (!schema || typeof schema !== 'object') return
      const s = schema as Json
      const required = (s.required as string[]) ?? []
      for (const [k, p] of Object.entries((s.properties as Record<string, Json>) ?? {})) {
        if (!required.includes(k) && p && 'default' in p) found.push(`${at}.${k}`)
        walk(p, `${at}.${k}`)
      }
      if (s.items) walk(s.items, `${at}[]`)
      for (const b of [...((s.anyOf as unknown[]) ?? []), ...((s.oneOf as unknown[]) ?? [])]) walk(b, at)
    }
    for (const { path, method, op } of ops()) {
      for (const p of op.parameters ?? [])
        if (!p.required && p.schema && 'default' in (p.schema as Json))
          found.push(`${method} ${path} query.${p.name}`)
      const body = (op.requestBody?.content as Record<string, { schema?: unknown }> | undefined)?.[
        'application/json'
      ]
      walk(body?.schema, `${method} ${path} body`)
    }
    expect(found).toEqual([])
  })

  test('public routes carry no security requirement; x-api-key and the application token are declared', () => {
    const schemes = (doc.components.securitySchemes ?? {}) as Record<string, Json>
    expect(schemes.apiKey).toMatchObject({ type: 'apiKey', in: 'header', name: 'x-api-key' })
    expect(schemes.apiKey.description).toContain('SDK key')
    expect(schemes.serverKey).toMatchObject({ type: 'apiKey', in: 'header', name: 'x-api-key' })
    expect(schemes.serverKey.description).toContain('Server key')
    expect(schemes.appToken?.name).toBe('x-app-token')
    expect(doc.paths['/api/config/{gameId}/{environment}'].get.security).toEqual([])
    expect(doc.paths['/healthz'].get.security).toEqual([])
    expect(doc.paths['/api/auth/login'].post.security).toEqual([])
    expect(doc.paths['/api/games'].get.security).toEqual([{ bearer: [] }, { adminToken: [] }])
    expect(doc.paths['/v1/batch'].post.security).toEqual([{ apiKey: [] }, { ingestSignature: [] }])
    expect(doc.paths['/api/ingest/events'].post.requestBody).toBeDefined()
  })

  test('bodies are documented as JSON only (what the server accepts), optional filters without defaults', () => {
    for (const { path, method, op } of ops()) {
      const content = (op.requestBody?.content ?? {}) as Json
      for (const type of Object.keys(content))
        expect(`${method} ${path} ${type}`).not.toMatch(/form-urlencoded|multipart/)
    }
    const games = doc.paths['/api/games'].get.parameters!
    for (const p of games) expect((p.schema as Json).default).toBeUndefined()
    expect((doc.paths['/api/games'].post.requestBody?.content as Json)['application/json']).toBeDefined()
  })

  test('every protected operation answers 401 without credentials and with an expired token, whatever its input', async () => {
    const expired = signJwt(
      { sub: 'someone', roles: ['admin'], iat: 1_600_000_000, exp: 1_600_000_060 },
      TEST_JWT_SECRET,
    )
    const protectedOps = ops().filter(({ op }) => (op.security?.length ?? 0) > 0)
    expect(protectedOps.length).toBeGreaterThan(50)
    const wrong: string[] = []
    for (const { path, method } of protectedOps) {
      // Query and body both wrong on purpose: neither may be read before the caller is known.
      const url = `${path.replace(/\{[^}]+\}/g, 'x')}?page=-1&size=abc&limit=zz&days=0`
      const withBody = method !== 'get' && method !== 'delete'
      const callers: Record<string, string>[] = [
        {},
        { authorization: `Bearer ${expired}` },
        { 'x-api-key': 'lok_wrong' },
      ]
      for (const headers of callers) {
        const r = await a.req(method.toUpperCase(), url, {
          headers: withBody ? { ...headers, 'content-type': 'application/json' } : headers,
          raw: withBody ? '{"unexpected": [1, 2], "name": 5}' : undefined,
        })
        if (r.status !== 401)
          wrong.push(`${method.toUpperCase()} ${path} ${JSON.stringify(headers).slice(0, 20)}: ${r.status}`)
      }
    }
    expect(wrong).toEqual([])
  })

  const READS_BY_POST = new Set(['/api/v1/auth/refresh', '/api/v1/analytics/behavior/funnel'])
  test('a viewer asking any write of the user-token family gets 403, never a 400 about its (wrong) body', async () => {
    const viewer = await a.token('viewer')
    const writes = ops().filter(
      ({ method, op, path }) =>
        method !== 'get' &&
        // Signing out is a write every signed-in user may make (it would end this viewer's login).
        path !== '/api/auth/logout' &&
        (op.security ?? []).some((s) => 'bearer' in s) &&
        !(op.security ?? []).some((s) => 'apiKey' in s),
    )
    expect(writes.length).toBeGreaterThan(25)
    const wrong: string[] = []
    for (const { path, method } of writes) {
      const url = `${path.replace(/\{[^}]+\}/g, 'x')}?page=-1&force=maybe`
      const r = await a.req(method.toUpperCase(), url, {
        token: viewer,
        headers: { 'content-type': 'application/json' },
        raw: method === 'delete' ? undefined : '{"unexpected": [1, 2], "name": 5}',
      })
      // /api/v1/auth/refresh is the one write a valid token of any role may make; a funnel is a
      // read asked by POST (spec 1), which every role may ask.
      if (r.status !== 403 && !READS_BY_POST.has(path))
        wrong.push(`${method.toUpperCase()} ${path}: ${r.status}`)
    }
    expect(wrong).toEqual([])
  })

  test('a role without the permission gets 403 before its bad body is read', async () => {
    const viewer = await a.token('viewer')
    const r = await a.req('POST', '/api/games', { token: viewer, body: { nonsense: true } })
    expect(r.status).toBe(403)
    const v = await a.req('PUT', '/api/v1/config/any', {
      token: viewer,
      raw: '[1',
      headers: { 'content-type': 'application/json' },
    })
    expect(v.status).toBe(403)
  })
})
