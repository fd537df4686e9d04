import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { type TestApp, forEachEngine } from '../helpers'
import { ADMIN_TOKEN, type Call, PASSWORD, client, login, makeUser, securityApp } from './lib'

/*
 * Issue 34 point 1, no self-promotion: the requests of the issue, over HTTP, and the rules of
 * docs/security.md "Who may manage users".
 */
forEachEngine((engine) => {
  let app: TestApp
  let call: Call
  let n = 0
  beforeAll(async () => {
    app = await securityApp(engine, { plugins: { games: {} } })
    call = client(app.listen())
  })
  afterAll(() => app.stop())

  /** A user with `roles` and a spec 1 session of it. */
  const person = async (roles: string[]) => {
    const u = await makeUser(app, `p${++n}`, roles)
    const s = await login(call, u.email)
    return { id: u.id, email: u.email, token: s.token, refreshToken: s.refreshToken }
  }
  const as = (token: string) => ({ authorization: `Bearer ${token}` })
  const newUser = (roles: string[]) => ({ email: `new${++n}@security.test`, password: PASSWORD, roles })

  describe('no self-promotion', () => {
    test('an operator cannot create an admin, make itself admin, or refresh into one (the requests of the issue)', async () => {
      const op = await person(['operator'])
      const created = await call('POST', '/api/users', { headers: as(op.token), body: newUser(['admin']) })
      expect(created.status).toBe(403)
      expect(created.body.message).toContain("cannot grant the role 'admin'")
      const self = await call('PUT', `/api/users/${op.id}`, {
        headers: as(op.token),
        body: { roles: ['admin'] },
      })
      expect(self.status).toBe(403)
      const refreshed = await call('POST', '/api/auth/refresh', { body: { refreshToken: op.refreshToken } })
      expect(refreshed.status).toBe(200)
      expect(refreshed.body.user.roles).toEqual(['operator'])
      expect((await call('GET', '/api/users', { headers: as(refreshed.body.token) })).status).toBe(200)
      expect(
        (await call('POST', '/api/api-keys', { headers: as(refreshed.body.token), body: { name: 'x' } }))
          .status,
      ).toBe(403)
    })

    test('a role is granted only by who holds it: an operator makes operators, analysts and viewers, not developers', async () => {
      const op = await person(['operator'])
      for (const role of ['operator', 'analyst', 'viewer'])
        expect(
          (await call('POST', '/api/users', { headers: as(op.token), body: newUser([role]) })).status,
        ).toBe(200)
      const dev = await call('POST', '/api/users', { headers: as(op.token), body: newUser(['developer']) })
      expect(dev.status).toBe(403)
      expect(dev.body.message).toContain('apikeys:write')
      const viewer = (await call('POST', '/api/users', { headers: as(op.token), body: newUser(['viewer']) }))
        .body
      const promoted = await call('PUT', `/api/users/${viewer.id}`, {
        headers: as(op.token),
        body: { roles: ['viewer', 'developer'] },
      })
      expect(promoted.status).toBe(403)
      expect(
        (
          await call('PUT', `/api/users/${viewer.id}`, {
            headers: as(op.token),
            body: { roles: ['analyst'] },
          })
        ).body.roles,
      ).toEqual(['analyst'])
    })

    test('only an admin changes, disables or deletes an admin, or sets another user password', async () => {
      const op = await person(['operator'])
      const admin = await person(['admin'])
      const other = await person(['analyst'])
      const refused: Array<[string, string, unknown?]> = [
        ['PUT', `/api/users/${admin.id}`, { password: 'taken-over-1' }],
        ['PUT', `/api/users/${admin.id}`, { name: 'renamed' }],
        ['PUT', `/api/users/${admin.id}`, { disabled: true }],
        ['POST', `/api/users/${admin.id}/disable`],
        ['DELETE', `/api/users/${admin.id}`],
        ['PUT', `/api/users/${other.id}`, { password: 'taken-over-1' }],
      ]
      for (const [method, path, body] of refused) {
        const r = await call(method, path, { headers: as(op.token), body })
        expect([method, path, r.status]).toEqual([method, path, 403])
        expect(r.body.message).toMatch(/only an admin/)
      }
      // The admin is untouched: still enabled, still its password.
      expect((await login(call, admin.email)).user.id).toBe(admin.id)
      // An operator sets its own password with the current one; an admin sets anyone's and manages admins.
      const own = (body: object) => call('PUT', `/api/users/${op.id}`, { headers: as(op.token), body })
      const bare = await own({ password: 'new-password-1' })
      expect([bare.status, bare.body.message]).toEqual([400, expect.stringContaining('body.currentPassword')])
      const wrong = await own({ password: 'new-password-1', currentPassword: 'not-it-at-all' })
      expect([wrong.status, wrong.body.error]).toEqual([403, 'invalid_credentials'])
      expect((await own({ password: 'new-password-1', currentPassword: PASSWORD })).status).toBe(200)
      expect((await login(call, op.email, 'new-password-1')).user.id).toBe(op.id)
      expect(
        (
          await call('PUT', `/api/users/${other.id}`, {
            headers: as(admin.token),
            body: { password: 'reset-pass-1' },
          })
        ).status,
      ).toBe(200)
      const second = await call('POST', '/api/users', { headers: as(admin.token), body: newUser(['admin']) })
      expect(second.status).toBe(200)
      expect(
        (await call('DELETE', `/api/users/${second.body.id}`, { headers: as(admin.token) })).status,
      ).toBe(204)
    })

    test('only an admin enables a disabled user; any user manager may disable one', async () => {
      const op = await person(['operator'])
      const admin = await person(['admin'])
      const other = await person(['analyst'])
      const enable = (token: string) =>
        call('PUT', `/api/users/${other.id}`, { headers: as(token), body: { disabled: false } })
      expect(
        (await call('POST', `/api/users/${other.id}/disable`, { headers: as(admin.token) })).status,
      ).toBe(200)
      const back = await enable(op.token)
      expect([back.status, back.body.message]).toEqual([403, 'only an admin may enable a disabled user'])
      expect(
        (await call('POST', '/api/auth/login', { body: { email: other.email, password: PASSWORD } })).status,
      ).toBe(401)
      // An operator's own stop is the admin's to lift too; `disabled: false` on an enabled user is no change.
      expect((await enable(admin.token)).body.disabled).toBe(false)
      expect((await enable(op.token)).status).toBe(200)
      expect((await call('POST', `/api/users/${other.id}/disable`, { headers: as(op.token) })).status).toBe(
        200,
      )
      expect((await enable(op.token)).status).toBe(403)
      expect((await enable(admin.token)).body.disabled).toBe(false)
    })

    test('nobody changes their own roles, admins included; sending them back unchanged is no change', async () => {
      const admin = await person(['admin', 'viewer'])
      const r = await call('PUT', `/api/users/${admin.id}`, {
        headers: as(admin.token),
        body: { roles: ['admin'] },
      })
      expect(r.status).toBe(403)
      expect(r.body.message).toContain('own roles')
      const same = await call('PUT', `/api/users/${admin.id}`, {
        headers: as(admin.token),
        body: { roles: ['viewer', 'admin'], name: 'Same Roles' },
      })
      expect(same.status).toBe(200)
      expect(same.body.name).toBe('Same Roles')
    })

    test('the last active admin cannot be disabled, demoted or deleted (409); with another admin it can', async () => {
      // The bootstrap admin and every admin made so far are disabled first, by the admin token.
      const tokenHeaders = { 'x-admin-token': ADMIN_TOKEN }
      const list = (await call('GET', '/api/users?size=200', { headers: tokenHeaders })).body.items as Array<{
        id: string
        roles: string[]
        disabled: boolean
      }>
      const last = await person(['admin'])
      for (const u of list)
        if (u.roles.includes('admin') && !u.disabled)
          expect((await call('POST', `/api/users/${u.id}/disable`, { headers: tokenHeaders })).status).toBe(
            200,
          )
      for (const [method, path, body] of [
        ['POST', `/api/users/${last.id}/disable`],
        ['PUT', `/api/users/${last.id}`, { disabled: true }],
        ['PUT', `/api/users/${last.id}`, { roles: ['operator'] }],
        ['DELETE', `/api/users/${last.id}`],
      ] as Array<[string, string, unknown?]>) {
        const r = await call(method, path, { headers: tokenHeaders, body })
        expect([method, path, r.status]).toEqual([method, path, 409])
        expect(r.body.message).toContain('last active admin')
      }
      expect((await call('POST', `/api/users/${last.id}/disable`, { headers: as(last.token) })).status).toBe(
        409,
      )
      // Both of two admins disabled at once: one succeeds, the other is refused.
      const other = await person(['admin'])
      const [x, y] = await Promise.all([
        call('POST', `/api/users/${other.id}/disable`, { headers: tokenHeaders }),
        call('POST', `/api/users/${last.id}/disable`, { headers: tokenHeaders }),
      ])
      expect([x.status, y.status].sort()).toEqual([200, 409])
      const active = (await call('GET', '/api/users?size=200', { headers: tokenHeaders })).body.items.filter(
        (u: { roles: string[]; disabled: boolean }) => u.roles.includes('admin') && !u.disabled,
      )
      expect(active).toHaveLength(1)
    })
  })
})
