import { afterAll, beforeAll, expect, test } from 'bun:test'
import { SseReader } from '../../plugins/analytics/realtime/realtime-testing'
import { type TestApp, forEachEngine, makeApp, until } from '../helpers'
import { freePort } from '../own-postgres'
import { GAME, SECURITY_APP, allPluginsWith, signature } from './lib'

/*
 * The sixteenth session's audit, replayed as its attackers made them: an operator turning the
 * site's SMTP encryption off to read the YAML's password off the wire; an application token that
 * may only trigger, sending through a template that repeats its params into a 100 MB body; and
 * anyone naming `constructor` as the game of a signed batch (a 500 and a stack trace each).
 */
forEachEngine((engine) => {
  let a: TestApp
  let admin: string
  let operator: string
  beforeAll(async () => {
    a = await makeApp(engine, {
      ...SECURITY_APP,
      plugins: {
        ...allPluginsWith(),
        site: {
          notification: {
            smtpHost: '127.0.0.1',
            smtpPort: 2525,
            smtpUser: 'ops',
            smtpPassword: 'YamlSmtpSecret-9981',
            smtpEncryption: 'starttls',
          },
        },
      },
    })
    admin = await a.token('admin')
    operator = await a.token('operator')
  })
  afterAll(() => a.stop())

  test("an operator cannot send the YAML's SMTP password unencrypted or unchecked", async () => {
    for (const [key, value] of [
      ['smtpEncryption', 'none'],
      ['smtpInsecureSkipVerify', true],
      ['smtpAuthType', 'login'],
      ['smtpUser', 'attacker'],
      ['smtpHost', 'mail.attacker.test'],
    ] as const) {
      const r = await a.req('PUT', `/api/v1/site/notification.${key}`, { token: operator, body: { value } })
      expect([key, r.status]).toEqual([key, 400])
      expect(r.body.message).toContain('enter the secret again')
      expect(JSON.stringify(r.body)).not.toContain('YamlSmtpSecret')
    }
    const now = await a.req('GET', '/api/v1/site/notification', { token: admin })
    expect(now.body.data['notification.smtpEncryption']).toEqual({ value: 'starttls', origin: 'file' })
  })

  test('a trigger-only application token cannot render a template past what a notification holds', async () => {
    const body = '{{.a}}'.repeat(5_000)
    expect(
      (
        await a.req('POST', '/api/v1/templates/create', {
          token: operator,
          body: { id: 'amp', name: 'amp', title: 'x', body },
        })
      ).status,
    ).toBe(200)
    const token = (
      await a.req('POST', '/api/v1/app-tokens', {
        token: admin,
        body: { name: 'trigger-only', scopes: ['trigger'] },
      })
    ).body.data.token
    const headers = { authorization: `Bearer ${token}` }
    const params = { a: 'z'.repeat(20_000) }
    const count = async () =>
      Number((await a.db.get<{ n: number }>('SELECT COUNT(*) AS n FROM notify_deliveries'))?.n)
    const before = await count()
    const sent = await a.req('POST', '/api/v1/notify', {
      headers,
      body: { type: 'x', template: 'amp', params },
    })
    expect([sent.status, sent.body.data?.field]).toEqual([400, 'body.params'])
    const preview = await a.req('POST', '/api/v1/templates/amp/preview', { headers, body: { params } })
    expect([preview.status, preview.body.data?.field]).toEqual([400, 'body.params'])
    expect(await count()).toBe(before)
  })

  test('no user, admin or application token connects as a remote worker (deliveries carry secrets unmasked)', async () => {
    const port = freePort()
    const w = await makeApp(engine, {
      ...SECURITY_APP,
      plugins: { notify: { workers: { remote: { enabled: true, port, token: 'wk-Slate-Owl-3312' } } } },
    })
    try {
      const url = `http://127.0.0.1:${port}/api/v1/workers/connect`
      const config = (
        await w.req('POST', '/api/v1/app-tokens', {
          token: await w.token('admin'),
          body: { name: 'c', scopes: ['config'] },
        })
      ).body.data.token
      const bearers = [config, await w.token('operator'), await w.token('admin')]
      for (const b of bearers)
        expect((await fetch(url, { headers: { authorization: `Bearer ${b}` } })).status).toBe(401)
      const admin = await fetch(url, { headers: { 'x-admin-token': 'test-admin-token' } })
      expect(admin.status).toBe(401)
      expect((await fetch(url, { headers: { authorization: 'Bearer wk-Slate-Owl-3312' } })).status).toBe(426)
    } finally {
      await w.stop()
    }
  })

  test('an open event stream ends once its user is disabled, deleted or signs out, and a reconnect is 401', async () => {
    const base = a.listen()
    const g = await a.req('POST', '/api/games', { token: admin, body: { ...GAME, name: 'Stream Walk' } })
    const streams = [
      `/api/v1/analytics/realtime?gameId=${g.body.id}&env=prod`,
      '/api/v1/site/messages/stream',
    ]
    let n = 0
    const signIn = async () => {
      n += 1
      const k = n
      const body = {
        email: `watch${k}@studio.test`,
        username: `watch${k}`,
        password: 'Watcher-Pass-61!',
        roles: ['viewer'],
      }
      const id = (await a.req('POST', '/api/users', { token: admin, body })).body.id
      const login = await a.req('POST', '/api/auth/login', {
        body: { email: body.email, password: body.password },
      })
      return { id: String(id), token: String(login.body.token), refresh: String(login.body.refreshToken) }
    }
    const ends = [
      (u: { id: string }) => a.req('POST', `/api/users/${u.id}/disable`, { token: admin }),
      (u: { id: string }) => a.req('DELETE', `/api/users/${u.id}`, { token: admin }),
      (u: { token: string; refresh: string }) =>
        a.req('POST', '/api/auth/logout', { token: u.token, body: { refreshToken: u.refresh } }),
    ]
    // Each way a credential ends, on each stream, at once (the check runs every 2 s).
    const cases = ends.flatMap((end) => streams.map((path) => ({ end, path })))
    await Promise.all(
      cases.map(async ({ end, path }) => {
        const u = await signIn()
        const url = `${base}${path}${path.includes('?') ? '&' : '?'}token=${u.token}`
        const res = await fetch(url)
        expect([path, res.status]).toEqual([path, 200])
        const sse = new SseReader(res.body!)
        await sse.next()
        expect((await end(u)).status).toBeLessThan(300)
        // The stream says why and closes.
        const last = await sse.next((f) => f.event === 'end')
        expect(JSON.parse(last.data!)).toMatchObject({ error: 'unauthorized' })
        await expect(sse.next(() => true)).rejects.toThrow('stream ended')
        expect((await fetch(url)).status).toBe(401)
      }),
    )
  }, 60_000)

  test("entries core derives name the peer's address; a user's password reads 'set' alone; a sign-out names who", async () => {
    const base = a.listen()
    const call = (method: string, path: string, token: string, body?: unknown) =>
      fetch(`${base}${path}`, {
        method,
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: body === undefined ? undefined : JSON.stringify(body),
      })
    const password = 'Quokka-Lantern-8841'
    const made = await call('POST', '/api/users', admin, {
      email: 'peer@studio.test',
      username: 'peer-walker',
      password,
      roles: ['viewer'],
    })
    expect(made.status).toBe(200)
    const login = await a.req('POST', '/api/auth/login', { body: { email: 'peer@studio.test', password } })
    expect((await call('POST', '/api/auth/logout', login.body.token)).status).toBe(204)
    type Entry = { action: string; actor: { name?: string }; target?: string; ip?: string; details?: unknown }
    const entry = async (action: string, by: (e: Entry) => boolean) => {
      let found: Entry | undefined
      await until(async () => {
        const r = await a.req('GET', `/api/v1/audit?action=${action}&size=100`, { token: admin })
        found = (r.body.data.items as Entry[]).find((e) => e.action === action && by(e))
        return found !== undefined
      })
      return found!
    }
    const created = await entry('user.create', (e) => JSON.stringify(e.details).includes('peer-walker'))
    expect(created.ip).toMatch(/^(::ffff:)?127\.0\.0\.1$/)
    expect(created.details).toMatchObject({ body: { password: 'set' } })
    expect(JSON.stringify(created)).not.toContain(password.slice(-4))
    const out = await entry('auth.logout', (e) => e.actor.name === 'peer-walker')
    expect(out).toMatchObject({ actor: { kind: 'user', name: 'peer-walker' } })
    expect(out.ip).toMatch(/^(::ffff:)?127\.0\.0\.1$/)
  })

  test("a funnel step's properties are bounded: a viewer's step of many keys is a 400, not a held server", async () => {
    const viewer = await a.token('viewer')
    const g = await a.req('POST', '/api/games', { token: admin, body: { ...GAME, name: 'Funnel Walk' } })
    const funnel = (properties: Record<string, unknown>) =>
      a.req('POST', `/api/v1/analytics/behavior/funnel?gameId=${g.body.id}&env=prod`, {
        token: viewer,
        body: { steps: [{ event: 'session_start' }, { event: 'login', properties }] },
      })
    const keys = (n: number, name = (i: number) => `k${i}`) =>
      Object.fromEntries(Array.from({ length: n }, (_, i) => [name(i), 1]))
    expect((await funnel(keys(20))).status).toBe(200)
    for (const properties of [
      keys(21),
      keys(600_000),
      { ['k'.repeat(129)]: 1 },
      { level: 'x'.repeat(1025) },
    ]) {
      const r = await funnel(properties)
      expect([Object.keys(properties).length, r.status]).toEqual([Object.keys(properties).length, 400])
      expect(r.body.data?.field ?? r.body.message).toContain('body.steps[1].properties')
    }
  })

  test("a signed route's X-Game-Id naming what every object inherits is refused as a bad signature, not a 500", async () => {
    const raw = '[]'
    for (const game of ['constructor', '__proto__', 'toString', 'hasOwnProperty'])
      for (const path of [
        '/api/ingest/events',
        '/api/ingest/payments',
        '/v1/batch',
        '/v1/logs',
        '/v1/traces',
      ]) {
        const h = {
          ...(await signature(raw, 'not-the-secret')),
          'content-type': 'application/json',
          'x-game-id': game,
        }
        const r = await a.req('POST', path, { headers: h, raw })
        expect([game, path, r.status]).toEqual([game, path, 401])
      }
  })
})
