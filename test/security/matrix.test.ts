import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { type TestApp, forEachEngine } from '../helpers'
import {
  ADMIN_TOKEN,
  AGENT_TOKEN,
  CONFIG,
  type Call,
  GAME,
  client,
  expiredToken,
  forgedToken,
  inParallel,
  makeUser,
  securityApp,
  session,
  signature,
} from './lib'
import { type Kind, type Outcome, ROLES, SCOPES, expected, nameOf, readPolicy } from './policy'

/*
 * Issue 34 point 11: every operation `/v3/api-docs` lists, as every role and every kind of
 * credential, over a real socket, against what docs/security.md declares. The operations come
 * from the running server's document, so a route added tomorrow is in the matrix the day it
 * lands, and fails it until docs/security.md says who reaches it.
 */

const KINDS: Kind[] = [
  { kind: 'none' },
  { kind: 'forged' },
  { kind: 'expired' },
  { kind: 'refresh' },
  { kind: 'disabled' },
  { kind: 'agentToken' },
  { kind: 'signature' },
  { kind: 'adminToken' },
  ...ROLES.map((role) => ({ kind: 'role' as const, role })),
  { kind: 'sdkKey', on: 'own' },
  { kind: 'sdkKey', on: 'other' },
  ...SCOPES.map((scope) => ({ kind: 'serverKey' as const, scope })),
  ...SCOPES.map((scope) => ({ kind: 'appToken' as const, scope })),
]
const METHODS = ['get', 'put', 'post', 'delete', 'patch']
/** Sent as every body: JSON of the wrong type for every operation, so nothing reached is written. */
const BODY = '"matrix"'

forEachEngine((engine) => {
  const policy = readPolicy()
  let app: TestApp
  let call: Call
  let ops: Array<{ method: string; path: string }>
  const games: Record<'own' | 'other', { id: string; experiment: string }> = {
    own: { id: '', experiment: '' },
    other: { id: '', experiment: '' },
  }
  const headers = new Map<string, (body: string | undefined) => Promise<Record<string, string>>>()

  beforeAll(async () => {
    app = await securityApp(engine)
    call = client(app.listen())
    const admin = { 'x-admin-token': ADMIN_TOKEN }
    for (const side of ['own', 'other'] as const) {
      const g = await call('POST', '/api/games', { headers: admin, body: { name: `game ${side}`, ...GAME } })
      const e = await call('POST', '/api/experiments', {
        headers: admin,
        body: { gameId: g.body.id, environment: 'prod', name: `exp ${side}`, config: CONFIG },
      })
      // Running: the SDK key's assignment reaches what the public configuration shows.
      await call('POST', `/api/experiments/${e.body.id}/publish`, { headers: admin })
      games[side] = { id: g.body.id, experiment: e.body.id }
    }
    const sdk = await app.auth.createApiKey({ name: 'sdk', gameId: games.own.id, environment: 'prod' })
    const bearer = (token: string) => async () => ({ authorization: `Bearer ${token}` })
    const roleTokens = new Map<string, string>()
    for (const role of ROLES) {
      const u = await makeUser(app, `matrix-${role}`, [role])
      roleTokens.set(role, (await session(app, u.id)).token)
    }
    const gone = await makeUser(app, 'matrix-disabled', ['admin'])
    const goneToken = (await session(app, gone.id)).token
    await app.auth.updateUser(gone.id, { disabled: true })
    const adminUser = await app.auth.users.find('username', 'matrix-admin')
    const { refreshToken } = await session(app, adminUser!.id)
    for (const k of KINDS) {
      const n = nameOf(k)
      if (k.kind === 'none') headers.set(n, async () => ({}))
      if (k.kind === 'forged') headers.set(n, bearer(forgedToken()))
      if (k.kind === 'expired') headers.set(n, bearer(expiredToken(adminUser!.id)))
      if (k.kind === 'refresh') headers.set(n, bearer(refreshToken))
      if (k.kind === 'disabled') headers.set(n, bearer(goneToken))
      if (k.kind === 'agentToken') headers.set(n, async () => ({ 'x-agent-token': AGENT_TOKEN }))
      if (k.kind === 'signature') headers.set(n, (body) => signature(body ?? ''))
      if (k.kind === 'adminToken') headers.set(n, async () => admin)
      if (k.kind === 'role') headers.set(n, bearer(roleTokens.get(k.role)!))
      if (k.kind === 'sdkKey') headers.set(n, async () => ({ 'x-api-key': sdk.key }))
      if (k.kind === 'serverKey') {
        const { token } = await app.auth.serverKeys.create(`matrix ${k.scope}`, [k.scope], 'matrix')
        headers.set(n, async () => ({ 'x-api-key': token }))
      }
      if (k.kind === 'appToken') {
        const { token } = await app.auth.appTokens.create(`matrix ${k.scope}`, [k.scope], 'matrix')
        headers.set(n, async () => ({ 'x-app-token': token }))
      }
    }
    const doc = (await call('GET', '/v3/api-docs')).body as { paths: Record<string, Record<string, unknown>> }
    ops = Object.entries(doc.paths).flatMap(([path, o]) =>
      Object.keys(o)
        .filter((m) => METHODS.includes(m))
        .map((m) => ({ method: m.toUpperCase(), path })),
    )
  })
  afterAll(() => app.stop())

  /** The URL of `path` for `k`: an SDK key names its own game's (or the other game's) resources, others none. */
  const url = (path: string, k: Kind) =>
    path.replace(/\{([^}]+)\}/g, (_, name: string) => {
      if (k.kind !== 'sdkKey') return 'zz-none'
      const g = games[k.on]
      if (name === 'gameId') return g.id
      if (name === 'environment' || name === 'environmentName') return 'prod'
      if (name === 'id' && path.startsWith('/api/experiments/')) return g.experiment
      return 'zz-none'
    })

  describe('the attack matrix', () => {
    test('every operation of /v3/api-docs is in the route table of docs/security.md, and only those', () => {
      const listed = new Set(ops.map((o) => `${o.method} ${o.path}`))
      expect(ops.length).toBeGreaterThan(150)
      expect([...listed].filter((o) => !policy.routes.has(o))).toEqual([])
      expect([...policy.routes.keys()].filter((o) => !listed.has(o))).toEqual([])
    })

    test("the role table of docs/security.md is the server's", async () => {
      const served = (
        await call('GET', '/api/auth/permissions', { headers: { 'x-admin-token': ADMIN_TOKEN } })
      ).body.table as Record<string, { read: string[]; write: string[] }>
      const declared = Object.fromEntries(
        [...policy.roles].map(([area, g]) => [
          area,
          {
            read: ROLES.filter((r) => g.read.has(r) || g.write.has(r)),
            write: ROLES.filter((r) => g.write.has(r)),
          },
        ]),
      )
      expect(served).toEqual(declared)
    })

    test('every role and credential gets exactly the reach docs/security.md states, on every operation', async () => {
      const cells = ops
        .filter((o) => policy.routes.has(`${o.method} ${o.path}`))
        .flatMap((o) => KINDS.map((k) => ({ ...o, k })))
      const wrong: string[] = []
      const broken: string[] = []
      const walk = async ({ method, path, k }: (typeof cells)[number]) => {
        const want = expected(policy, policy.routes.get(`${method} ${path}`)!, k)
        const body = method === 'GET' || method === 'DELETE' ? undefined : BODY
        const h = await headers.get(nameOf(k))!(body)
        const r = await call(method, url(path, k), {
          raw: body,
          headers: body ? { ...h, 'content-type': 'application/json' } : h,
        })
        const got: Outcome = r.status === 401 ? 401 : r.status === 403 ? 403 : 'reach'
        if (got !== want) {
          const why = typeof r.body === 'object' ? (r.body?.message ?? '') : String(r.body).slice(0, 80)
          wrong.push(`${method} ${path} as ${nameOf(k)}: expected ${want}, got ${r.status} ${why}`)
        }
        if (r.status >= 500) broken.push(`${method} ${path} as ${nameOf(k)}: ${r.status}`)
      }
      // Signing out ends the session each credential walks with: those cells go last.
      const ends = (c: (typeof cells)[number]) => `${c.method} ${c.path}` === 'POST /api/auth/logout'
      await inParallel(
        cells.filter((c) => !ends(c)),
        16,
        walk,
      )
      await inParallel(cells.filter(ends), 16, walk)
      expect(wrong.sort()).toEqual([])
      expect(broken.sort()).toEqual([])
      expect(cells.length).toBeGreaterThan(150 * KINDS.length)
      // About 8,000 requests: 3 s on a quiet box, more when the machine is shared.
    }, 60_000)
  })
})
