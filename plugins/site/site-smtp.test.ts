import { afterAll, beforeAll, expect, test } from 'bun:test'
import { type TestApp, forEachEngine, makeApp } from '../../test/helpers'

// The site's SMTP password is kept only for the destination it was entered for (plugins/site/keys.ts
// `secretMoved`): not only the host and port, also the encryption, certificate check, user and
// mechanism (an operator turning encryption off read the YAML's password off the wire).
forEachEngine((engine) => {
  let a: TestApp
  let admin: string
  const put = (key: string, value: unknown) =>
    a.req('PUT', `/api/v1/site/${key}`, { token: admin, body: { value } })
  beforeAll(async () => {
    a = await makeApp(engine, {
      plugins: {
        'smtp-provider': {},
        notify: {},
        site: { notification: { smtpHost: '127.0.0.1', smtpPort: 2525, smtpEncryption: 'none' } },
      },
    })
    admin = await a.token('admin')
  })
  afterAll(() => a.stop())

  test('the SMTP password goes out only as it was entered for: no other encryption, certificate check, user or mechanism', async () => {
    expect((await put('notification.smtpPassword', 'pw-Otter-Lamp-27')).status).toBe(200)
    const moves = {
      smtpEncryption: 'ssl',
      smtpInsecureSkipVerify: true,
      smtpUser: 'eve',
      smtpAuthType: 'login',
    }
    for (const [key, value] of Object.entries(moves)) {
      const r = await put(`notification.${key}`, value)
      expect([r.status, r.body.message]).toEqual([
        400,
        expect.stringContaining(
          `enter the secret again: notification.smtpPassword was entered for another notification.${key}`,
        ),
      ])
    }
    // Cleared first, each moves; entered again, it goes there.
    expect((await put('notification.smtpPassword', '')).status).toBe(200)
    for (const [key, value] of Object.entries(moves))
      expect((await put(`notification.${key}`, value)).status).toBe(200)
    expect((await put('notification.smtpPassword', 'pw-Otter-Lamp-27')).status).toBe(200)
    const now = (await a.req('GET', '/api/v1/site/notification', { token: admin })).body.data
    expect(now['notification.smtpPassword']).toEqual({ value: 'set:p-27', origin: 'override' })
    expect(now['notification.smtpEncryption']).toEqual({ value: 'ssl', origin: 'override' })
  })
})
