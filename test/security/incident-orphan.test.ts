import { afterAll, beforeAll, expect, test } from 'bun:test'
import { ownerApp } from '../../plugins/rules/owner-fixture'
import { forEachEngine } from '../helpers'
import { AGENT_TOKEN, SIGNING_SECRET } from './lib'

type Owners = Awaited<ReturnType<typeof ownerApp>>

/*
 * An incident whose opener is gone (a deleted user, a revoked application token or server key) is
 * anyone's: the next credential whose notification resolves its alert resolves it
 * (plugins/rules/incidents.ts, core/auth/gone.ts). So orphaning someone's incident must take a
 * credential that may revoke or delete: application tokens and users are the admin's, server keys
 * the `apikeys` area's (developers). Every other kind of caller is refused, the opener stays, and
 * another team's resolve stays refused.
 */
forEachEngine((engine) => {
  let f: Owners
  let a: Owners['a']
  let admin: string
  let sdkKey: string
  /** Team A's application token and a server key, each the opener of an open incident. */
  let appId: string
  let serverId: string
  let serverKey: string
  beforeAll(async () => {
    f = await ownerApp(engine, {
      plugins: { games: {}, ingest: { signing_secret: SIGNING_SECRET }, agents: { token: AGENT_TOKEN } },
    })
    ;({ a, admin } = f)
    sdkKey = (await a.auth.createApiKey({ name: 'client' })).key
    const tokens = (await a.req('GET', '/api/v1/app-tokens', { token: admin })).body.data.tokens
    appId = tokens.find((t: { name: string }) => t.name === 'team-a').id
    const made = (
      await a.req('POST', '/api/v1/server-keys', {
        token: admin,
        body: { name: 'pager-src', scopes: ['trigger'] },
      })
    ).body.data
    ;[serverId, serverKey] = [made.id, made.key]
    expect((await f.hold(f.teamA, 'orphan-app')).body.code).toBe(0)
    expect(
      (
        await a.req('POST', '/api/v1/notify', {
          headers: { 'x-api-key': serverKey },
          body: { type: 'svc.db', level: 'error', title: 'db', params: { alert_id: 'orphan-key' } },
        })
      ).body.code,
    ).toBe(0)
  })
  afterAll(() => f.stop())

  const open = async (alert: string) => {
    const [one] = (await a.req('GET', `/api/v1/incidents?alert_id=${alert}`, { token: admin })).body.data
      .incidents
    return one.resolved_at === undefined
  }

  test('only the admin revokes an application token, only the admin or a developer a server key: every other caller is refused', async () => {
    // A known credential of a kind these routes do not take is 403 (core/auth/principal.ts `REACH`).
    const callers: Array<[string, { token?: string | null; headers?: Record<string, string> }, number]> = [
      ['no token', { token: null }, 401],
      ['viewer', { token: await a.token('viewer') }, 403],
      ['analyst', { token: await a.token('analyst') }, 403],
      ['operator', { token: await a.token('operator') }, 403],
      ['developer', { token: await a.token('developer') }, 403],
      ['SDK key', { token: null, headers: { 'x-api-key': sdkKey } }, 403],
      ['agent token', { token: null, headers: { 'x-agent-token': AGENT_TOKEN } }, 401],
      ['application token', { token: null, headers: { 'x-app-token': f.teamB } }, 403],
    ]
    for (const [who, c, status] of callers) {
      const tokenDelete = await a.req('DELETE', `/api/v1/app-tokens/${appId}`, c)
      expect([who, tokenDelete.status]).toEqual([who, status])
      if (who === 'developer') continue
      const keyDelete = await a.req('DELETE', `/api/v1/server-keys/${serverId}`, c)
      expect([who, keyDelete.status]).toEqual([who, status])
    }
    // Both openers live: another team's resolve is refused, both incidents stay open.
    await f.resolved({ app: f.teamB }, 'orphan-app', 'svc.db')
    await f.resolved({ app: f.teamB }, 'orphan-key', 'svc.db')
    expect(await open('orphan-app')).toBe(true)
    expect(await open('orphan-key')).toBe(true)
  })

  test("a developer's revoke of a server key is the one way past the admin: the key's incident is then anyone's", async () => {
    const developer = await a.token('developer')
    expect((await a.req('DELETE', `/api/v1/server-keys/${serverId}`, { token: developer })).status).toBe(200)
    // The revoked key sends nothing more, and takes over nothing.
    const again = await a.req('POST', '/api/v1/notify', {
      headers: { 'x-api-key': serverKey },
      body: {
        type: 'svc.db',
        level: 'info',
        title: 'up',
        params: { alert_id: 'orphan-app', status: 'resolved' },
      },
    })
    expect(again.status).toBe(401)
    expect(await open('orphan-app')).toBe(true)
    await f.resolved({ app: f.teamB }, 'orphan-key', 'svc.db')
    expect(await open('orphan-key')).toBe(false)
  })
})
