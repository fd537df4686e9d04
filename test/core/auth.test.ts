import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { ADMIN_PASSWORD, type TestApp, forEachEngine, makeApp } from '../helpers'

forEachEngine((engine) => {
  let a: TestApp
  beforeAll(async () => {
    a = await makeApp(engine, { plugins: { games: {} } })
  })
  afterAll(() => a.stop())

  const login = (email: string, password: string) =>
    a.req('POST', '/api/auth/login', { body: { email, password } })

  describe('spec 1 login and refresh', () => {
    test('the bootstrap admin logs in: token, refreshToken, expiresIn, user', async () => {
      const r = await login('admin@localhost', ADMIN_PASSWORD)
      expect(r.status).toBe(200)
      expect(r.body).toMatchObject({
        expiresIn: 900,
        user: { email: 'admin@localhost', roles: ['admin'], name: 'Administrator' },
      })
      expect(r.body.token.split('.')).toHaveLength(3)
      expect(typeof r.body.refreshToken).toBe('string')
      expect((await a.req('GET', '/api/games', { token: r.body.token })).status).toBe(200)
    })

    test('wrong password or unknown user: 401; missing field: 400 naming it', async () => {
      for (const [email, pw] of [
        ['admin@localhost', 'wrong'],
        ['nobody@x.y', ADMIN_PASSWORD],
      ]) {
        const r = await login(email, pw)
        expect(r.status).toBe(401)
        expect(r.body.error).toBe('invalid_credentials')
      }
      const r = await a.req('POST', '/api/auth/login', { body: { email: 'admin@localhost' } })
      expect(r.status).toBe(400)
      expect(r.body.message).toContain('body.password')
    })

    test('refresh rotates: the new pair works, the old refresh token is single-use and its reuse revokes the family', async () => {
      const first = (await login('admin@localhost', ADMIN_PASSWORD)).body
      const second = await a.req('POST', '/api/auth/refresh', { body: { refreshToken: first.refreshToken } })
      expect(second.status).toBe(200)
      expect(second.body.refreshToken).not.toBe(first.refreshToken)
      expect((await a.req('GET', '/api/games', { token: second.body.token })).status).toBe(200)
      // Replaying the first token: refused, and the legitimate second token dies with it.
      const replay = await a.req('POST', '/api/auth/refresh', { body: { refreshToken: first.refreshToken } })
      expect(replay.status).toBe(401)
      expect(replay.body.message).toContain('reused')
      expect(
        (await a.req('POST', '/api/auth/refresh', { body: { refreshToken: second.body.refreshToken } }))
          .status,
      ).toBe(401)
      // Another login is a separate family and still works.
      const other = (await login('admin@localhost', ADMIN_PASSWORD)).body
      expect(
        (await a.req('POST', '/api/auth/refresh', { body: { refreshToken: other.refreshToken } })).status,
      ).toBe(200)
      expect((await a.req('POST', '/api/auth/refresh', { body: { refreshToken: 'garbage' } })).status).toBe(
        401,
      )
      expect((await a.req('POST', '/api/auth/refresh', { body: {} })).status).toBe(400)
    })

    test('concurrent refreshes of one token: exactly one succeeds', async () => {
      const { refreshToken } = (await login('admin@localhost', ADMIN_PASSWORD)).body
      const results = await Promise.all(
        Array.from({ length: 6 }, () => a.req('POST', '/api/auth/refresh', { body: { refreshToken } })),
      )
      expect(results.filter((r) => r.status === 200)).toHaveLength(1)
    })
  })

  describe('spec 2 login family (/api/v1/auth)', () => {
    test('login by username answers {token, user: {id, username, role}} with no envelope', async () => {
      const r = await a.req('POST', '/api/v1/auth/login', {
        body: { username: 'admin', password: ADMIN_PASSWORD },
      })
      expect(r.status).toBe(200)
      expect(Object.keys(r.body).sort()).toEqual(['token', 'user'])
      expect(r.body.user).toMatchObject({ username: 'admin', role: 'admin' })
      const bad = await a.req('POST', '/api/v1/auth/login', { body: { username: 'admin', password: 'nope' } })
      expect(bad.status).toBe(401)
      expect(bad.body).toMatchObject({ code: 401 })
    })

    test("logout ends that login at once (access and refresh token), not the user's other logins", async () => {
      const first = (await login('admin@localhost', ADMIN_PASSWORD)).body
      const other = (await login('admin@localhost', ADMIN_PASSWORD)).body
      const renewed = (
        await a.req('POST', '/api/auth/refresh', { body: { refreshToken: first.refreshToken } })
      ).body
      expect(typeof renewed.token).toBe('string')
      expect((await a.req('POST', '/api/auth/logout')).status).toBe(401)
      expect((await a.req('POST', '/api/auth/logout', { token: 'x.y.z' })).status).toBe(401)
      const out = await a.req('POST', '/api/auth/logout', { token: renewed.token })
      expect(out.status).toBe(204)
      // Both tokens of the family, the one before the renewal too, stop working; so does renewing.
      for (const token of [first.token, renewed.token])
        expect((await a.req('GET', '/api/games', { token })).status).toBe(401)
      const again = await a.req('POST', '/api/auth/refresh', { body: { refreshToken: renewed.refreshToken } })
      expect(again.status).toBe(401)
      // Said as what happened: signed out, not reused.
      expect(again.body.message).toContain('signed out')
      expect((await a.req('GET', '/api/games', { token: other.token })).status).toBe(200)
    })

    test('refresh takes the Bearer header, the service_token cookie or the token query; 401 otherwise', async () => {
      const { token } = (
        await a.req('POST', '/api/v1/auth/login', { body: { username: 'admin', password: ADMIN_PASSWORD } })
      ).body
      for (const opts of [{ token }, { headers: { cookie: `other=1; service_token=${token}` } }]) {
        const r = await a.req('POST', '/api/v1/auth/refresh', opts)
        expect(r.status).toBe(200)
        expect(r.body.code).toBe(0)
        expect(typeof r.body.data.token).toBe('string')
      }
      const q = await a.req('POST', `/api/v1/auth/refresh?token=${token}`)
      expect(q.status).toBe(200)
      expect((await a.req('POST', '/api/v1/auth/refresh')).status).toBe(401)
      expect((await a.req('POST', '/api/v1/auth/refresh', { token: 'x.y.z' })).status).toBe(401)
    })

    test('me: the current user; 401 without a token; 404 once the user is deleted', async () => {
      const admin = await a.token('admin')
      const u = await a.req('POST', '/api/users', {
        token: admin,
        body: { email: 'temp@x.io', username: 'temp', password: 'password-123', roles: ['analyst'] },
      })
      const { token } = (
        await a.req('POST', '/api/v1/auth/login', { body: { username: 'temp', password: 'password-123' } })
      ).body
      const me = await a.req('GET', '/api/v1/auth/me', { token })
      expect(me.body).toEqual({
        code: 0,
        message: 'ok',
        data: { id: u.body.id, username: 'temp', role: 'analyst' },
      })
      expect((await a.req('GET', '/api/v1/auth/me')).status).toBe(401)
      // Deleted users: me is 404 for a token minted before the deletion is still cryptographically valid.
      await a.db.run('DELETE FROM users WHERE id = ?', [u.body.id])
      expect((await a.req('GET', '/api/v1/auth/me', { token })).status).toBe(404)
    })
  })

  describe('GET /api/auth/permissions', () => {
    test('a user reads its roles, the permissions they grant and the role table; 401 without a token', async () => {
      const viewer = await a.req('GET', '/api/auth/permissions', { token: await a.token('viewer') })
      expect(viewer.status).toBe(200)
      expect(viewer.body.roles).toEqual(['viewer'])
      expect(viewer.body.permissions).toContain('games:read')
      expect(viewer.body.permissions).not.toContain('games:write')
      expect(viewer.body.permissions).not.toContain('users:read')
      expect(viewer.body.table.users).toEqual({ read: ['admin', 'operator'], write: ['admin', 'operator'] })
      const operator = await a.req('GET', '/api/auth/permissions', { token: await a.token('operator') })
      expect(operator.body.permissions).toEqual(expect.arrayContaining(['games:write', 'users:write']))
      expect(operator.body.permissions).not.toContain('apikeys:write')
      expect((await a.req('GET', '/api/auth/permissions')).status).toBe(401)
      expect((await a.req('GET', '/api/auth/permissions', { token: 'not.a.jwt' })).status).toBe(401)
    })
  })

  describe('users', () => {
    test('admin and operator manage users; passwords never come back', async () => {
      // An operator grants only roles it holds (docs/security.md): analyst, not developer.
      for (const [role, granted] of [
        ['admin', 'developer'],
        ['operator', 'analyst'],
      ]) {
        const t = await a.token(role)
        const c = await a.req('POST', '/api/users', {
          token: t,
          body: { email: `Dev.${role}@Studio.io`, password: 'password-123', roles: [granted] },
        })
        expect(c.status).toBe(200)
        expect(c.body).toMatchObject({
          email: `dev.${role}@studio.io`,
          roles: [granted],
          disabled: false,
        })
        expect(JSON.stringify(c.body)).not.toContain('password')
        const g = await a.req('GET', `/api/users/${c.body.id}`, { token: t })
        expect(g.body.id).toBe(c.body.id)
        const u = await a.req('PUT', `/api/users/${c.body.id}`, {
          token: t,
          body: { roles: [granted, 'viewer'], name: 'Dev' },
        })
        expect(u.body).toMatchObject({ roles: [granted, 'viewer'], name: 'Dev' })
      }
      const list = await a.req('GET', '/api/users?page=0&size=100', { token: await a.token('admin') })
      expect(list.body.total).toBe(list.body.items.length)
      expect(list.body.items.some((u: { email: string }) => u.email === 'admin@localhost')).toBe(true)
    })

    test('bad input 400 naming the field; duplicate 409; unknown 404; other roles 403', async () => {
      const t = await a.token('admin')
      const cases: Array<[unknown, string]> = [
        [{ email: 'x@y.z', password: 'short', roles: ['viewer'] }, 'body.password'],
        [{ email: 'x@y.z', password: 'password-123', roles: ['king'] }, 'body.roles'],
        [{ email: 'not-an-email', password: 'password-123', roles: ['viewer'] }, 'body.email'],
        [{ email: 'x@y.z', password: 'password-123', roles: [] }, 'body.roles'],
        // 104 characters as sent, 204 once lowercased ('İ' is two): past MySQL's column.
        [{ email: `${'İ'.repeat(100)}@y.z`, password: 'password-123', roles: ['viewer'] }, 'body.email'],
      ]
      for (const [body, field] of cases) {
        const r = await a.req('POST', '/api/users', { token: t, body })
        expect(r.status).toBe(400)
        expect(r.body.message).toContain(field)
      }
      const body = { email: 'dup@y.z', password: 'password-123', roles: ['viewer'] }
      expect((await a.req('POST', '/api/users', { token: t, body })).status).toBe(200)
      expect((await a.req('POST', '/api/users', { token: t, body })).status).toBe(409)
      // A username that differs from a user's only by case would read as that user: 409.
      const lookalike = await a.req('POST', '/api/users', {
        token: t,
        body: { email: 'other@y.z', username: 'ADMIN', password: 'password-123', roles: ['viewer'] },
      })
      expect(lookalike.status).toBe(409)
      expect(lookalike.body.message).toContain("username 'admin'")
      const twice = await Promise.all(
        ['Case.Pair', 'case.pair'].map((username, i) =>
          a.req('POST', '/api/users', {
            token: t,
            body: { email: `pair${i}@y.z`, username, password: 'password-123', roles: ['viewer'] },
          }),
        ),
      )
      expect(twice.map((r) => r.status).sort()).toEqual([200, 409])
      expect((await a.req('GET', '/api/users/nope', { token: t })).status).toBe(404)
      expect((await a.req('PUT', '/api/users/nope', { token: t, body: { name: 'x' } })).status).toBe(404)
      expect((await a.req('DELETE', '/api/users/nope', { token: t })).status).toBe(404)
      for (const role of ['viewer', 'analyst', 'developer']) {
        expect((await a.req('GET', '/api/users', { token: await a.token(role) })).status).toBe(403)
        expect((await a.req('POST', '/api/users', { token: await a.token(role), body })).status).toBe(403)
      }
      expect((await a.req('GET', '/api/users')).status).toBe(401)
    })

    test('a field the user routes do not take (email on PUT) is 400 naming it, and nothing changes (audit L5)', async () => {
      const t = await a.token('operator')
      const c = await a.req('POST', '/api/users', {
        token: t,
        body: { email: 'fixed@y.z', password: 'password-123', roles: ['viewer'], name: 'Fixed' },
      })
      expect(c.status).toBe(200)
      for (const [body, field] of [
        [{ email: 'new@x.io' }, 'body.email'],
        [{ name: 'Renamed', username: 'renamed' }, 'body.username'],
        [{ name: 'Renamed', isAdmin: true }, 'body.isAdmin'],
      ] as const) {
        const r = await a.req('PUT', `/api/users/${c.body.id}`, { token: t, body })
        expect(r.status).toBe(400)
        expect(r.body).toMatchObject({ error: 'bad_request', path: `/api/users/${c.body.id}` })
        expect(r.body.message).toContain(`${field}: unknown field`)
      }
      expect((await a.req('GET', `/api/users/${c.body.id}`, { token: t })).body).toMatchObject({
        email: 'fixed@y.z',
        name: 'Fixed',
      })
      const extra = await a.req('POST', '/api/users', {
        token: t,
        body: { email: 'extra@y.z', password: 'password-123', roles: ['viewer'], disabled: true },
      })
      expect(extra.status).toBe(400)
      expect(extra.body.message).toContain('body.disabled: unknown field')
      expect((await login('extra@y.z', 'password-123')).status).toBe(401)
    })

    test('disabling a user stops its tokens and logins at once; deleting does too', async () => {
      const t = await a.token('admin')
      const u = (
        await a.req('POST', '/api/users', {
          token: t,
          body: { email: 'gone@y.z', password: 'password-123', roles: ['viewer'] },
        })
      ).body
      const session = (await login('gone@y.z', 'password-123')).body
      expect((await a.req('GET', '/api/games', { token: session.token })).status).toBe(200)
      expect((await a.req('POST', `/api/users/${u.id}/disable`, { token: t })).body.disabled).toBe(true)
      expect((await a.req('GET', '/api/games', { token: session.token })).status).toBe(401)
      // The right password answers as a wrong one: nothing tells a guesser it was right.
      const right = await login('gone@y.z', 'password-123')
      const wrong = await login('gone@y.z', 'password-124')
      expect([right.status, right.body.error, right.body.message]).toEqual([
        401,
        wrong.body.error,
        wrong.body.message,
      ])
      expect(
        (await a.req('POST', '/api/auth/refresh', { body: { refreshToken: session.refreshToken } })).status,
      ).toBe(401)
      expect(
        (await a.req('PUT', `/api/users/${u.id}`, { token: t, body: { disabled: false } })).body.disabled,
      ).toBe(false)
      const again = (await login('gone@y.z', 'password-123')).body
      expect((await a.req('GET', '/api/games', { token: again.token })).status).toBe(200)
      expect((await a.req('DELETE', `/api/users/${u.id}`, { token: t })).status).toBe(204)
      expect((await a.req('GET', '/api/games', { token: again.token })).status).toBe(401)
    })
  })
})
