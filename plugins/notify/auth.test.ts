import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { type TestApp, forEachEngine, makeApp } from '../../test/helpers'

const plugins = { notify: { channels: { audit: { type: 'log' } } } }
const note = { type: 'x', channel: 'audit', title: 't' }

forEachEngine((engine) => {
  describe('auth.enabled on', () => {
    let t: TestApp
    beforeAll(async () => {
      t = await makeApp(engine, { plugins: { notify: { ...plugins.notify, auth: { enabled: true } } } })
    })
    afterAll(() => t.stop())

    test('anonymous callers get 401 everywhere except the public status', async () => {
      for (const [m, p, body] of [
        ['POST', '/api/v1/notify', note],
        ['GET', '/api/v1/providers'],
        ['POST', '/api/v1/providers/audit/disable'],
        ['GET', '/api/v1/config/audit'],
        ['PUT', '/api/v1/config/audit', { config: {} }],
        ['GET', '/api/v1/workers'],
        ['GET', '/api/v1/queue'],
        ['GET', '/api/v1/logs'],
        ['GET', '/api/v1/logs/stats'],
        ['GET', '/api/v1/logs/x'],
        ['GET', '/api/v1/templates'],
        ['POST', '/api/v1/templates/create', { name: 'n', title: 't' }],
        ['GET', '/api/v1/templates/x'],
        ['PUT', '/api/v1/templates/x', { name: 'n', title: 't' }],
        ['DELETE', '/api/v1/templates/x'],
        ['POST', '/api/v1/templates/x/preview'],
        ['GET', '/api/v1/app-tokens'],
      ] as const) {
        const r = await t.req(m, p, { body })
        expect([p, r.status]).toEqual([p, 401])
        expect(r.body.code).toBe(401)
      }
      expect((await t.req('GET', '/api/v1/status')).status).toBe(200)
      expect((await t.req('GET', '/api/v1/queue', { token: 'not-a-jwt' })).status).toBe(401)
    })

    test('a viewer may read but not send or configure; an operator may do both', async () => {
      const viewer = await t.token('viewer')
      expect((await t.req('GET', '/api/v1/logs', { token: viewer })).status).toBe(200)
      expect((await t.req('POST', '/api/v1/notify', { token: viewer, body: note })).status).toBe(403)
      expect(
        (await t.req('PUT', '/api/v1/config/audit', { token: viewer, body: { config: {} } })).status,
      ).toBe(403)
      const operator = await t.token('operator')
      expect((await t.req('POST', '/api/v1/notify', { token: operator, body: note })).body.code).toBe(0)
      expect(
        (await t.req('PUT', '/api/v1/config/audit', { token: operator, body: { config: {} } })).status,
      ).toBe(200)
      expect(
        (
          await t.req('POST', '/api/v1/app-tokens', {
            token: operator,
            body: { name: 'x', scopes: ['query'] },
          })
        ).status,
      ).toBe(403)
    })

    test('an X-API-Key server key acts by its scopes; an SDK key there is 403 naming its kind', async () => {
      const admin = await t.token('admin')
      const mk = async (scopes: string[]) =>
        (
          await t.req('POST', '/api/v1/server-keys', {
            token: admin,
            body: { name: scopes.join('+'), scopes },
          })
        ).body.data.key as string
      const query = { 'x-api-key': await mk(['query']) }
      const trigger = { 'x-api-key': await mk(['trigger']) }
      expect((await t.req('GET', '/api/v1/queue', { headers: query })).status).toBe(200)
      expect((await t.req('POST', '/api/v1/notify', { headers: query, body: note })).status).toBe(403)
      expect((await t.req('POST', '/api/v1/notify', { headers: trigger, body: note })).body.code).toBe(0)
      expect((await t.req('POST', '/api/v1/providers/audit/disable', { headers: trigger })).status).toBe(403)
      const { key } = await t.auth.createApiKey({ name: 'sdk' })
      const sdk = await t.req('GET', '/api/v1/queue', { headers: { 'x-api-key': key } })
      expect(sdk.status).toBe(403)
      expect(sdk.body.message).toContain('an SDK key reaches only the SDK surface')
      expect((await t.req('GET', '/api/v1/queue', { headers: { 'x-api-key': 'lok_wrong' } })).status).toBe(
        401,
      )
      expect((await t.req('GET', '/api/v1/queue', { headers: { 'x-api-key': 'lsk_wrong' } })).status).toBe(
        401,
      )
    })

    test('application tokens: admins manage them; scopes config, trigger and query do not imply each other', async () => {
      const admin = await t.token('admin')
      const mk = async (scopes: string[]) =>
        (
          await t.req('POST', '/api/v1/app-tokens', {
            token: admin,
            body: { name: scopes.join('+'), scopes },
          })
        ).body.data
      const trigger = await mk(['trigger'])
      expect(trigger.token).toStartWith('lat_')
      expect(trigger.scopes).toEqual(['trigger'])
      const query = await mk(['query'])
      const config = await mk(['config'])
      const as = (tok: string) => ({ headers: { 'x-app-token': tok } })

      expect((await t.req('POST', '/api/v1/notify', { ...as(trigger.token), body: note })).body.code).toBe(0)
      expect((await t.req('GET', '/api/v1/logs', as(trigger.token))).status).toBe(403)
      expect(
        (await t.req('PUT', '/api/v1/config/audit', { ...as(trigger.token), body: { config: {} } })).status,
      ).toBe(403)

      expect((await t.req('GET', '/api/v1/logs', { token: query.token })).status).toBe(200)
      expect((await t.req('POST', '/api/v1/notify', { token: query.token, body: note })).status).toBe(403)

      expect((await t.req('POST', '/api/v1/providers/audit/enable', as(config.token))).status).toBe(200)
      expect((await t.req('GET', '/api/v1/providers', as(config.token))).status).toBe(403)
      expect((await t.req('POST', '/api/v1/notify', { ...as(config.token), body: note })).status).toBe(403)
      expect((await t.req('GET', '/api/v1/app-tokens', as(config.token))).status).toBe(403)

      const list = await t.req('GET', '/api/v1/app-tokens', { token: admin })
      expect(list.body.data.count).toBe(3)
      expect(JSON.stringify(list.body.data)).not.toContain(trigger.token)
      const revoked = await t.req('DELETE', `/api/v1/app-tokens/${trigger.id}`, { token: admin })
      expect(revoked.body.data.revoked_at).toBeString()
      expect((await t.req('POST', '/api/v1/notify', { ...as(trigger.token), body: note })).status).toBe(401)
      expect((await t.req('DELETE', '/api/v1/app-tokens/nope', { token: admin })).status).toBe(404)
      expect((await t.req('POST', '/api/v1/notify', { ...as('lat_forged'), body: note })).status).toBe(401)
    })

    test('application token requests are checked: scopes and name name the field', async () => {
      const admin = await t.token('admin')
      const bad = await t.req('POST', '/api/v1/app-tokens', {
        token: admin,
        body: { name: 'x', scopes: ['root'] },
      })
      expect(bad.status).toBe(400)
      expect(bad.body.message).toContain('body.scopes')
      const none = await t.req('POST', '/api/v1/app-tokens', {
        token: admin,
        body: { name: 'x', scopes: [] },
      })
      expect(none.status).toBe(400)
      const noName = await t.req('POST', '/api/v1/app-tokens', { token: admin, body: { scopes: ['query'] } })
      expect(noName.body.message).toContain('body.name')
    })
  })

  describe('auth.enabled off', () => {
    let t: TestApp
    beforeAll(async () => {
      t = await makeApp(engine, { plugins: { notify: { ...plugins.notify, auth: { enabled: false } } } })
    })
    afterAll(() => t.stop())

    test('routes are open; application tokens still apply; token management stays admin-only', async () => {
      expect((await t.req('POST', '/api/v1/notify', { body: note })).body.code).toBe(0)
      expect((await t.req('GET', '/api/v1/logs')).status).toBe(200)
      expect((await t.req('GET', '/api/v1/app-tokens')).status).toBe(401)
      const admin = await t.token('admin')
      const q = (
        await t.req('POST', '/api/v1/app-tokens', { token: admin, body: { name: 'q', scopes: ['query'] } })
      ).body.data
      expect((await t.req('GET', '/api/v1/logs', { token: q.token })).status).toBe(200)
      expect((await t.req('POST', '/api/v1/notify', { token: q.token, body: note })).status).toBe(403)
      expect((await t.req('GET', '/api/v1/logs', { headers: { 'x-app-token': 'lat_bad' } })).status).toBe(401)
    })
  })
})
