import { describe, expect, test } from 'bun:test'
import { forEachEngine } from '../../test/helpers'
import { gamesSuite } from './games-fixture'

// A game's environments and their settings (games-fixture.ts).
forEachEngine((engine) => {
  const fx = gamesSuite(engine)
  const { create } = fx

  describe('environments', () => {
    test('create, read, update settings (merged), delete', async () => {
      const g = await create()
      const c = await fx.a.req('POST', `/api/games/${g.id}/environments`, {
        token: fx.admin,
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
          await fx.a.req('POST', `/api/games/${g.id}/environments`, {
            token: fx.admin,
            body: { name: 'qa', type: 'STAGING' },
          })
        ).status,
      ).toBe(409)

      const u = await fx.a.req('PUT', `/api/games/${g.id}/environments/qa`, {
        token: fx.admin,
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

      const s = await fx.a.req('PUT', `/api/games/${g.id}/environments/qa/settings`, {
        token: fx.admin,
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
      const keyOnly = await fx.a.req('PUT', `/api/games/${g.id}/environments/qa/settings`, {
        token: fx.admin,
        body: { rateLimit: { requestsPerMinutePerKey: 10 } },
      })
      expect(keyOnly.body.rateLimit).toEqual({
        requestsPerMinutePerKey: 10,
        burstPerSecondPerKey: 100,
        requestsPerMinutePerIp: 60,
      })
      expect(keyOnly.body.pii.email).toBe('drop')
      const read = await fx.a.req('GET', `/api/games/${g.id}/environments/qa/settings`, { token: fx.admin })
      expect(read.body).toEqual(keyOnly.body)
      expect(
        (await fx.a.req('GET', `/api/games/${g.id}/environments/qa`, { token: fx.admin })).body.description,
      ).toBe('lab')

      expect(
        (await fx.a.req('DELETE', `/api/games/${g.id}/environments/qa`, { token: fx.admin })).status,
      ).toBe(204)
      expect((await fx.a.req('GET', `/api/games/${g.id}/environments/qa`, { token: fx.admin })).status).toBe(
        404,
      )
      expect(
        (await fx.a.req('DELETE', `/api/games/${g.id}/environments/qa`, { token: fx.admin })).status,
      ).toBe(404)
      expect(
        (await fx.a.req('PUT', `/api/games/${g.id}/environments/qa`, { token: fx.admin, body: {} })).status,
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
        const r = await fx.a.req(m, p, { token: fx.admin, body })
        expect(r.status).toBe(400)
        expect(r.body.message).toContain(field)
      }
      const viewer = await fx.a.token('viewer')
      expect(
        (
          await fx.a.req('POST', `/api/games/${g.id}/environments`, {
            token: viewer,
            body: { name: 'qa', type: 'STAGING' },
          })
        ).status,
      ).toBe(403)
      expect(
        (await fx.a.req('PUT', `/api/games/${g.id}/environments/dev/settings`, { token: viewer, body: {} }))
          .status,
      ).toBe(403)
      expect((await fx.a.req('GET', `/api/games/${g.id}/environments/dev/settings`)).status).toBe(401)
    })
  })
})
