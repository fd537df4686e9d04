import { afterAll, beforeAll, expect, test } from 'bun:test'
import { type TestApp, forEachEngine, makeApp } from '../helpers'
import { SECURITY_APP, allPluginsWith, signature } from './lib'

/** A port nothing listens on now. */
async function freePort(): Promise<number> {
  const s = Bun.serve({ port: 0, hostname: '127.0.0.1', fetch: () => new Response() })
  const port = s.port as number
  await s.stop(true)
  return port
}

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
    const port = await freePort()
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
