import { afterAll, beforeAll, expect, test } from 'bun:test'
import motd from '../example/motd'
import { type TestApp, forEachEngine, makeApp } from '../helpers'
import { AGENT_TOKEN, GAME, SECURITY_APP, allPluginsWith, forgedToken } from './lib'

/*
 * /healthz and /readyz are public: every caller sees each check's status, and only a user's
 * credentials that may read `ops` see the error texts (they quote the store, the network and the
 * consumers' code). Walked as each kind of caller, with a check that is down saying why.
 */
const WHY = 'told to be down'

forEachEngine((engine) => {
  let a: TestApp
  const headers = new Map<string, Record<string, string>>()
  beforeAll(async () => {
    a = await makeApp(engine, {
      ...SECURITY_APP,
      plugins: { ...allPluginsWith(), motd: { healthy: false } },
      extraPlugins: { motd },
    })
    const admin = await a.token('admin')
    const g = await a.req('POST', '/api/games', { token: admin, body: { ...GAME, name: 'Health Walk' } })
    const k = await a.req('POST', '/api/api-keys', {
      token: admin,
      body: { name: 'sdk', gameId: g.body.id, environment: 'prod' },
    })
    headers.set('none', {})
    headers.set('forged', { authorization: `Bearer ${forgedToken()}` })
    headers.set('sdk key', { 'x-api-key': k.body.key })
    headers.set('agent token', { 'x-agent-token': AGENT_TOKEN })
    for (const role of ['viewer', 'operator', 'admin'])
      headers.set(role, { authorization: `Bearer ${await a.token(role)}` })
  })
  afterAll(() => a.stop())

  test('the error texts go to signed-in users only; the status to everyone', async () => {
    for (const path of ['/healthz', '/readyz'])
      for (const [who, h] of headers) {
        const r = await a.req('GET', path, { headers: h })
        expect([who, r.status]).toEqual([who, 503])
        expect([who, r.body.checks.motd.status]).toEqual([who, 'down'])
        const shown = JSON.stringify(r.body).includes(WHY)
        expect([who, shown]).toEqual([who, ['viewer', 'operator', 'admin'].includes(who)])
      }
  })
})
