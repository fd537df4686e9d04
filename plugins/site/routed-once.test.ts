import { afterAll, beforeAll, expect, test } from 'bun:test'
import { type TestApp, forEachEngine, makeApp, until } from '../../test/helpers'
import { httpSink } from '../notify/testing'

/**
 * Issue 36 point 4: one notification stack. An `alert.fired` was routed twice, durably by notify
 * and best effort by the site plugin's own webhooks; now it is one notification whose deliveries
 * go to notify's routes and the site's channels alike, each in the delivery log.
 */
forEachEngine((engine) => {
  const ops = httpSink()
  const site = httpSink()
  let a: TestApp
  let admin: string
  beforeAll(async () => {
    a = await makeApp(engine, {
      plugins: {
        'webhook-provider': {},
        notify: {
          channels: { ops: { type: 'webhook', url: ops.url } },
          routes: [{ type: 'alert.*', channels: ['ops'] }],
        },
        site: { notification: { inAppEnabled: false, webhookUrl: site.url } },
      },
    })
    admin = await a.token('admin')
  })
  afterAll(async () => {
    await a.stop()
    ops.stop()
    site.stop()
  })

  test('alert.fired is one notification: notify routes and site channels each get one delivery of it, logged', async () => {
    await a.bus.emit('alert.fired', {
      alert_id: 'once-1',
      source: 'ops-alerts',
      level: 'error',
      title: 'Routed once',
      body: 'one decision, one notification',
      params: {},
      at: new Date().toISOString(),
    })
    const logs = await until(async () => {
      const r = await a.req('GET', '/api/v1/logs?status=success', { token: admin })
      const mine = r.body.data.logs.filter((l: { title: string }) => l.title === 'Routed once')
      return mine.length >= 2 && mine
    })
    expect(logs.map((l: { provider: string }) => l.provider).sort()).toEqual(['ops', 'site.webhook'])
    expect(new Set(logs.map((l: { notification_id: string }) => l.notification_id)).size).toBe(1)
    expect(ops.hits).toHaveLength(1)
    expect(site.hits).toHaveLength(1)
    expect(site.hits[0]!.headers['x-liveops-delivery']).toBe(
      logs.find((l: { provider: string }) => l.provider === 'site.webhook').id,
    )
    // Configured through the site settings, not notify's /config.
    const put = (body: unknown) => a.req('PUT', '/api/v1/config/site.webhook', { token: admin, body })
    expect((await put({ config: { channel: 'chatbot' } })).status).toBe(409)
    expect((await a.req('POST', '/api/v1/providers/site.webhook/disable', { token: admin })).status).toBe(409)
  })

  test('approval is not an event until something produces it: a routing rule naming it is refused', async () => {
    const r = await a.req('PUT', '/api/v1/ops/notifications', {
      token: admin,
      body: { channels: [], rules: [{ event: 'approval', channels: ['inapp'] }] },
    })
    expect(r.status).toBe(400)
    expect(r.body.message).toContain('body.rules[0].event')
  })
})
