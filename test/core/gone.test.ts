import { afterAll, beforeAll, expect, test } from 'bun:test'
import { goneCredentials } from '../../core/auth/gone'
import { type TestApp, forEachEngine, makeApp } from '../helpers'

/**
 * Which callers no longer name a credential (core/auth/gone.ts): a deleted user, a revoked
 * application token or server key. A live one, a disabled user, the admin token, the platform
 * and anonymous callers never go; neither does a token of one kind named as the other.
 */
forEachEngine((engine) => {
  let a: TestApp
  let admin: string
  beforeAll(async () => {
    a = await makeApp(engine)
    admin = await a.token('admin')
  })
  afterAll(() => a.stop())

  const created = async (path: string, name: string) =>
    (await a.req('POST', path, { token: admin, body: { name, scopes: ['trigger'] } })).body.data.id as string
  const user = async (name: string) =>
    (
      await a.req('POST', '/api/users', {
        token: admin,
        body: {
          email: `${name}@studio.example`,
          username: name,
          password: 'password-123',
          roles: ['operator'],
        },
      })
    ).body.id as string

  test('deleted users and revoked tokens are gone; live, disabled and fixed callers are not', async () => {
    const [liveApp, revokedApp] = [
      await created('/api/v1/app-tokens', 'a1'),
      await created('/api/v1/app-tokens', 'a2'),
    ]
    const [liveKey, revokedKey] = [
      await created('/api/v1/server-keys', 'k1'),
      await created('/api/v1/server-keys', 'k2'),
    ]
    expect((await a.req('DELETE', `/api/v1/app-tokens/${revokedApp}`, { token: admin })).status).toBe(200)
    expect((await a.req('DELETE', `/api/v1/server-keys/${revokedKey}`, { token: admin })).status).toBe(200)
    const [kept, disabled, deleted] = [await user('kept'), await user('paused'), await user('left')]
    expect(
      (await a.req('PUT', `/api/users/${disabled}`, { token: admin, body: { disabled: true } })).status,
    ).toBe(200)
    expect((await a.req('DELETE', `/api/users/${deleted}`, { token: admin })).status).toBe(204)

    const callers = [
      `appToken:${liveApp}`,
      `appToken:${revokedApp}`,
      `serverKey:${liveKey}`,
      `serverKey:${revokedKey}`,
      // A live application token named as a server key names no server key.
      `serverKey:${liveApp}`,
      `user:${kept}`,
      `user:${disabled}`,
      `user:${deleted}`,
      'user:never-was',
      'admin:admin-token',
      'platform',
      'anonymous',
    ]
    expect(await goneCredentials(a.db, callers)).toEqual(
      new Set([
        `appToken:${revokedApp}`,
        `serverKey:${revokedKey}`,
        `serverKey:${liveApp}`,
        `user:${deleted}`,
        'user:never-was',
      ]),
    )
    expect(await goneCredentials(a.db, [])).toEqual(new Set())
  })
})
