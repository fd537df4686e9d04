import { afterAll, beforeAll, expect, test } from 'bun:test'
import { type TestApp, forEachEngine, makeApp, until } from '../../test/helpers'
import { httpSink, smtpSink } from '../notify/testing'
import { alert } from './testing'

/*
 * The site's operations channels became notify channels (issue 36 point 4) and keep issue 34's
 * protections on that path: a destination set through the API goes through the outbound policy
 * (the YAML's is trusted), a failure is one short line in notify's delivery log (never what the
 * receiver answered), a refusal by the policy is not retried, and no secret of the site settings
 * shows in notify's views of the channel. The app runs the shipped policy (nothing beyond the
 * public internet), while every sink listens on loopback.
 */

interface Log {
  id: string
  provider: string
  status: string
  attempt_count: number
  error?: string
  title: string
}

const METADATA = 'http://169.254.169.254/latest/meta-data/'

forEachEngine((engine) => {
  const leaky = httpSink(() => new Response('internal detail: db01 password=hunter2', { status: 500 }))
  const apiSink = httpSink()
  const mail = smtpSink()
  let a: TestApp
  let admin: string
  beforeAll(async () => {
    a = await makeApp(engine, {
      config: { outbound: { allow: [] } },
      plugins: {
        'smtp-provider': {},
        audit: {},
        notify: { retry: { max_attempts: 3, base_ms: 20, max_ms: 50 } },
        site: {
          notification: {
            inAppEnabled: false,
            webhookUrl: leaky.url,
            webhookSecret: 'whsec-yaml-5566aabb',
            smtpHost: '127.0.0.1',
            smtpPort: mail.port,
            smtpEncryption: 'none',
            smtpFrom: 'ops@liveops.test',
            emailTo: 'oncall@liveops.test',
          },
        },
      },
    })
    admin = await a.token('admin')
  })
  afterAll(async () => {
    await a.stop()
    leaky.stop()
    apiSink.stop()
    mail.stop()
  })
  const as = (method: string, path: string, body?: unknown, token = admin) =>
    a.req(method, path, { token, body })
  const fire = (title: string) => a.bus.emit('alert.fired', alert(title))
  /** The finished delivery of `title` to `provider`. */
  const finished = (title: string, provider: string) =>
    until(
      async () => {
        const r = await as('GET', `/api/v1/logs?provider=${provider}&size=100`)
        const l = (r.body.data.logs as Log[]).find((x) => x.title === title)
        return l && l.status !== 'pending' && l.status !== 'processing' ? l : undefined
      },
      { ms: 10_000, what: `the delivery of '${title}' to ${provider}` },
    )

  test("the YAML's site webhook is trusted; its 500 reads as the status alone, retried, to readers too", async () => {
    await fire('to the yaml hook')
    const log = await finished('to the yaml hook', 'site.webhook')
    expect(log).toMatchObject({ status: 'failed', attempt_count: 3, error: 'webhook answered 500' })
    expect(leaky.hits.length).toBe(3)
    expect(new Set(leaky.hits.map((h) => h.headers['x-liveops-delivery']))).toEqual(new Set([log.id]))
    const viewer = await a.token('viewer')
    for (const token of [admin, viewer]) {
      const seen = JSON.stringify([
        (await as('GET', '/api/v1/logs', undefined, token)).body,
        (await as('GET', `/api/v1/logs/${log.id}`, undefined, token)).body,
      ])
      expect(seen).not.toContain('hunter2')
      expect(seen).not.toContain('internal detail')
    }
    // Notify's views of the channel name it; its settings (and their secrets) stay the site's.
    const config = await as('GET', '/api/v1/config/site.webhook')
    expect(config.body.data).toMatchObject({ type: 'site', source: 'plugin', config: { channel: 'webhook' } })
    expect(JSON.stringify(config.body)).not.toContain('whsec-yaml')
  })

  test("notify refuses to configure the site's channels (409), and the audit log names the channel", async () => {
    const put = await as('PUT', '/api/v1/config/site.webhook', { config: { channel: 'chatbot' } })
    expect(put.status).toBe(409)
    expect((await as('POST', '/api/v1/providers/site.webhook/disable')).status).toBe(409)
    const refused = await until(async () => {
      const items: Array<{ action: string; target: string; ok: boolean; details: { status: number } }> = (
        await as('GET', '/api/v1/audit?size=100')
      ).body.data.items
      const mine = items.filter((e) => e.target === 'channel:site.webhook')
      return mine.length >= 2 && mine
    })
    expect(refused.map((e) => [e.action, e.ok, e.details.status]).sort()).toEqual([
      ['channel.disable', false, 409],
      ['channel.update', false, 409],
    ])
  })

  test('a site webhook set through the API is refused by the policy: no connection, one line, no retry', async () => {
    expect((await as('PUT', '/api/v1/site/notification.webhookUrl', { value: apiSink.url })).status).toBe(200)
    await fire('to the api hook')
    const log = await finished('to the api hook', 'site.webhook')
    expect(log).toMatchObject({
      status: 'failed',
      attempt_count: 1,
      error: 'webhook: 127.0.0.1: not an allowed destination (outbound policy)',
    })
    expect(apiSink.hits).toHaveLength(0)
    expect((await as('DELETE', '/api/v1/site/notification.webhookUrl')).status).toBe(200)
  })

  test("a notify caller names site.email but not its recipients: the mail goes to the site's list", async () => {
    expect((await as('PUT', '/api/v1/site/notification.emailEnabled', { value: true })).status).toBe(200)
    const sent = await as('POST', '/api/v1/notify', {
      type: 'deploy',
      title: 'recipients named',
      channels: ['site.email'],
      recipients: { 'site.email': ['anyone@victim.example'] },
    })
    expect(sent.body.code).toBe(0)
    expect(await finished('recipients named', 'site.email')).toMatchObject({ status: 'success' })
    expect(mail.mails.map((m) => m.to)).toEqual([['oncall@liveops.test']])
  })

  test('an ops routing channel and an SMTP host from the API are refused alike; the YAML mail host is not', async () => {
    expect(
      (
        await as('PUT', '/api/v1/ops/notifications', {
          channels: [{ id: 'meta', type: 'webhook', url: METADATA }],
          rules: [{ event: 'alert.fired', channels: ['meta', 'email'] }],
        })
      ).status,
    ).toBe(200)
    await fire('to the routing')
    expect(await finished('to the routing', 'site.meta')).toMatchObject({
      status: 'failed',
      attempt_count: 1,
      error: 'webhook: 169.254.169.254: not an allowed destination (outbound policy)',
    })
    expect(await finished('to the routing', 'site.email')).toMatchObject({ status: 'success' })
    expect(mail.mails).toHaveLength(2)

    // The same mail host, given through the API, is under the policy.
    expect((await as('PUT', '/api/v1/site/notification.smtpHost', { value: 'localhost' })).status).toBe(200)
    await fire('mail from the api')
    expect(await finished('mail from the api', 'site.email')).toMatchObject({
      status: 'failed',
      attempt_count: 1,
      error: 'smtp: localhost: not an allowed destination (outbound policy)',
    })
    expect(mail.mails).toHaveLength(2)
  })
})
