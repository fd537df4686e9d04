import { afterAll, beforeAll, expect, test } from 'bun:test'
import { loginStart } from '../../core/auth/sessions'
import { newId } from '../../core/db'
import { type TestApp, forEachEngine } from '../helpers'
import { type Call, client, login, makeUser, securityApp } from './lib'

/*
 * A login ends `auth.refresh_ttl_s` after it began, however often its tokens are renewed. Both
 * renewals once went on for ever: `/api/v1/auth/refresh` renewed an access token from itself, and
 * each rotated refresh token got a new full lifetime, so a stolen token renewed every few
 * minutes never ended (security audit 2, L6).
 */

const TTL_S = 3600
const sha256 = (s: string) => new Bun.CryptoHasher('sha256').update(s).digest('hex')

/** A login family id (a UUIDv7) made `msAgo` milliseconds ago. */
function familyFrom(msAgo: number): string {
  const hex = (Date.now() - msAgo).toString(16).padStart(12, '0')
  const rest = newId().replaceAll('-', '').slice(12)
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${rest.slice(0, 4)}-${rest.slice(4, 8)}-${rest.slice(8, 20)}`
}

forEachEngine((engine) => {
  let app: TestApp
  let call: Call
  beforeAll(async () => {
    app = await securityApp(engine, { plugins: { games: {} }, config: { auth: { refresh_ttl_s: TTL_S } } })
    call = client(app.listen())
  })
  afterAll(() => app.stop())

  test('the family id tells when the login began', () => {
    const f = familyFrom(5000)
    expect(Math.abs(loginStart(f)! - (Date.now() - 5000))).toBeLessThan(1000)
    expect(loginStart('not-a-uuid')).toBeUndefined()
  })

  test('an access token of a login past its lifetime is not renewed; one within it is', async () => {
    const u = await app.auth.users.get((await makeUser(app, `life-a-${engine}`, ['viewer'])).id)
    const renew = (token: string) =>
      call('POST', '/api/v1/auth/refresh', { headers: { authorization: `Bearer ${token}` } })
    const old = await renew(app.auth.accessToken(u, familyFrom(TTL_S * 1000 + 60_000)))
    expect(old.status).toBe(401)
    expect(old.body.message).toContain('lifetime')
    const young = await renew(app.auth.accessToken(u, familyFrom(TTL_S * 1000 - 60_000)))
    expect(young.status).toBe(200)
  })

  test("a refresh token of such a login is refused, even one whose stored expiry slid past the login's end", async () => {
    const u = await makeUser(app, `life-b-${engine}`, ['viewer'])
    const token = `tok-${newId()}`
    await app.db.run(
      'INSERT INTO refresh_tokens (id, family_id, user_id, token_hash, expires_at, created_at) VALUES (?, ?, ?, ?, ?, ?)',
      [
        newId(),
        familyFrom(TTL_S * 1000 + 60_000),
        u.id,
        sha256(token),
        Date.now() + TTL_S * 1000,
        Date.now(),
      ],
    )
    const r = await call('POST', '/api/auth/refresh', { body: { refreshToken: token } })
    expect(r.status).toBe(401)
    expect(r.body.message).toContain('lifetime')
  })

  test("a rotated refresh token expires no later than its login's end", async () => {
    const u = await makeUser(app, `life-c-${engine}`, ['viewer'])
    const first = await login(call, u.email)
    const rotated = await call('POST', '/api/auth/refresh', { body: { refreshToken: first.refreshToken } })
    expect(rotated.status).toBe(200)
    const row = await app.db.get<{ family_id: string; expires_at: number | string }>(
      'SELECT family_id, expires_at FROM refresh_tokens WHERE token_hash = ?',
      [sha256(rotated.body.refreshToken)],
    )
    expect(Number(row!.expires_at)).toBeLessThanOrEqual(loginStart(row!.family_id)! + TTL_S * 1000)
  })
})
