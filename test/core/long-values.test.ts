import { afterAll, beforeAll, expect, test } from 'bun:test'
import { type TestApp, forEachEngine, makeApp } from '../helpers'

// Values longer than MySQL's VARCHAR(191) key columns (audit-sec2 L2): MariaDB stored a
// 200-character email cut to 191 (INSERT IGNORE turns strict mode's error into a warning), the
// user could never log in, and a login with such an email answered 500. Now one behaviour on
// every engine: the API bounds what it writes, and the store never cuts a value silently.
forEachEngine((engine) => {
  let a: TestApp
  let admin: string
  beforeAll(async () => {
    a = await makeApp(engine, { plugins: { games: {} } })
    admin = await a.token('admin')
  })
  afterAll(() => a.stop())

  const create = (email: string, username: string) =>
    a.req('POST', '/api/users', {
      token: admin,
      body: { email, username, password: 'password-123', roles: ['viewer'] },
    })
  const login = (email: string) =>
    a.req('POST', '/api/auth/login', { body: { email, password: 'password-123' } })

  test('an email past 191 characters is 400 naming body.email; one of 191 is kept whole and logs in', async () => {
    for (const n of [192, 200, 1000]) {
      const r = await create(`${'a'.repeat(n - 7)}@one.io`, `long${n}`)
      expect(r.status).toBe(400)
      expect(r.body.message).toContain('body.email')
    }
    const email = `${'b'.repeat(184)}@one.io`
    expect(email).toHaveLength(191)
    const r = await create(email, 'fits')
    expect(r.status).toBe(200)
    expect(r.body.email).toBe(email)
    expect((await login(email)).status).toBe(200)
    // The same first 191 characters and another domain are another address: no false conflict.
    expect((await create(`${'b'.repeat(184)}@two.io`, 'fits2')).status).toBe(200)
  })

  test("a login's email past 191 characters is 400 naming it (no user has one); up to 191 an unknown one is 401", async () => {
    const r = await login(`${'c'.repeat(293)}@one.io`)
    expect([r.status, r.body.details?.field]).toEqual([400, 'body.email'])
    // Refused attempts are counted under it like any other (the throttle's keys fit every engine).
    expect((await login(`${'c'.repeat(184)}@one.io`)).status).toBe(401)
    expect((await login(`${'c'.repeat(184)}@one.io`)).status).toBe(401)
  })

  test('ON CONFLICT DO NOTHING never stores a value cut: too long for its column is an error on MySQL', async () => {
    await a.db.exec('CREATE TABLE long_probe (id TEXT PRIMARY KEY, v TEXT NOT NULL)')
    const id = 'k'.repeat(192)
    const insert = (sql: string) => a.db.all(sql, [id, 'v'])
    const plain = 'INSERT INTO long_probe (id, v) VALUES (?, ?) ON CONFLICT DO NOTHING'
    if (engine === 'mysql') {
      // VARCHAR(191) there: refused, as a plain INSERT is in strict mode, and nothing is written.
      await expect(insert(plain)).rejects.toThrow("Data too long for column 'id'")
      await expect(insert(`${plain} RETURNING id`)).rejects.toThrow("Data too long for column 'id'")
      expect(await a.db.all('SELECT id FROM long_probe')).toEqual([])
    } else {
      expect(await insert(`${plain} RETURNING id`)).toEqual([{ id }])
      expect(await insert(`${plain} RETURNING id`)).toEqual([])
    }
    // Within the width, the conflict is still skipped quietly on every engine.
    await a.db.run(plain, ['short', 'v'])
    expect(await a.db.run(plain, ['short', 'w'])).toBe(0)
    await a.db.exec('DROP TABLE long_probe')
  })
})
