import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { type TestApp, forEachEngine } from '../helpers'
import { ADMIN_TOKEN, CONFIG, type Call, GAME, client, login, makeUser, securityApp } from './lib'

/*
 * Issue 34 point 3: client keys stay client keys. An SDK key (public, inside every game client)
 * reaches only the SDK surface of its own game and environment; spec 2's X-API-Key is a server
 * key: secret, scoped, listed, revocable, stored hashed and shown once. A key of the wrong kind
 * is 403 naming its kind.
 */
const admin = { 'x-admin-token': ADMIN_TOKEN }

forEachEngine((engine) => {
  let app: TestApp
  let call: Call
  const game = { a: '', b: '' }
  const experiment = { a: '', b: '' }
  let sdk: Record<string, string>
  beforeAll(async () => {
    app = await securityApp(engine)
    call = client(app.listen())
    for (const side of ['a', 'b'] as const) {
      game[side] = (
        await call('POST', '/api/games', { headers: admin, body: { name: `keys ${side}`, ...GAME } })
      ).body.id
      const e = await call('POST', '/api/experiments', {
        headers: admin,
        body: { gameId: game[side], environment: 'prod', name: `e ${side}`, config: CONFIG },
      })
      experiment[side] = e.body.id
      await call('POST', `/api/experiments/${e.body.id}/publish`, { headers: admin })
    }
    const key = await call('POST', '/api/api-keys', {
      headers: admin,
      body: { name: 'client', gameId: game.a, environment: 'prod' },
    })
    sdk = { 'x-api-key': key.body.key }
  })
  afterAll(() => app.stop())

  describe('SDK keys', () => {
    test('reach nothing of the notification service: 403 naming the kind (the requests of the issue)', async () => {
      const refused: Array<[string, string, unknown?]> = [
        [
          'POST',
          '/api/v1/notify',
          { type: 'x', channel: 'audit', title: 't', recipients: { audit: ['anyone@victim.example'] } },
        ],
        ['POST', '/api/v1/alerts/disk-db1/ack'],
        ['GET', '/api/v1/logs'],
        ['GET', '/api/v1/config/audit'],
        ['GET', '/api/v1/rules'],
        ['GET', '/api/v1/rosters'],
        ['GET', '/api/v1/incidents'],
        ['GET', '/api/v1/templates'],
        ['GET', '/api/v1/workers'],
        ['GET', '/api/games'],
        ['GET', `/api/games/${game.a}`],
        ['GET', '/api/auth/permissions'],
      ]
      for (const [method, path, body] of refused) {
        const r = await call(method, path, { headers: sdk, body })
        expect([method, path, r.status]).toEqual([method, path, 403])
        expect(r.body.message).toContain('an SDK key reaches only the SDK surface')
      }
      const logs = await call('GET', '/api/v1/logs', { headers: admin })
      expect(logs.body.data.total).toBe(0)
    })

    test('reach the SDK surface of their own game and environment only', async () => {
      expect((await call('GET', `/api/config/${game.a}/prod`, { headers: sdk })).status).toBe(200)
      const own = await call('GET', `/api/experiments/${experiment.a}/assign?userId=u1`, { headers: sdk })
      expect(own.status).toBe(200)
      expect(own.body.experimentId).toBe(experiment.a)
      const other = await call('GET', `/api/experiments/${experiment.b}/assign?userId=u1`, { headers: sdk })
      expect(other.status).toBe(403)
      expect(other.body.message).toContain('another game')
      expect((await call('GET', '/api/experiments/nope/assign?userId=u1', { headers: sdk })).status).toBe(404)
      // What the public configuration does not show stays unknown to the key: a draft, a paused one.
      const draft = await call('POST', '/api/experiments', {
        headers: admin,
        body: { gameId: game.a, environment: 'prod', name: 'unreleased', config: CONFIG },
      })
      const hidden = await call('GET', `/api/experiments/${draft.body.id}/assign?userId=u1`, { headers: sdk })
      expect([hidden.status, JSON.stringify(hidden.body).includes('variant')]).toEqual([404, false])
      const shown = await call('GET', `/api/experiments/${draft.body.id}/assign?userId=u1`, {
        headers: admin,
      })
      expect([shown.status, shown.body.status]).toEqual([200, 'draft'])
      await call('POST', `/api/experiments/${experiment.a}/pause`, { headers: admin })
      const paused = await call('GET', `/api/experiments/${experiment.a}/assign?userId=u1`, { headers: sdk })
      await call('POST', `/api/experiments/${experiment.a}/publish`, { headers: admin })
      expect(paused.status).toBe(404)
      expect(
        (await call('GET', `/api/experiments/${experiment.a}/assign?userId=u1`, { headers: sdk })).status,
      ).toBe(200)
      const batch = await call('POST', '/v1/batch', {
        headers: sdk,
        body: [
          { event_id: 'mine', event_name: 'login', device_id: 'd1' },
          { event_id: 'theirs', event_name: 'login', device_id: 'd1', game_id: game.b },
          { event_id: 'staging', event_name: 'login', device_id: 'd1', environment: 'staging' },
        ],
      })
      expect(batch.status).toBe(200)
      expect(batch.body.accepted).toEqual(['mine'])
      expect(batch.body.rejected.map((r: { event_id: string }) => r.event_id)).toEqual(['theirs', 'staging'])
    })
  })

  describe('server keys', () => {
    test('made through the API, shown once, stored hashed, listed without the secret, by whom the role table says', async () => {
      const made = await call('POST', '/api/v1/server-keys', {
        headers: admin,
        body: { name: 'ops', scopes: ['trigger'] },
      })
      expect(made.status).toBe(201)
      expect(made.body.data).toMatchObject({ name: 'ops', scopes: ['trigger'] })
      const key = made.body.data.key as string
      expect(key).toStartWith('lsk_')
      const list = await call('GET', '/api/v1/server-keys', { headers: admin })
      expect(list.body.data.keys.map((k: { id: string }) => k.id)).toContain(made.body.data.id)
      expect(JSON.stringify(list.body)).not.toContain(key)
      const rows = await app.db.all<{ token_hash: string }>('SELECT token_hash FROM auth_app_tokens')
      expect(JSON.stringify(rows)).not.toContain(key)

      // Nobody makes a key that reaches further than they do.
      const bodies = { name: 'k', scopes: ['query'] }
      const as = async (roles: string[]) => {
        const u = await makeUser(app, `keys-${roles.join('-')}`, roles)
        return { authorization: `Bearer ${(await login(call, u.email)).token}` }
      }
      const developer = await as(['developer'])
      const dev = await call('POST', '/api/v1/server-keys', { headers: developer, body: bodies })
      expect(dev.status).toBe(403)
      expect(dev.body.message).toContain('channels:read')
      expect((await call('GET', '/api/v1/server-keys', { headers: developer })).status).toBe(200)
      expect(
        (await call('POST', '/api/v1/server-keys', { headers: await as(['operator']), body: bodies })).status,
      ).toBe(403)
      const both = await as(['developer', 'operator'])
      expect(
        (
          await call('POST', '/api/v1/server-keys', {
            headers: both,
            body: { name: 'k', scopes: ['config', 'trigger'] },
          })
        ).status,
      ).toBe(201)
      expect((await call('GET', '/api/v1/server-keys', { headers: await as(['viewer']) })).status).toBe(403)
      const bad = await call('POST', '/api/v1/server-keys', {
        headers: admin,
        body: { name: 'k', scopes: ['root'] },
      })
      expect(bad.status).toBe(400)
      expect(bad.body.message).toContain('body.scopes')
      expect((await call('POST', '/api/v1/server-keys', { body: bodies })).status).toBe(401)
      expect((await call('DELETE', '/api/v1/server-keys/nope', { headers: admin })).status).toBe(404)
    })

    test('act by their scopes, reach nothing else (403 naming the kind), and stop when revoked', async () => {
      const make = async (scopes: string[]) =>
        (await call('POST', '/api/v1/server-keys', { headers: admin, body: { name: scopes.join(), scopes } }))
          .body.data
      const query = await make(['query'])
      const trigger = await make(['trigger'])
      const config = await make(['config'])
      const h = (k: { key: string }) => ({ 'x-api-key': k.key })
      const note = { type: 'x', channel: 'audit', title: 't' }
      expect((await call('GET', '/api/v1/logs', { headers: h(query) })).status).toBe(200)
      expect((await call('POST', '/api/v1/notify', { headers: h(query), body: note })).status).toBe(403)
      expect((await call('POST', '/api/v1/notify', { headers: h(trigger), body: note })).body.code).toBe(0)
      expect((await call('GET', '/api/v1/logs', { headers: h(trigger) })).status).toBe(403)
      const rule = { id: 'srv-rule', match: 'level == "error"', route: [{ channels: ['audit'] }] }
      expect((await call('POST', '/api/v1/rules', { headers: h(config), body: rule })).status).toBeLessThan(
        300,
      )
      expect((await call('POST', '/api/v1/rules', { headers: h(trigger), body: rule })).status).toBe(403)
      for (const [method, path] of [
        ['GET', '/api/games'],
        ['GET', '/api/v1/audit'],
        ['GET', '/api/auth/permissions'],
      ]) {
        const r = await call(method, path, { headers: h(config) })
        expect([path, r.status]).toEqual([path, 403])
        expect(r.body.message).toContain('a server key reaches only')
      }
      const batch = await call('POST', '/v1/batch', { headers: h(trigger), body: [] })
      expect(batch.status).toBe(403)
      expect(batch.body.message).toContain('a server key reaches only')
      expect((await call('DELETE', `/api/v1/server-keys/${trigger.id}`, { headers: admin })).status).toBe(200)
      expect((await call('POST', '/api/v1/notify', { headers: h(trigger), body: note })).status).toBe(401)
      expect(
        (await call('POST', '/api/v1/notify', { headers: { 'x-api-key': 'lsk_forged' }, body: note })).status,
      ).toBe(401)
    })

    test('application tokens are refused by name on the routes of users', async () => {
      const token = (
        await call('POST', '/api/v1/app-tokens', {
          headers: admin,
          body: { name: 'integrator', scopes: ['query'] },
        })
      ).body.data.token
      const r = await call('GET', '/api/games', { headers: { authorization: `Bearer ${token}` } })
      expect(r.status).toBe(403)
      expect(r.body.message).toContain('an application token reaches only')
    })

    test('the OpenAPI description names the two kinds of x-api-key and where each goes', async () => {
      const doc = (await call('GET', '/v3/api-docs')).body
      expect(doc.components.securitySchemes.serverKey).toMatchObject({
        type: 'apiKey',
        in: 'header',
        name: 'x-api-key',
      })
      expect(doc.components.securitySchemes.apiKey.description).toContain('SDK key')
      const schemes = (method: string, path: string) =>
        (doc.paths[path][method].security as Array<Record<string, string[]>>).flatMap((s) => Object.keys(s))
      expect(schemes('post', '/api/v1/notify')).toContain('serverKey')
      expect(schemes('post', '/api/v1/notify')).not.toContain('apiKey')
      expect(schemes('get', '/api/v1/logs')).not.toContain('apiKey')
      expect(schemes('post', '/v1/batch')).toContain('apiKey')
      expect(schemes('get', '/api/experiments/{id}/assign')).toContain('apiKey')
      expect(schemes('post', '/api/v1/server-keys')).toEqual(['bearer', 'adminToken'])
    })
  })
})
