import { describe, expect, test } from 'bun:test'
import { forEachEngine } from '../../test/helpers'
import { gamesSuite } from './games-fixture'

// API keys of a game's environments (games-fixture.ts).
forEachEngine((engine) => {
  const fx = gamesSuite(engine)
  const { create } = fx

  describe('API keys', () => {
    test('a developer creates a key shown once; it lists without the key, shows on its environment, and revokes', async () => {
      const g = await create()
      const dev = await fx.a.token('developer')
      const c = await fx.a.req('POST', '/api/api-keys', {
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
      expect((await fx.a.auth.verifyApiKey(c.body.key))?.gameId).toBe(g.id)

      const list = await fx.a.req('GET', `/api/api-keys?gameId=${g.id}`, { token: dev })
      expect(list.status).toBe(200)
      expect(list.body).toHaveLength(1)
      expect(list.body[0].key).toBeUndefined()
      expect(JSON.stringify(list.body)).not.toContain(c.body.key)
      const env = await fx.a.req('GET', `/api/games/${g.id}/environments/prod`, { token: fx.admin })
      expect(env.body.apiKeys).toEqual([
        { id: c.body.id, name: 'unity sdk', prefix: c.body.prefix, createdAt: c.body.createdAt },
      ])

      const r = await fx.a.req('DELETE', `/api/api-keys/${c.body.id}`, { token: dev })
      expect(r.status).toBe(200)
      expect(typeof r.body.revokedAt).toBe('string')
      expect(await fx.a.auth.verifyApiKey(c.body.key)).toBeUndefined()
      expect(
        (await fx.a.req('GET', `/api/games/${g.id}/environments/prod`, { token: fx.admin })).body.apiKeys,
      ).toEqual([])
    })

    test('unknown game or environment 404, bad input 400, viewers and analysts 403, no token 401', async () => {
      const g = await create()
      const dev = await fx.a.token('developer')
      expect(
        (
          await fx.a.req('POST', '/api/api-keys', {
            token: dev,
            body: { name: 'k', gameId: 'nope', environment: 'prod' },
          })
        ).status,
      ).toBe(404)
      expect(
        (
          await fx.a.req('POST', '/api/api-keys', {
            token: dev,
            body: { name: 'k', gameId: g.id, environment: 'qa' },
          })
        ).status,
      ).toBe(404)
      const bad = await fx.a.req('POST', '/api/api-keys', {
        token: dev,
        body: { gameId: g.id, environment: 'prod' },
      })
      expect(bad.status).toBe(400)
      expect(bad.body.message).toContain('body.name')
      expect((await fx.a.req('DELETE', '/api/api-keys/nope', { token: dev })).status).toBe(404)
      for (const role of ['viewer', 'analyst']) {
        expect(
          (
            await fx.a.req('POST', '/api/api-keys', {
              token: await fx.a.token(role),
              body: { name: 'k', gameId: g.id, environment: 'prod' },
            })
          ).status,
        ).toBe(403)
        expect((await fx.a.req('GET', '/api/api-keys', { token: await fx.a.token(role) })).status).toBe(403)
      }
      expect((await fx.a.req('GET', '/api/api-keys')).status).toBe(401)
    })

    test('deleting a game revokes its keys', async () => {
      const g = await create()
      const c = await fx.a.req('POST', '/api/api-keys', {
        token: fx.admin,
        body: { name: 'k', gameId: g.id, environment: 'dev' },
      })
      expect(await fx.a.auth.verifyApiKey(c.body.key)).toBeDefined()
      expect((await fx.a.req('DELETE', `/api/games/${g.id}`, { token: fx.admin })).status).toBe(204)
      expect(await fx.a.auth.verifyApiKey(c.body.key)).toBeUndefined()
    })
  })
})
