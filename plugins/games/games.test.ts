import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { type TestApp, forEachEngine, makeApp } from '../../test/helpers'

const newGame = {
  name: 'Dragon Tales',
  genre: 'RPG',
  platforms: ['ANDROID', 'IOS'],
  timezone: 'Europe/Berlin',
  defaultCurrency: 'EUR',
}

forEachEngine((engine) => {
  let a: TestApp
  let admin: string
  beforeAll(async () => {
    a = await makeApp(engine, { plugins: { games: {} } })
    admin = await a.token('admin')
  })
  afterAll(() => a.stop())

  const create = async (body: Record<string, unknown> = newGame) => {
    const r = await a.req('POST', '/api/games', { token: admin, body })
    expect(r.status).toBe(201)
    return r.body
  }

  describe('games', () => {
    test('create answers 201 with DEVELOPMENT and dev, staging, prod environments with the recommended retention', async () => {
      const g = await create()
      expect(g).toMatchObject({
        name: 'Dragon Tales',
        genre: 'RPG',
        status: 'DEVELOPMENT',
        platforms: ['ANDROID', 'IOS'],
        timezone: 'Europe/Berlin',
        defaultCurrency: 'EUR',
      })
      expect(typeof g.id).toBe('string')
      expect(new Date(g.createdAt).toISOString()).toBe(g.createdAt)
      const envs = await a.req('GET', `/api/games/${g.id}/environments`, { token: admin })
      expect(envs.status).toBe(200)
      const byName = Object.fromEntries(envs.body.map((e: { name: string }) => [e.name, e]))
      expect(Object.keys(byName).sort()).toEqual(['dev', 'prod', 'staging'])
      expect(byName.dev).toMatchObject({ type: 'DEVELOPMENT', settings: { retentionDays: 7 } })
      expect(byName.staging).toMatchObject({ type: 'STAGING', settings: { retentionDays: 30 } })
      expect(byName.prod).toMatchObject({
        type: 'PRODUCTION',
        settings: { retentionDays: 365, samplingRate: 1 },
      })
    })

    test('bad input answers 400 naming the field, and nothing is stored', async () => {
      const before = (await a.req('GET', '/api/games?size=100', { token: admin })).body.total
      const cases: Array<[Record<string, unknown>, string]> = [
        [{ ...newGame, name: undefined }, 'body.name'],
        [{ ...newGame, genre: 'FARMING' }, 'body.genre'],
        [{ ...newGame, platforms: ['SWITCH'] }, 'body.platforms'],
        [{ ...newGame, timezone: 'Mars/Olympus' }, 'body.timezone'],
        [{ ...newGame, defaultCurrency: 'euro' }, 'body.defaultCurrency'],
      ]
      for (const [body, field] of cases) {
        const r = await a.req('POST', '/api/games', { token: admin, body })
        expect(r.status).toBe(400)
        expect(r.body.error).toBe('bad_request')
        expect(r.body.message).toContain(field)
        expect(r.body.path).toBe('/api/games')
        expect(typeof r.body.timestamp).toBe('string')
      }
      expect((await a.req('GET', '/api/games?size=100', { token: admin })).body.total).toBe(before)
    })

    test('without a token 401; a viewer or analyst cannot write (403) but can read', async () => {
      expect((await a.req('POST', '/api/games', { body: newGame })).status).toBe(401)
      expect((await a.req('GET', '/api/games')).status).toBe(401)
      expect((await a.req('GET', '/api/games', { token: 'not-a-jwt' })).status).toBe(401)
      for (const role of ['viewer', 'analyst', 'developer']) {
        const t = await a.token(role)
        const w = await a.req('POST', '/api/games', { token: t, body: newGame })
        expect(w.status).toBe(403)
        expect(w.body.error).toBe('forbidden')
        expect((await a.req('GET', '/api/games', { token: t })).status).toBe(200)
      }
      expect(
        (await a.req('POST', '/api/games', { token: await a.token('operator'), body: newGame })).status,
      ).toBe(201)
      expect(
        (
          await a.req('POST', '/api/games', {
            body: newGame,
            headers: { 'x-admin-token': 'test-admin-token' },
          })
        ).status,
      ).toBe(201)
      expect(
        (await a.req('POST', '/api/games', { body: newGame, headers: { 'x-admin-token': 'wrong' } })).status,
      ).toBe(401)
    })

    test('unknown game answers 404 on every route', async () => {
      const id = 'no-such-game'
      for (const [m, p] of [
        ['GET', `/api/games/${id}`],
        ['PUT', `/api/games/${id}`],
        ['DELETE', `/api/games/${id}`],
        ['POST', `/api/games/${id}/publish`],
        ['POST', `/api/games/${id}/unpublish`],
        ['GET', `/api/games/${id}/environments`],
        ['GET', `/api/games/${id}/environments/dev`],
      ] as const) {
        const r = await a.req(m, p, { token: admin, body: m === 'PUT' ? { name: 'x' } : undefined })
        expect(r.status).toBe(404)
        expect(r.body.error).toBe('not_found')
      }
    })

    test('list pages, sorts and filters; an unknown sort field is 400', async () => {
      for (const name of ['Alpha', 'Bravo', 'Charlie']) await create({ ...newGame, name, genre: 'PUZZLE' })
      const p0 = await a.req('GET', '/api/games?page=0&size=2&sort=name,asc&genre=PUZZLE', { token: admin })
      expect(p0.status).toBe(200)
      expect(p0.body).toMatchObject({ total: 3, page: 0, size: 2 })
      expect(p0.body.items.map((g: { name: string }) => g.name)).toEqual(['Alpha', 'Bravo'])
      const p1 = await a.req('GET', '/api/games?page=1&size=2&sort=name,asc&genre=PUZZLE', { token: admin })
      expect(p1.body.items.map((g: { name: string }) => g.name)).toEqual(['Charlie'])
      const desc = await a.req('GET', '/api/games?size=1&sort=name,desc&genre=PUZZLE', { token: admin })
      expect(desc.body.items[0].name).toBe('Charlie')
      const bad = await a.req('GET', '/api/games?sort=colour', { token: admin })
      expect(bad.status).toBe(400)
      expect(bad.body.message).toContain('query.sort')
      expect((await a.req('GET', '/api/games?sort=name,sideways', { token: admin })).status).toBe(400)
      for (const [q, field] of [
        ['size=1000', 'query.size'],
        ['page=-1', 'query.page'],
        ['size=abc', 'query.size'],
        ['status=OPEN', 'query.status'],
      ]) {
        const r = await a.req('GET', `/api/games?${q}`, { token: admin })
        expect(r.status).toBe(400)
        expect(r.body.details.field).toBe(field)
      }
    })

    test('update changes name and description; status follows the allowed transitions', async () => {
      const g = await create()
      const u = await a.req('PUT', `/api/games/${g.id}`, {
        token: admin,
        body: { name: 'Dragon Tales II', description: 'sequel' },
      })
      expect(u.status).toBe(200)
      expect(u.body).toMatchObject({ name: 'Dragon Tales II', description: 'sequel', status: 'DEVELOPMENT' })
      expect((await a.req('GET', `/api/games/${g.id}`, { token: admin })).body.name).toBe('Dragon Tales II')
      const illegal = await a.req('PUT', `/api/games/${g.id}`, { token: admin, body: { status: 'LIVE' } })
      expect(illegal.status).toBe(409)
      expect(illegal.body.message).toContain('DEVELOPMENT to LIVE')
      for (const s of ['TESTING', 'LIVE', 'MAINTENANCE', 'DISCONTINUED'])
        expect(
          (await a.req('PUT', `/api/games/${g.id}`, { token: admin, body: { status: s } })).body.status,
        ).toBe(s)
      expect(
        (await a.req('PUT', `/api/games/${g.id}`, { token: admin, body: { status: 'LIVE' } })).status,
      ).toBe(409)
      expect(
        (await a.req('PUT', `/api/games/${g.id}`, { token: admin, body: { status: 'PAUSED' } })).status,
      ).toBe(400)
    })

    test('publish needs a platform; LIVE cannot be published again or deleted; unpublish moves to MAINTENANCE', async () => {
      const bare = await create({ ...newGame, platforms: [] })
      const noPlatform = await a.req('POST', `/api/games/${bare.id}/publish`, { token: admin })
      expect(noPlatform.status).toBe(409)
      expect(noPlatform.body.message).toContain('platform')

      const g = await create()
      expect((await a.req('POST', `/api/games/${g.id}/unpublish`, { token: admin })).status).toBe(409)
      const pub = await a.req('POST', `/api/games/${g.id}/publish`, { token: admin })
      expect(pub.status).toBe(200)
      expect(pub.body.status).toBe('LIVE')
      expect((await a.req('POST', `/api/games/${g.id}/publish`, { token: admin })).status).toBe(409)
      const del = await a.req('DELETE', `/api/games/${g.id}`, { token: admin })
      expect(del.status).toBe(409)
      expect((await a.req('GET', `/api/games/${g.id}`, { token: admin })).body.status).toBe('LIVE')
      expect(
        (await a.req('POST', `/api/games/${g.id}/publish`, { token: await a.token('viewer') })).status,
      ).toBe(403)
      const unpub = await a.req('POST', `/api/games/${g.id}/unpublish`, { token: admin })
      expect(unpub.body.status).toBe('MAINTENANCE')
      expect((await a.req('DELETE', `/api/games/${g.id}`, { token: admin })).status).toBe(204)
      expect((await a.req('GET', `/api/games/${g.id}`, { token: admin })).status).toBe(404)
      expect((await a.req('GET', `/api/games/${g.id}/environments`, { token: admin })).status).toBe(404)
    })

    test('concurrent publishes: exactly one wins', async () => {
      const g = await create()
      const results = await Promise.all(
        Array.from({ length: 8 }, () => a.req('POST', `/api/games/${g.id}/publish`, { token: admin })),
      )
      expect(results.filter((r) => r.status === 200).length).toBe(1)
      expect(results.filter((r) => r.status === 409).length).toBe(7)
    })
  })

  describe('environments', () => {
    test('create, read, update settings (merged), delete', async () => {
      const g = await create()
      const c = await a.req('POST', `/api/games/${g.id}/environments`, {
        token: admin,
        body: {
          name: 'qa',
          type: 'STAGING',
          displayName: 'QA',
          description: 'test lab',
          settings: { samplingRate: 0.5 },
        },
      })
      expect(c.status).toBe(201)
      expect(c.body).toMatchObject({
        gameId: g.id,
        name: 'qa',
        type: 'STAGING',
        displayName: 'QA',
        settings: { samplingRate: 0.5, retentionDays: 30 },
      })
      expect(
        (
          await a.req('POST', `/api/games/${g.id}/environments`, {
            token: admin,
            body: { name: 'qa', type: 'STAGING' },
          })
        ).status,
      ).toBe(409)

      const u = await a.req('PUT', `/api/games/${g.id}/environments/qa`, {
        token: admin,
        body: {
          description: 'lab',
          settings: { rateLimit: { requestsPerMinutePerIp: 60 }, pii: { email: 'drop' } },
        },
      })
      expect(u.status).toBe(200)
      expect(u.body.settings).toMatchObject({
        samplingRate: 0.5,
        // Spec 1 section 8: 1000 requests a minute per API key, bursts of 100 a second.
        rateLimit: { requestsPerMinutePerKey: 1000, burstPerSecondPerKey: 100, requestsPerMinutePerIp: 60 },
        pii: { email: 'drop', phone: 'mask', ip: 'drop' },
      })

      const s = await a.req('PUT', `/api/games/${g.id}/environments/qa/settings`, {
        token: admin,
        body: { retentionDays: 90, propertyAllowList: ['level'] },
      })
      expect(s.status).toBe(200)
      expect(s.body).toMatchObject({ retentionDays: 90, propertyAllowList: ['level'], samplingRate: 0.5 })
      expect(s.body.pii).toEqual({ email: 'drop', phone: 'mask', ip: 'drop' })
      expect(s.body.rateLimit).toEqual({
        requestsPerMinutePerKey: 1000,
        burstPerSecondPerKey: 100,
        requestsPerMinutePerIp: 60,
      })
      const keyOnly = await a.req('PUT', `/api/games/${g.id}/environments/qa/settings`, {
        token: admin,
        body: { rateLimit: { requestsPerMinutePerKey: 10 } },
      })
      expect(keyOnly.body.rateLimit).toEqual({
        requestsPerMinutePerKey: 10,
        burstPerSecondPerKey: 100,
        requestsPerMinutePerIp: 60,
      })
      expect(keyOnly.body.pii.email).toBe('drop')
      const read = await a.req('GET', `/api/games/${g.id}/environments/qa/settings`, { token: admin })
      expect(read.body).toEqual(keyOnly.body)
      expect(
        (await a.req('GET', `/api/games/${g.id}/environments/qa`, { token: admin })).body.description,
      ).toBe('lab')

      expect((await a.req('DELETE', `/api/games/${g.id}/environments/qa`, { token: admin })).status).toBe(204)
      expect((await a.req('GET', `/api/games/${g.id}/environments/qa`, { token: admin })).status).toBe(404)
      expect((await a.req('DELETE', `/api/games/${g.id}/environments/qa`, { token: admin })).status).toBe(404)
      expect(
        (await a.req('PUT', `/api/games/${g.id}/environments/qa`, { token: admin, body: {} })).status,
      ).toBe(404)
    })

    test('bad input answers 400 naming the field; viewers cannot write', async () => {
      const g = await create()
      const cases: Array<[string, string, unknown, string]> = [
        ['POST', `/api/games/${g.id}/environments`, { name: 'QA', type: 'STAGING' }, 'body.name'],
        ['POST', `/api/games/${g.id}/environments`, { name: 'qa', type: 'TEST' }, 'body.type'],
        [
          'PUT',
          `/api/games/${g.id}/environments/dev`,
          { settings: { samplingRate: 2 } },
          'body.settings.samplingRate',
        ],
        ['PUT', `/api/games/${g.id}/environments/dev/settings`, { retentionDays: 0 }, 'body.retentionDays'],
        [
          'PUT',
          `/api/games/${g.id}/environments/dev/settings`,
          { pii: { email: 'shout' } },
          'body.pii.email',
        ],
        [
          'PUT',
          `/api/games/${g.id}/environments/dev/settings`,
          { pii: { emial: 'drop' } },
          'body.pii.emial: unknown field',
        ],
      ]
      for (const [m, p, body, field] of cases) {
        const r = await a.req(m, p, { token: admin, body })
        expect(r.status).toBe(400)
        expect(r.body.message).toContain(field)
      }
      const viewer = await a.token('viewer')
      expect(
        (
          await a.req('POST', `/api/games/${g.id}/environments`, {
            token: viewer,
            body: { name: 'qa', type: 'STAGING' },
          })
        ).status,
      ).toBe(403)
      expect(
        (await a.req('PUT', `/api/games/${g.id}/environments/dev/settings`, { token: viewer, body: {} }))
          .status,
      ).toBe(403)
      expect((await a.req('GET', `/api/games/${g.id}/environments/dev/settings`)).status).toBe(401)
    })
  })

  describe('API keys', () => {
    test('a developer creates a key shown once; it lists without the key, shows on its environment, and revokes', async () => {
      const g = await create()
      const dev = await a.token('developer')
      const c = await a.req('POST', '/api/api-keys', {
        token: dev,
        body: { name: 'unity sdk', gameId: g.id, environment: 'prod' },
      })
      expect(c.status).toBe(201)
      expect(c.body.key).toMatch(/^lok_/)
      expect(c.body).toMatchObject({
        name: 'unity sdk',
        gameId: g.id,
        environment: 'prod',
        prefix: c.body.key.slice(0, 8),
      })
      expect((await a.auth.verifyApiKey(c.body.key))?.gameId).toBe(g.id)

      const list = await a.req('GET', `/api/api-keys?gameId=${g.id}`, { token: dev })
      expect(list.status).toBe(200)
      expect(list.body).toHaveLength(1)
      expect(list.body[0].key).toBeUndefined()
      expect(JSON.stringify(list.body)).not.toContain(c.body.key)
      const env = await a.req('GET', `/api/games/${g.id}/environments/prod`, { token: admin })
      expect(env.body.apiKeys).toEqual([
        { id: c.body.id, name: 'unity sdk', prefix: c.body.prefix, createdAt: c.body.createdAt },
      ])

      const r = await a.req('DELETE', `/api/api-keys/${c.body.id}`, { token: dev })
      expect(r.status).toBe(200)
      expect(typeof r.body.revokedAt).toBe('string')
      expect(await a.auth.verifyApiKey(c.body.key)).toBeUndefined()
      expect(
        (await a.req('GET', `/api/games/${g.id}/environments/prod`, { token: admin })).body.apiKeys,
      ).toEqual([])
    })

    test('unknown game or environment 404, bad input 400, viewers and analysts 403, no token 401', async () => {
      const g = await create()
      const dev = await a.token('developer')
      expect(
        (
          await a.req('POST', '/api/api-keys', {
            token: dev,
            body: { name: 'k', gameId: 'nope', environment: 'prod' },
          })
        ).status,
      ).toBe(404)
      expect(
        (
          await a.req('POST', '/api/api-keys', {
            token: dev,
            body: { name: 'k', gameId: g.id, environment: 'qa' },
          })
        ).status,
      ).toBe(404)
      const bad = await a.req('POST', '/api/api-keys', {
        token: dev,
        body: { gameId: g.id, environment: 'prod' },
      })
      expect(bad.status).toBe(400)
      expect(bad.body.message).toContain('body.name')
      expect((await a.req('DELETE', '/api/api-keys/nope', { token: dev })).status).toBe(404)
      for (const role of ['viewer', 'analyst']) {
        expect(
          (
            await a.req('POST', '/api/api-keys', {
              token: await a.token(role),
              body: { name: 'k', gameId: g.id, environment: 'prod' },
            })
          ).status,
        ).toBe(403)
        expect((await a.req('GET', '/api/api-keys', { token: await a.token(role) })).status).toBe(403)
      }
      expect((await a.req('GET', '/api/api-keys')).status).toBe(401)
    })

    test('deleting a game revokes its keys', async () => {
      const g = await create()
      const c = await a.req('POST', '/api/api-keys', {
        token: admin,
        body: { name: 'k', gameId: g.id, environment: 'dev' },
      })
      expect(await a.auth.verifyApiKey(c.body.key)).toBeDefined()
      expect((await a.req('DELETE', `/api/games/${g.id}`, { token: admin })).status).toBe(204)
      expect(await a.auth.verifyApiKey(c.body.key)).toBeUndefined()
    })
  })
})
