import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { gunzipSync } from 'node:zlib'
import { signRequest } from '../../sdk/sign'
import { type TestApp, forEachEngine, makeApp } from '../helpers'

// Issue 15 point 6 at the HTTP level: preflights, CORS headers on Elysia and native routes
// (answers and errors alike), and gzip for large JSON answers.

const OPS = 'https://ops.quarry-games.test'
const GAME_PAGE = 'https://play.quarry-games.test'
const SECRET = 'cors-signing-secret-9931'

forEachEngine((engine) => {
  let a: TestApp
  let base: string
  let admin: string
  let gameId: string
  beforeAll(async () => {
    a = await makeApp(engine, {
      plugins: { games: {}, ingest: { signing_secret: SECRET }, experiments: {} },
      config: { server: { cors_origins: [OPS] } },
    })
    base = a.listen()
    admin = await a.token('admin')
    const g = await a.req('POST', '/api/games', {
      token: admin,
      body: {
        name: 'Quarry',
        genre: 'STRATEGY',
        platforms: ['ANDROID'],
        timezone: 'Europe/Oslo',
        defaultCurrency: 'NOK',
      },
    })
    expect(g.status).toBe(201)
    gameId = g.body.id
  })
  afterAll(() => a.stop())

  const preflight = (path: string, origin: string, method = 'POST', headers = 'content-type, x-api-key') =>
    fetch(`${base}${path}`, {
      method: 'OPTIONS',
      headers: { origin, 'access-control-request-method': method, 'access-control-request-headers': headers },
    })

  describe('preflights', () => {
    test('SDK-facing routes answer 204 for any origin, with the requested headers allowed', async () => {
      for (const path of [
        '/v1/batch',
        '/v1/logs',
        '/api/ingest/events',
        '/api/ingest/payments',
        `/api/config/${gameId}/prod`,
      ]) {
        const r = await preflight(path, GAME_PAGE)
        expect(r.status).toBe(204)
        expect(r.headers.get('access-control-allow-origin')).toBe('*')
        expect(r.headers.get('access-control-allow-methods')).toContain('POST')
        expect(r.headers.get('access-control-allow-headers')).toBe('content-type, x-api-key')
        expect(Number(r.headers.get('access-control-max-age'))).toBeGreaterThan(0)
      }
    })

    test('operator routes: 204 with the origin echoed for a listed origin, 204 without allow headers for another', async () => {
      const ok = await preflight('/api/games', OPS, 'PUT', 'authorization, content-type')
      expect(ok.status).toBe(204)
      expect(ok.headers.get('access-control-allow-origin')).toBe(OPS)
      expect(ok.headers.get('access-control-allow-headers')).toBe('authorization, content-type')
      expect(ok.headers.get('vary')).toContain('Origin')
      const no = await preflight('/api/games', GAME_PAGE, 'PUT', 'authorization')
      expect(no.status).toBe(204)
      expect(no.headers.get('access-control-allow-origin')).toBeNull()
      expect(no.headers.get('access-control-allow-headers')).toBeNull()
    })

    test('a preflight needs no token and is never a 404, even for a protected or unknown path', async () => {
      expect((await preflight(`/api/games/${gameId}`, OPS, 'DELETE', 'authorization')).status).toBe(204)
      expect((await preflight('/api/no-such-thing', OPS, 'GET')).status).toBe(204)
      // A plain OPTIONS (not a preflight) is still an ordinary request.
      expect((await fetch(`${base}/api/games`, { method: 'OPTIONS' })).status).not.toBe(204)
    })
  })

  describe('answers', () => {
    test('operator answers and errors carry CORS for listed origins only; requests without Origin get none', async () => {
      const get = (origin: string | undefined, token?: string) =>
        fetch(`${base}/api/games/${gameId}`, {
          headers: { ...(origin ? { origin } : {}), ...(token ? { authorization: `Bearer ${token}` } : {}) },
        })
      const ok = await get(OPS, admin)
      expect(ok.status).toBe(200)
      expect(ok.headers.get('access-control-allow-origin')).toBe(OPS)
      expect(ok.headers.get('access-control-expose-headers')).toContain('Retry-After')
      // A browser must see the 401 (and 403, 404) to refresh its token or say why.
      const anon = await get(OPS)
      expect(anon.status).toBe(401)
      expect(anon.headers.get('access-control-allow-origin')).toBe(OPS)
      const viewer = await fetch(`${base}/api/games/${gameId}`, {
        method: 'DELETE',
        headers: { origin: OPS, authorization: `Bearer ${await a.token('viewer')}` },
      })
      expect(viewer.status).toBe(403)
      expect(viewer.headers.get('access-control-allow-origin')).toBe(OPS)
      const missing = await get(OPS, admin).then(() =>
        fetch(`${base}/api/games/no-such-game`, {
          headers: { origin: OPS, authorization: `Bearer ${admin}` },
        }),
      )
      expect(missing.status).toBe(404)
      expect(missing.headers.get('access-control-allow-origin')).toBe(OPS)
      expect((await get(GAME_PAGE, admin)).headers.get('access-control-allow-origin')).toBeNull()
      expect((await get(undefined, admin)).headers.get('access-control-allow-origin')).toBeNull()
    })

    test('the native fast routes carry CORS too: signed ingestion (accepted and refused) and the public config', async () => {
      const body = JSON.stringify([
        { event: 'login', ts: String(Date.now()), game_id: gameId, env: 'prod', user_id: 'c1' },
      ])
      const signed = await fetch(`${base}/api/ingest/events`, {
        method: 'POST',
        headers: {
          origin: GAME_PAGE,
          'content-type': 'application/json',
          ...(await signRequest(SECRET, body)),
        },
        body,
      })
      expect(signed.status).toBeLessThan(300)
      expect(signed.headers.get('access-control-allow-origin')).toBe('*')
      const unsigned = await fetch(`${base}/api/ingest/events`, {
        method: 'POST',
        headers: { origin: GAME_PAGE },
        body,
      })
      expect(unsigned.status).toBe(401)
      expect(unsigned.headers.get('access-control-allow-origin')).toBe('*')
      // The first read builds the cached answer; the second is Bun's static route.
      for (let i = 0; i < 2; i++) {
        const cfg = await fetch(`${base}/api/config/${gameId}/prod`, { headers: { origin: GAME_PAGE } })
        expect(cfg.status).toBe(200)
        expect(cfg.headers.get('access-control-allow-origin')).toBe('*')
      }
      expect(a.routes.has(`/api/config/${gameId}/prod`)).toBe(true)
      // Bun's router holds only GET for that path: a preflight still reaches the edge.
      const pre = await preflight(`/api/config/${gameId}/prod`, GAME_PAGE, 'GET', 'if-none-match')
      expect(pre.status).toBe(204)
      expect(pre.headers.get('access-control-allow-origin')).toBe('*')
    })
  })

  describe('gzip', () => {
    const raw = (path: string, encoding?: string) =>
      fetch(`${base}${path}`, {
        headers: { authorization: `Bearer ${admin}`, ...(encoding ? { 'accept-encoding': encoding } : {}) },
        decompress: false,
      } as RequestInit)

    test('the OpenAPI document and a long list are gzipped when the client accepts it, and decode to the same JSON', async () => {
      for (let i = 0; i < 12; i++)
        await a.req('POST', '/api/api-keys', {
          token: admin,
          body: { name: `key number ${i} for the gzip check`, gameId, environment: 'staging' },
        })
      for (const path of ['/v3/api-docs', `/api/api-keys?gameId=${gameId}`]) {
        const plain = await raw(path, 'identity')
        expect(plain.headers.get('content-encoding')).toBeNull()
        const text = await plain.text()
        expect(text.length).toBeGreaterThan(1024)
        const z = await raw(path, 'gzip, deflate, br')
        expect(z.status).toBe(200)
        expect(z.headers.get('content-encoding')).toBe('gzip')
        expect(z.headers.get('vary')).toContain('Accept-Encoding')
        expect(z.headers.get('content-type')).toContain('json')
        const bytes = new Uint8Array(await z.arrayBuffer())
        expect(bytes.length).toBeLessThan(text.length)
        expect(JSON.parse(gunzipSync(bytes).toString())).toEqual(JSON.parse(text))
      }
    })

    test('small answers are not compressed; the status of a created resource survives the hook', async () => {
      const small = await raw(`/api/games/${gameId}`, 'gzip')
      expect(small.headers.get('content-encoding')).toBeNull()
      expect((await small.json()).name).toBe('Quarry')
      const created = await fetch(`${base}/api/games`, {
        method: 'POST',
        headers: {
          authorization: `Bearer ${admin}`,
          'content-type': 'application/json',
          'accept-encoding': 'gzip',
        },
        body: JSON.stringify({
          name: 'Gz',
          genre: 'CASUAL',
          platforms: ['IOS'],
          timezone: 'UTC',
          defaultCurrency: 'EUR',
        }),
      })
      expect(created.status).toBe(201)
    })
  })
})
