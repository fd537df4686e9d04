import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { type TestApp, engines, forEachEngine, until } from '../helpers'
import { ADMIN_TOKEN, type Call, PASSWORD, client, login, makeUser, securityApp } from './lib'

/*
 * Issue 34 point 2: a change of trust takes effect at once. A password change, a role change,
 * disabling and a reused refresh token end the user's (or the login family's) access and refresh
 * tokens now, on this instance and on every other one sharing the store.
 */
const admin = { 'x-admin-token': ADMIN_TOKEN }
const as = (token: string) => ({ authorization: `Bearer ${token}` })
let n = 0

forEachEngine((engine) => {
  let app: TestApp
  let call: Call
  beforeAll(async () => {
    app = await securityApp(engine, { plugins: { games: {} } })
    call = client(app.listen())
  })
  afterAll(() => app.stop())

  const person = async (roles: string[]) => {
    const u = await makeUser(app, `t${++n}`, roles)
    return { id: u.id, username: u.username, email: u.email, ...(await login(call, u.email)) }
  }
  /** Whether a session still works: its access token reads, its refresh token rotates. */
  const alive = async (s: { token: string; refreshToken: string }) => ({
    access: (await call('GET', '/api/games', { headers: as(s.token) })).status,
    refresh: (await call('POST', '/api/auth/refresh', { body: { refreshToken: s.refreshToken } })).status,
  })

  test("the periodic read of the store, begun before a user was disabled here, does not hand the user's trust back", async () => {
    const user = await person(['operator'])
    expect((await call('GET', '/api/games', { headers: as(user.token) })).status).toBe(200)
    // The read is held after it read the store (on PostgreSQL a request runs while it waits on the network).
    const users = app.auth.users
    const read = users.withdrawn
    let reads = 0
    let release = () => {}
    const hold = new Promise<void>((r) => {
      release = r
    })
    users.withdrawn = async (since) => {
      const rows = await read(since)
      if (++reads === 1) await hold
      return rows
    }
    try {
      const syncing = app.auth.sync()
      while (reads < 1) await Bun.sleep(1)
      // What it read still trusts the user.
      const off = await call('PUT', `/api/users/${user.id}`, { headers: admin, body: { disabled: true } })
      expect(off.status).toBe(200)
      expect((await call('GET', '/api/games', { headers: as(user.token) })).status).toBe(401)
      release()
      await syncing
      expect((await call('GET', '/api/games', { headers: as(user.token) })).status).toBe(401)
      // The read that met the change was read again.
      expect(reads).toBeGreaterThanOrEqual(2)
    } finally {
      users.withdrawn = read
    }
  })

  test("another instance's notice, read back before a user was disabled here, does not hand the user's trust back", async () => {
    const user = await person(['operator'])
    const users = app.auth.users
    const read = users.maybe
    let reads = 0
    let release = () => {}
    const hold = new Promise<void>((r) => {
      release = r
    })
    users.maybe = async (id) => {
      const u = await read(id)
      if (++reads === 1) await hold
      return u
    }
    // What the notice handler runs (core/auth/sessions.ts), as when another instance changed the user.
    const sessions = (app.auth as unknown as { sessions: { heard(d: object): Promise<void> } }).sessions
    try {
      const hearing = sessions.heard({ user: user.id })
      while (reads < 1) await Bun.sleep(1)
      const off = await call('PUT', `/api/users/${user.id}`, { headers: admin, body: { disabled: true } })
      expect(off.status).toBe(200)
      release()
      await hearing
      expect((await call('GET', '/api/games', { headers: as(user.token) })).status).toBe(401)
      expect(reads).toBeGreaterThanOrEqual(2)
    } finally {
      users.maybe = read
    }
  })

  describe('a change of trust ends sessions at once', () => {
    for (const [what, change] of [
      ['a role change', { roles: ['viewer'] }],
      ['a password change', { password: 'changed-password-1' }],
      ['disabling', { disabled: true }],
    ] as const)
      test(`${what}: the user's access and refresh tokens stop now, other users' do not`, async () => {
        const user = await person(['operator'])
        const bystander = await person(['operator'])
        const v1 = (
          await call('POST', '/api/v1/auth/login', { body: { username: user.username, password: PASSWORD } })
        ).body.token
        expect(
          (await call('PUT', '/api/games/nope', { headers: as(user.token), body: { name: 'x' } })).status,
        ).toBe(404)
        expect((await call('PUT', `/api/users/${user.id}`, { headers: admin, body: change })).status).toBe(
          200,
        )
        expect(await alive(user)).toEqual({ access: 401, refresh: 401 })
        expect(
          (await call('PUT', '/api/games/nope', { headers: as(user.token), body: { name: 'x' } })).status,
        ).toBe(401)
        // Spec 2's tokens of the same user too, and they cannot renew themselves.
        expect((await call('GET', '/api/v1/auth/me', { headers: as(v1) })).status).toBe(401)
        expect((await call('POST', '/api/v1/auth/refresh', { headers: as(v1) })).status).toBe(401)
        expect(await alive(bystander)).toEqual({ access: 200, refresh: 200 })
      })

    test('deleting a user ends its tokens', async () => {
      const user = await person(['viewer'])
      expect((await call('DELETE', `/api/users/${user.id}`, { headers: admin })).status).toBe(204)
      expect(await alive(user)).toEqual({ access: 401, refresh: 401 })
    })

    test("a reused refresh token ends its whole family, access tokens included; the user's other logins live", async () => {
      const user = await person(['operator'])
      const other = await login(call, user.email)
      const second = (await call('POST', '/api/auth/refresh', { body: { refreshToken: user.refreshToken } }))
        .body
      expect((await call('GET', '/api/games', { headers: as(second.token) })).status).toBe(200)
      // The stolen first refresh token comes back: the family ends.
      const replay = await call('POST', '/api/auth/refresh', { body: { refreshToken: user.refreshToken } })
      expect(replay.status).toBe(401)
      for (const token of [user.token, second.token]) {
        expect((await call('GET', '/api/games', { headers: as(token) })).status).toBe(401)
        // Nor can a token of the family mint a new one through spec 2's refresh.
        expect((await call('POST', '/api/v1/auth/refresh', { headers: as(token) })).status).toBe(401)
      }
      expect(
        (await call('POST', '/api/auth/refresh', { body: { refreshToken: second.refreshToken } })).status,
      ).toBe(401)
      expect(await alive(other)).toEqual({ access: 200, refresh: 200 })
    })

    test('a token renewed by spec 2 refresh stays in its family and ends with it', async () => {
      const user = await person(['operator'])
      const renewed = (await call('POST', '/api/v1/auth/refresh', { headers: as(user.token) })).body.data
        .token
      expect((await call('GET', '/api/games', { headers: as(renewed) })).status).toBe(200)
      const second = (await call('POST', '/api/auth/refresh', { body: { refreshToken: user.refreshToken } }))
        .body
      expect(second.token).toBeString()
      expect(
        (await call('POST', '/api/auth/refresh', { body: { refreshToken: user.refreshToken } })).status,
      ).toBe(401)
      expect((await call('GET', '/api/games', { headers: as(renewed) })).status).toBe(401)
    })

    test('an access token is never a refresh token, nor a refresh token an access token', async () => {
      const user = await person(['admin'])
      const asRefresh = await call('POST', '/api/auth/refresh', { body: { refreshToken: user.token } })
      expect(asRefresh.status).toBe(401)
      for (const path of ['/api/games', '/api/auth/permissions', '/api/v1/auth/me'])
        expect((await call('GET', path, { headers: as(user.refreshToken) })).status).toBe(401)
      expect((await call('POST', '/api/v1/auth/refresh', { headers: as(user.refreshToken) })).status).toBe(
        401,
      )
      // Neither was spent by the mistake.
      expect(await alive(user)).toEqual({ access: 200, refresh: 200 })
    })
  })
})

/** Two instances on one PostgreSQL schema: a change made through one ends the tokens on the other. */
describe.if(engines.includes('postgres'))('[postgres] two instances', () => {
  let a: TestApp
  let b: TestApp
  let onA: Call
  let onB: Call
  beforeAll(async () => {
    a = await securityApp('postgres', { plugins: { games: {} } })
    b = await securityApp('postgres', { plugins: { games: {} }, store: a })
    onA = client(a.listen())
    onB = client(b.listen())
  })
  afterAll(async () => {
    await b.stop()
    await a.stop()
  })

  const person = async (roles: string[]) => {
    const u = await makeUser(a, `two${++n}`, roles)
    return { id: u.id, ...(await login(onA, u.email)) }
  }
  const refusedOnB = (token: string) =>
    until(async () => (await onB('GET', '/api/games', { headers: as(token) })).status === 401, 10_000)

  test('a role change, a password change, disabling and deleting through A end the tokens on B', async () => {
    for (const change of [
      { roles: ['viewer'] },
      { password: 'changed-password-1' },
      { disabled: true },
      'delete',
    ]) {
      const user = await person(['operator'])
      // B has verified (and cached) the token before the change.
      expect((await onB('GET', '/api/games', { headers: as(user.token) })).status).toBe(200)
      const r =
        change === 'delete'
          ? await onA('DELETE', `/api/users/${user.id}`, { headers: admin })
          : await onA('PUT', `/api/users/${user.id}`, { headers: admin, body: change })
      expect(r.status).toBeLessThan(300)
      await refusedOnB(user.token)
      expect(
        (await onB('POST', '/api/auth/refresh', { body: { refreshToken: user.refreshToken } })).status,
      ).toBe(401)
    }
  })

  test('a refresh token reused on A ends the family on B', async () => {
    const user = await person(['operator'])
    const second = (await onA('POST', '/api/auth/refresh', { body: { refreshToken: user.refreshToken } }))
      .body
    expect((await onB('GET', '/api/games', { headers: as(second.token) })).status).toBe(200)
    expect(
      (await onA('POST', '/api/auth/refresh', { body: { refreshToken: user.refreshToken } })).status,
    ).toBe(401)
    await refusedOnB(second.token)
    expect((await onB('POST', '/api/v1/auth/refresh', { headers: as(second.token) })).status).toBe(401)
  })

  test('a notice that never arrived: the periodic read of the store catches up', async () => {
    const user = await person(['operator'])
    expect((await onB('GET', '/api/games', { headers: as(user.token) })).status).toBe(200)
    // Written behind both instances' backs, as if the notice had been lost.
    await a.db.run('UPDATE users SET token_gen = token_gen + 1, updated_at = ? WHERE id = ?', [
      Date.now(),
      user.id,
    ])
    expect((await onB('GET', '/api/games', { headers: as(user.token) })).status).toBe(200)
    await b.auth.sync()
    expect((await onB('GET', '/api/games', { headers: as(user.token) })).status).toBe(401)
  })

  test('a key revoked on A stops on B', async () => {
    const sdk = await a.auth.createApiKey({ name: 'two' })
    const server = await a.auth.serverKeys.create('two', ['query'], 'test')
    const queue = (key: string) => onB('GET', '/api/v1/auth/me', { headers: { 'x-api-key': key } })
    // Each is known (and cached) on B: a key of the wrong kind is 403 there, an unknown one 401.
    expect((await queue(sdk.key)).status).toBe(403)
    expect((await queue(server.token)).status).toBe(403)
    expect((await onA('DELETE', `/api/api-keys/${sdk.id}`, { headers: admin })).status).toBe(200)
    expect((await onA('DELETE', `/api/v1/server-keys/${server.id}`, { headers: admin })).status).toBe(200)
    await until(async () => (await queue(sdk.key)).status === 401, 10_000)
    await until(async () => (await queue(server.token)).status === 401, 10_000)
  })
})
