import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { cookieFromOwnSite } from '../../core/auth/service'
import { type TestApp, engineFree, forEachEngine } from '../helpers'
import { type Call, GAME, client, login, makeUser, securityApp } from './lib'

/*
 * The spec 2 cookie `service_token` is a credential a browser attaches to any page's request to
 * this server. Honoured from another site's page, it let that page act as the signed-in user: a
 * form posted to the bodyless `POST /api/games/{id}/publish` published the game (security audit
 * L3). The cookie now counts only on requests that do not come from another site.
 */

const FORM = 'application/x-www-form-urlencoded'

engineFree('the cookie’s site check', () => {
  test('reads Sec-Fetch-Site first, then Origin against Host or X-Forwarded-Host', () => {
    expect(cookieFromOwnSite({})).toBe(true)
    expect(cookieFromOwnSite({ 'sec-fetch-site': 'same-origin' })).toBe(true)
    expect(cookieFromOwnSite({ 'sec-fetch-site': 'none' })).toBe(true)
    expect(cookieFromOwnSite({ 'sec-fetch-site': 'cross-site' })).toBe(false)
    expect(cookieFromOwnSite({ 'sec-fetch-site': 'same-site' })).toBe(false)
    expect(cookieFromOwnSite({ origin: 'https://ops.example', host: 'ops.example' })).toBe(true)
    expect(cookieFromOwnSite({ origin: 'https://evil.example', host: 'ops.example' })).toBe(false)
    expect(cookieFromOwnSite({ origin: 'http://ops.example:8080', host: 'ops.example' })).toBe(false)
    expect(
      cookieFromOwnSite({
        origin: 'https://ops.example',
        host: '10.0.0.5:8080',
        'x-forwarded-host': 'ops.example',
      }),
    ).toBe(true)
    expect(cookieFromOwnSite({ origin: 'null', host: 'ops.example' })).toBe(false)
    expect(
      cookieFromOwnSite({
        origin: 'https://ops.example',
        host: 'ops.example',
        'sec-fetch-site': 'cross-site',
      }),
    ).toBe(false)
  })
})

forEachEngine((engine) => {
  let app: TestApp
  let call: Call
  let base = ''
  let cookie = ''
  let bearer = ''
  beforeAll(async () => {
    app = await securityApp(engine, { plugins: { games: {}, ingest: {}, ml: {} } })
    base = app.listen()
    call = client(base)
    const u = await makeUser(app, `csrf-${engine}`, ['admin'])
    bearer = (await login(call, u.email)).token
    cookie = `service_token=${encodeURIComponent(bearer)}`
  })
  afterAll(() => app.stop())

  const newGame = async () => {
    const r = await call('POST', '/api/games', {
      headers: { authorization: `Bearer ${bearer}` },
      body: { ...GAME, name: `csrf ${crypto.randomUUID()}` },
    })
    expect(r.status).toBe(201)
    return r.body.id as string
  }
  const publish = (id: string, headers: Record<string, string>) =>
    call('POST', `/api/games/${id}/publish`, { headers: { cookie, 'content-type': FORM, ...headers } })

  describe('a cookie-borne token', () => {
    test("another site's form cannot publish a game with it", async () => {
      const id = await newGame()
      expect((await publish(id, { origin: 'https://evil.example' })).status).toBe(401)
      expect((await publish(id, { 'sec-fetch-site': 'cross-site' })).status).toBe(401)
      const game = await call('GET', `/api/games/${id}`, { headers: { authorization: `Bearer ${bearer}` } })
      expect(game.body.status).toBe('DEVELOPMENT')
    })

    test('nor read with it, on an Elysia route and on a fast route', async () => {
      const evil = { cookie, origin: 'https://evil.example' }
      expect((await call('GET', '/api/games', { headers: evil })).status).toBe(401)
      // A fast route (Bun's router, no Elysia hook): 401 before the model is looked up.
      const predict = (headers: Record<string, string>) =>
        call('POST', '/api/ml-models/no-such-model/predict', { headers, body: { features: {} } })
      expect((await predict(evil)).status).toBe(401)
      expect((await predict({ cookie })).status).toBe(404)
    })

    test('still works from this site, and for clients that are not browsers', async () => {
      const own = new URL(base).host
      const id = await newGame()
      expect((await publish(id, { origin: `http://${own}`, 'sec-fetch-site': 'same-origin' })).status).toBe(
        200,
      )
      const other = await newGame()
      expect((await publish(other, {})).status).toBe(200)
      expect((await call('GET', '/api/games', { headers: { cookie } })).status).toBe(200)
    })

    test('a Bearer header is not a cookie: a page cannot make a browser send one', async () => {
      const r = await call('GET', '/api/games', {
        headers: { authorization: `Bearer ${bearer}`, origin: 'https://evil.example' },
      })
      expect(r.status).toBe(200)
    })
  })
})
