import { describe, expect, test } from 'bun:test'
import { forEachEngine } from '../../test/helpers'
import { gamesSuite, newGame } from './games-fixture'

// Games: made, checked, listed, updated, published and deleted (games-fixture.ts).
forEachEngine((engine) => {
  const fx = gamesSuite(engine)
  const { create } = fx

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
      const envs = await fx.a.req('GET', `/api/games/${g.id}/environments`, { token: fx.admin })
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
      const before = (await fx.a.req('GET', '/api/games?size=100', { token: fx.admin })).body.total
      const cases: Array<[Record<string, unknown>, string]> = [
        [{ ...newGame, name: undefined }, 'body.name'],
        [{ ...newGame, genre: 'FARMING' }, 'body.genre'],
        [{ ...newGame, platforms: ['SWITCH'] }, 'body.platforms'],
        [{ ...newGame, timezone: 'Mars/Olympus' }, 'body.timezone'],
        [{ ...newGame, defaultCurrency: 'euro' }, 'body.defaultCurrency'],
      ]
      for (const [body, field] of cases) {
        const r = await fx.a.req('POST', '/api/games', { token: fx.admin, body })
        expect(r.status).toBe(400)
        expect(r.body.error).toBe('bad_request')
        expect(r.body.message).toContain(field)
        expect(r.body.path).toBe('/api/games')
        expect(typeof r.body.timestamp).toBe('string')
      }
      expect((await fx.a.req('GET', '/api/games?size=100', { token: fx.admin })).body.total).toBe(before)
    })

    test('without a token 401; a viewer or analyst cannot write (403) but can read', async () => {
      expect((await fx.a.req('POST', '/api/games', { body: newGame })).status).toBe(401)
      expect((await fx.a.req('GET', '/api/games')).status).toBe(401)
      expect((await fx.a.req('GET', '/api/games', { token: 'not-a-jwt' })).status).toBe(401)
      for (const role of ['viewer', 'analyst', 'developer']) {
        const t = await fx.a.token(role)
        const w = await fx.a.req('POST', '/api/games', { token: t, body: newGame })
        expect(w.status).toBe(403)
        expect(w.body.error).toBe('forbidden')
        expect((await fx.a.req('GET', '/api/games', { token: t })).status).toBe(200)
      }
      expect(
        (await fx.a.req('POST', '/api/games', { token: await fx.a.token('operator'), body: newGame })).status,
      ).toBe(201)
      expect(
        (
          await fx.a.req('POST', '/api/games', {
            body: newGame,
            headers: { 'x-admin-token': 'test-admin-token' },
          })
        ).status,
      ).toBe(201)
      expect(
        (await fx.a.req('POST', '/api/games', { body: newGame, headers: { 'x-admin-token': 'wrong' } }))
          .status,
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
        const r = await fx.a.req(m, p, { token: fx.admin, body: m === 'PUT' ? { name: 'x' } : undefined })
        expect(r.status).toBe(404)
        expect(r.body.error).toBe('not_found')
      }
    })

    test('list pages, sorts and filters; an unknown sort field is 400', async () => {
      for (const name of ['Alpha', 'Bravo', 'Charlie']) await create({ ...newGame, name, genre: 'PUZZLE' })
      const p0 = await fx.a.req('GET', '/api/games?page=0&size=2&sort=name,asc&genre=PUZZLE', {
        token: fx.admin,
      })
      expect(p0.status).toBe(200)
      expect(p0.body).toMatchObject({ total: 3, page: 0, size: 2 })
      expect(p0.body.items.map((g: { name: string }) => g.name)).toEqual(['Alpha', 'Bravo'])
      const p1 = await fx.a.req('GET', '/api/games?page=1&size=2&sort=name,asc&genre=PUZZLE', {
        token: fx.admin,
      })
      expect(p1.body.items.map((g: { name: string }) => g.name)).toEqual(['Charlie'])
      const desc = await fx.a.req('GET', '/api/games?size=1&sort=name,desc&genre=PUZZLE', { token: fx.admin })
      expect(desc.body.items[0].name).toBe('Charlie')
      const bad = await fx.a.req('GET', '/api/games?sort=colour', { token: fx.admin })
      expect(bad.status).toBe(400)
      expect(bad.body.message).toContain('query.sort')
      expect((await fx.a.req('GET', '/api/games?sort=name,sideways', { token: fx.admin })).status).toBe(400)
      for (const [q, field] of [
        ['size=1000', 'query.size'],
        ['page=-1', 'query.page'],
        ['size=abc', 'query.size'],
        ['status=OPEN', 'query.status'],
      ]) {
        const r = await fx.a.req('GET', `/api/games?${q}`, { token: fx.admin })
        expect(r.status).toBe(400)
        expect(r.body.details.field).toBe(field)
      }
    })

    test('update changes name and description; status follows the allowed transitions', async () => {
      const g = await create()
      const u = await fx.a.req('PUT', `/api/games/${g.id}`, {
        token: fx.admin,
        body: { name: 'Dragon Tales II', description: 'sequel' },
      })
      expect(u.status).toBe(200)
      expect(u.body).toMatchObject({ name: 'Dragon Tales II', description: 'sequel', status: 'DEVELOPMENT' })
      expect((await fx.a.req('GET', `/api/games/${g.id}`, { token: fx.admin })).body.name).toBe(
        'Dragon Tales II',
      )
      const illegal = await fx.a.req('PUT', `/api/games/${g.id}`, {
        token: fx.admin,
        body: { status: 'LIVE' },
      })
      expect(illegal.status).toBe(409)
      expect(illegal.body.message).toContain('DEVELOPMENT to LIVE')
      for (const s of ['TESTING', 'LIVE', 'MAINTENANCE', 'DISCONTINUED'])
        expect(
          (await fx.a.req('PUT', `/api/games/${g.id}`, { token: fx.admin, body: { status: s } })).body.status,
        ).toBe(s)
      expect(
        (await fx.a.req('PUT', `/api/games/${g.id}`, { token: fx.admin, body: { status: 'LIVE' } })).status,
      ).toBe(409)
      expect(
        (await fx.a.req('PUT', `/api/games/${g.id}`, { token: fx.admin, body: { status: 'PAUSED' } })).status,
      ).toBe(400)
    })

    test('publish needs a platform; LIVE cannot be published again or deleted; unpublish moves to MAINTENANCE', async () => {
      const bare = await create({ ...newGame, platforms: [] })
      const noPlatform = await fx.a.req('POST', `/api/games/${bare.id}/publish`, { token: fx.admin })
      expect(noPlatform.status).toBe(409)
      expect(noPlatform.body.message).toContain('platform')

      const g = await create()
      expect((await fx.a.req('POST', `/api/games/${g.id}/unpublish`, { token: fx.admin })).status).toBe(409)
      const pub = await fx.a.req('POST', `/api/games/${g.id}/publish`, { token: fx.admin })
      expect(pub.status).toBe(200)
      expect(pub.body.status).toBe('LIVE')
      expect((await fx.a.req('POST', `/api/games/${g.id}/publish`, { token: fx.admin })).status).toBe(409)
      const del = await fx.a.req('DELETE', `/api/games/${g.id}`, { token: fx.admin })
      expect(del.status).toBe(409)
      expect((await fx.a.req('GET', `/api/games/${g.id}`, { token: fx.admin })).body.status).toBe('LIVE')
      expect(
        (await fx.a.req('POST', `/api/games/${g.id}/publish`, { token: await fx.a.token('viewer') })).status,
      ).toBe(403)
      const unpub = await fx.a.req('POST', `/api/games/${g.id}/unpublish`, { token: fx.admin })
      expect(unpub.body.status).toBe('MAINTENANCE')
      expect((await fx.a.req('DELETE', `/api/games/${g.id}`, { token: fx.admin })).status).toBe(204)
      expect((await fx.a.req('GET', `/api/games/${g.id}`, { token: fx.admin })).status).toBe(404)
      expect((await fx.a.req('GET', `/api/games/${g.id}/environments`, { token: fx.admin })).status).toBe(404)
    })

    test('concurrent publishes: exactly one wins', async () => {
      const g = await create()
      const results = await Promise.all(
        Array.from({ length: 8 }, () => fx.a.req('POST', `/api/games/${g.id}/publish`, { token: fx.admin })),
      )
      expect(results.filter((r) => r.status === 200).length).toBe(1)
      expect(results.filter((r) => r.status === 409).length).toBe(7)
    })
  })
})
