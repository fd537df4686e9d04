import { afterAll, beforeAll, describe, expect, spyOn, test } from 'bun:test'
import { type TestApp, forEachEngine, makeApp, until } from '../../test/helpers'
import { MAX_ADDRESS, MAX_HOST, MAX_SECRET, MAX_URL } from './keys'
import { alert, sink } from './testing'

/**
 * Audit 19 F4: site settings and routing channels had no length limit, and every routed
 * notification read and parsed them all twice (its routing, then each channel's send): four 9 MB
 * values held the event loop 2.5 s under 20 notifications and grew the server by 1 GB.
 */
forEachEngine((engine) => {
  let a: TestApp
  let admin: string
  const first = sink()
  const second = sink()
  const put = (key: string, value: unknown) =>
    a.req('PUT', `/api/v1/site/${key}`, { token: admin, body: { value } })

  beforeAll(async () => {
    a = await makeApp(engine, {
      plugins: {
        notify: {},
        // The revision check runs often: a change written past the notices shows soon.
        site: { notification: { inAppEnabled: false, webhookUrl: `${first.url}/a` }, sync_ms: 20 },
      },
    })
    admin = await a.token('admin')
  })
  afterAll(async () => {
    await a.stop()
    first.stop()
    second.stop()
  })

  describe('site settings bounds', () => {
    test('every text key and routing channel has a length: 400 naming the key, the value never echoed', async () => {
      const url = (n: number) => `https://hooks.example.test/${'u'.repeat(n - 27)}`
      for (const [key, max, long] of [
        ['chatbotUrl', MAX_URL, url(MAX_URL + 1)],
        ['webhookUrl', MAX_URL, url(MAX_URL + 1)],
        ['chatbotSecret', MAX_SECRET, 's'.repeat(MAX_SECRET + 1)],
        ['webhookSecret', MAX_SECRET, 's'.repeat(MAX_SECRET + 1)],
        ['smtpPassword', MAX_SECRET, 'p'.repeat(MAX_SECRET + 1)],
        ['smtpHost', MAX_HOST, 'h'.repeat(MAX_HOST + 1)],
        ['smtpUser', MAX_ADDRESS, 'u'.repeat(MAX_ADDRESS + 1)],
        ['smtpFrom', MAX_ADDRESS, 'f'.repeat(MAX_ADDRESS + 1)],
        ['smtpFrom', MAX_ADDRESS, 'x'.repeat(9_000_000)],
      ] as const) {
        const r = await put(`notification.${key}`, long)
        expect(r.status, key).toBe(400)
        expect(r.body.message, key).toBe(`body.value: notification.${key} is at most ${max} characters`)
      }
      // At the bound it is taken.
      expect((await put('notification.smtpFrom', `${'f'.repeat(MAX_ADDRESS - 9)}@ops.test`)).status).toBe(200)
      expect((await a.req('DELETE', '/api/v1/site/notification.smtpFrom', { token: admin })).status).toBe(200)

      const routing = (channel: Record<string, unknown>) =>
        a.req('PUT', '/api/v1/ops/notifications', {
          token: admin,
          body: { channels: [{ id: 'c1', type: 'webhook', url: `${second.url}/c1`, ...channel }], rules: [] },
        })
      for (const [channel, field] of [
        [{ url: url(MAX_URL + 1) }, 'body.channels[0].url'],
        [{ secret: 'z'.repeat(MAX_SECRET + 1) }, 'body.channels[0].secret'],
      ] as const) {
        const r = await routing(channel)
        expect(r.status, field).toBe(400)
        expect(r.body.message, field).toContain(field)
        expect(r.body.message).not.toContain('zzzzzzzz')
      }
      expect((await routing({ secret: 'z'.repeat(MAX_SECRET) })).status).toBe(200)
      expect(
        (await a.req('PUT', '/api/v1/ops/notifications', { token: admin, body: { channels: [], rules: [] } }))
          .status,
      ).toBe(200)
    })

    test('routed notifications read the settings once per revision; a change shows, also one written past the notices', async () => {
      // A write drops the copy: the next notification reads it once.
      expect((await put('notification.webhookSecret', 'whsec-one-0001')).status).toBe(200)
      const reads = () =>
        [...all.mock.calls, ...get.mock.calls].filter((c) =>
          /FROM site_(settings|routing)\b/.test(String(c[0])),
        ).length
      const all = spyOn(a.db, 'all')
      const get = spyOn(a.db, 'get')
      try {
        for (let i = 0; i < 5; i++) await a.bus.emit('alert.fired', alert(`burst ${i}`))
        await until(() => first.hits.length >= 5, { what: 'five webhook deliveries' })
        // One copy: the settings once and the routing once, for five routings and five sends.
        expect(reads()).toBe(2)
      } finally {
        all.mockRestore()
        get.mockRestore()
      }

      // A change through the API shows at the next notification.
      expect((await put('notification.webhookUrl', `${second.url}/b`)).status).toBe(200)
      await a.bus.emit('alert.fired', alert('moved'))
      await until(() => second.hits.some((h) => JSON.parse(h.raw).title === 'moved'), { what: 'moved' })

      // Another instance's write whose notice was lost: the revision check drops the copy.
      await a.db.tx(async (tx) => {
        await tx.run('UPDATE site_settings SET value = ? WHERE key = ?', [
          JSON.stringify(`${first.url}/c`),
          'webhookUrl',
        ])
        await tx.run('UPDATE site_revision SET rev = rev + 1 WHERE id = 1')
      })
      await until(
        async () => {
          await a.bus.emit('alert.fired', alert('back'))
          return first.hits.some((h) => h.url.pathname === '/c')
        },
        { what: 'a change written past the notices' },
      )
    })
  })
})
