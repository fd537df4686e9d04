import { afterAll, beforeAll, expect, test } from 'bun:test'
import { type TestApp, forEachEngine } from '../helpers'
import { surfaceApp } from './surface-app'

/*
 * A U+0000 anywhere a request reaches the store. PostgreSQL's text cannot hold it: each of these
 * answered 500 there, public routes included (security audit 2, L5); SQLite and MariaDB store
 * it. No engine answers 500: a JSON body's NUL is 400 naming its field everywhere; on PostgreSQL
 * a path or query value with one is 400 too (elsewhere it is looked up and not found).
 */

forEachEngine((engine) => {
  let a: TestApp
  let base: string
  let admin: string
  beforeAll(async () => {
    a = await surfaceApp(engine, { plugins: { experiments: {} } })
    base = a.listen()
    admin = await a.token('admin')
  })
  afterAll(() => a.stop())

  const send = async (method: string, path: string, body?: unknown, token?: string) => {
    const headers: Record<string, string> = { 'content-type': 'application/json' }
    if (token) headers.authorization = `Bearer ${token}`
    const r = await fetch(base + path, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
    })
    return { status: r.status, body: await r.json().catch(() => undefined) }
  }

  test('no request with a NUL answers 500, with or without credentials', async () => {
    const cases: Array<[string, string, unknown?, string?]> = [
      ['POST', '/api/auth/login', { email: 'adm\u0000in@localhost', password: 'x' }],
      ['POST', '/api/v1/auth/login', { username: 'adm\u0000in', password: 'x' }],
      ['GET', '/api/config/%00/prod'],
      ['GET', '/api/games/%00', undefined, admin],
      ['GET', '/api/experiments/%00', undefined, admin],
      ['GET', '/api/v1/alerts/%00', undefined, admin],
      [
        'POST',
        '/api/v1/notify',
        { type: 't', channels: ['audit'], title: 't\u0000', body: 'b', level: 'info' },
        admin,
      ],
    ]
    for (const [method, path, body, token] of cases) {
      const r = await send(method, path, body, token)
      expect([method, path, r.status < 500]).toEqual([method, path, true])
    }
    // A JSON body's NUL is refused on every engine alike, naming the field.
    for (const [path, body, field, token] of [
      ['/api/auth/login', { email: 'adm\u0000in@localhost', password: 'x' }, 'body.email', undefined],
      [
        '/api/v1/notify',
        { type: 't', channels: ['audit'], title: 't\u0000', body: 'b', level: 'info' },
        'body.title',
        admin,
      ],
      ['/api/games', { name: 'g', genre: 'RPG', platforms: ['IOS\u0000'] }, 'body.platforms[0]', admin],
    ] as const) {
      const r = await send('POST', path, body, token)
      expect([path, r.status]).toEqual([path, 400])
      expect(JSON.stringify(r.body)).toContain(`${field}: holds a NUL character`)
    }
    // PostgreSQL: a path or query lookup with one is refused by the store's guard, saying why.
    if (engine === 'postgres') {
      const r = await send('GET', '/api/config/%00/prod')
      expect(r.status).toBe(400)
      expect(JSON.stringify(r.body)).toContain('NUL character')
    }
  })
})
