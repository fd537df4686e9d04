import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { Value } from '@sinclair/typebox/value'
import { Docs } from '../../plugins/notify/schema'
import { httpSink } from '../../plugins/notify/testing'
import { type TestApp, forEachEngine, makeApp, until } from '../helpers'
import { surfaceApp } from './surface-app'

/*
 * The nineteenth session's notify audit, findings 2 to 5, replayed as their attackers made them on
 * every engine: a `config` token's Host header moving a channel's stored secret header to another
 * virtual host; URL masking that left the user, key-only query entries and the fragment in clear;
 * the public status showing anyone why channels fail; IPv6 forms embedding an IPv4 address.
 * (Finding 1, params without a bound: audit-19-notify-bounds.test.ts.)
 */

const leaks = (body: unknown, values: string[]) => values.filter((v) => JSON.stringify(body).includes(v))

forEachEngine((engine) => {
  const sink = httpSink()
  let a: TestApp
  let admin: string
  let operator: string
  let viewer: string
  let trigger: string
  let config: string
  let query: string
  beforeAll(async () => {
    a = await surfaceApp(engine, {
      plugins: {
        notify: {
          // Verification fails at start (nothing listens on port 1): the channel is in error.
          channels: { broken: { type: 'smtp', host: '127.0.0.1', port: 1, from: 'a@b.c', timeout_ms: 500 } },
        },
      },
    })
    admin = await a.token('admin')
    operator = await a.token('operator')
    viewer = await a.token('viewer')
    const mint = async (scope: string) =>
      (await a.req('POST', '/api/v1/app-tokens', { token: admin, body: { name: scope, scopes: [scope] } }))
        .body.data.token as string
    trigger = await mint('trigger')
    config = await mint('config')
    query = await mint('query')
  })
  afterAll(async () => {
    await a.stop()
    sink.stop()
  })
  const app = (token: string) => ({ 'x-app-token': token })

  describe('2. a webhook header cannot name the destination', () => {
    test('Host, :authority, X-Forwarded-Host and Forwarded: 400 naming the header, on create and on update by a config token', async () => {
      const key = 'partner-real-api-key-5555'
      const made = await a.req('PUT', '/api/v1/config/partner', {
        token: operator,
        body: { type: 'webhook', config: { url: sink.url, headers: { 'X-Api-Key': key } } },
      })
      expect(made.status).toBe(200)
      const read = (await a.req('GET', '/api/v1/config/partner', { headers: app(query) })).body.data
      for (const name of ['Host', 'host', ' HOST', ':authority', 'X-Forwarded-Host', 'Forwarded']) {
        const moved = await a.req('PUT', '/api/v1/config/partner', {
          headers: app(config),
          body: {
            type: 'webhook',
            config: { ...read.config, headers: { ...read.config.headers, [name]: 'attacker-vhost.example' } },
          },
        })
        expect([name, moved.status, moved.body.data?.field]).toEqual([
          name,
          400,
          `body.config.headers.${name}`,
        ])
        const created = await a.req('PUT', '/api/v1/config/fresh', {
          token: operator,
          body: { type: 'webhook', config: { url: sink.url, headers: { [name]: 'x.example' } } },
        })
        expect([name, created.status, created.body.data?.field]).toEqual([
          name,
          400,
          `body.config.headers.${name}`,
        ])
      }
      await a.req('POST', '/api/v1/notify', {
        headers: app(trigger),
        body: { type: 't', channel: 'partner', title: 'after the Host attempts' },
      })
      const hit = await until(() => sink.hits.find((h) => h.body.title === 'after the Host attempts'))
      expect(hit.headers['x-api-key']).toBe(key)
      expect(hit.headers.host).toBe(new URL(sink.url).host)
    })

    test('a YAML channel with a Host header stops startup naming it', async () => {
      await expect(
        makeApp(engine, {
          plugins: {
            'webhook-provider': {},
            notify: {
              channels: { ops: { type: 'webhook', url: sink.url, headers: { Host: 'other.example' } } },
            },
          },
        }),
      ).rejects.toThrow(
        "plugins.notify.channels.ops: channel 'ops': headers.Host: names where the request goes",
      )
    })
  })

  describe('3. a URL reads with its user, key-only query entries and fragment masked', () => {
    const SECRETS = ['USERNAMESECRET123', 'KEYONLYSECRET', 'fragSECRET']
    const port = () => new URL(sink.url).port
    const url = () =>
      `http://sk_live_USERNAMESECRET123:@127.0.0.1:${port()}/hook?abcdKEYONLYSECRET#fragSECRET`
    const auditText = async () =>
      JSON.stringify((await a.req('GET', '/api/v1/audit?size=500', { token: admin })).body.data)

    test('a channel: its answer, GET and audit entry mask them; sent back as read it keeps them, moved it is 400', async () => {
      const put = await a.req('PUT', '/api/v1/config/userurl', {
        token: operator,
        body: { type: 'webhook', config: { url: url() } },
      })
      expect(put.status).toBe(200)
      const read = await a.req('GET', '/api/v1/config/userurl', { headers: app(query) })
      expect(read.body.data.config.url).toBe(`http://set%3AT123@127.0.0.1:${port()}/set?set%3ACRET#set:CRET`)
      for (const r of [put, read]) expect(leaks(r.body, SECRETS)).toEqual([])
      await until(async () => (await auditText()).includes('channel:userurl'))
      expect(leaks(await auditText(), SECRETS)).toEqual([])
      const back = await a.req('PUT', '/api/v1/config/userurl', {
        headers: app(config),
        body: { config: { ...read.body.data.config, timeout_ms: 900 } },
      })
      expect(back.status).toBe(200)
      const stored = await a.db.get<{ config: string }>(
        "SELECT config FROM notify_channels WHERE name = 'userurl'",
      )
      expect(JSON.parse(stored!.config).url).toBe(url())
      for (const moved of [
        read.body.data.config.url.replace('127.0.0.1', '127.0.0.2'),
        `http://set%3AT123@127.0.0.2:${port()}/`,
        `http://127.0.0.2:${port()}/?set%3ACRET`,
        `http://127.0.0.2:${port()}/#set:CRET`,
      ]) {
        const r = await a.req('PUT', '/api/v1/config/userurl', {
          headers: app(config),
          body: { config: { url: moved } },
        })
        expect([moved, r.status, r.body.data?.field]).toEqual([moved, 400, 'body.config.url'])
        expect(r.body.message).toContain('enter the secret again')
      }
    })

    test('the site chatbotUrl and the ops routing view mask them, and keep them when sent back', async () => {
      const set = await a.req('PUT', '/api/v1/site/notification.chatbotUrl', {
        token: admin,
        body: { value: url() },
      })
      expect(set.status).toBe(200)
      const shown = [
        set,
        await a.req('GET', '/api/v1/site/notification.chatbotUrl', { token: admin }),
        await a.req('GET', '/api/v1/site/notification', { token: admin }),
      ]
      for (const r of shown) expect(leaks(r.body, SECRETS)).toEqual([])
      const again = await a.req('PUT', '/api/v1/site/notification.chatbotUrl', {
        token: admin,
        body: { value: set.body.data.value },
      })
      expect(again.status).toBe(200)
      const kept = await a.db.get<{ value: string }>(
        "SELECT value FROM site_settings WHERE key = 'chatbotUrl'",
      )
      expect(JSON.parse(kept!.value)).toBe(url())
      const moved = await a.req('PUT', '/api/v1/site/notification.chatbotUrl', {
        token: admin,
        body: { value: set.body.data.value.replace('127.0.0.1', '127.0.0.2') },
      })
      expect(moved.status).toBe(400)

      const routing = { channels: [{ id: 'userurl', type: 'webhook', url: url() }], rules: [] }
      const put = await a.req('PUT', '/api/v1/ops/notifications', { token: admin, body: routing })
      expect(put.status).toBe(200)
      const view = await a.req('GET', '/api/v1/ops/notifications', { token: admin })
      for (const r of [put, view]) expect(leaks(r.body, SECRETS)).toEqual([])
      expect(
        (await a.req('PUT', '/api/v1/ops/notifications', { token: admin, body: view.body.data })).status,
      ).toBe(200)
      const r = await a.db.get<{ value: string }>("SELECT value FROM site_routing WHERE id = 'ops'")
      expect(JSON.parse(r!.value).channels[0].url).toBe(url())
      // Every entry of these writes is in: the three of chatbotUrl and the two of the routing.
      await until(async () => {
        const text = await auditText()
        return (
          text.split('notification.chatbotUrl').length > 3 && text.split('ops_notifications.put').length > 2
        )
      })
      expect(leaks(await auditText(), SECRETS)).toEqual([])
      await a.req('DELETE', '/api/v1/site/notification.chatbotUrl', { token: admin })
      await a.req('PUT', '/api/v1/ops/notifications', { token: admin, body: { channels: [], rules: [] } })
    })
  })

  describe('4. the public status says a channel is in error, and only callers who may read channels read why', () => {
    test('anonymous, a viewer and a trigger token read `error`; an operator and a query token the reason', async () => {
      const status = async (opts: { token?: string; headers?: Record<string, string> }) => {
        const r = await a.req('GET', '/api/v1/status', opts)
        expect(r.status).toBe(200)
        expect(Value.Check(Docs.status, r.body.data)).toBe(true)
        return (r.body.data.providers as { name: string; status: string }[]).find((p) => p.name === 'broken')!
          .status
      }
      for (const who of [
        {},
        { token: viewer },
        { headers: app(trigger) },
        { headers: { 'x-app-token': 'lat_wrong' } },
      ])
        expect(await status(who)).toBe('error')
      for (const who of [{ token: operator }, { token: admin }, { headers: app(query) }])
        expect(await status(who)).toStartWith("error: channel 'broken': verification failed")
    })
  })

  describe('5. IPv6 forms that embed an IPv4 address are judged by it', () => {
    test('IPv4-compatible, SIIT, local-use NAT64 and 6to4 forms of a private address are refused', async () => {
      for (const host of [
        '[::10.1.2.3]',
        '[::a01:203]',
        '[::ffff:0:10.1.2.3]',
        '[::ffff:0:a01:203]',
        '[64:ff9b:1::a01:203]',
        '[2002:a01:203::1]',
        '[::169.254.169.254]',
      ]) {
        const r = await a.req('PUT', '/api/v1/config/v6probe', {
          token: operator,
          body: { type: 'webhook', config: { url: `http://${host}/x` } },
        })
        expect([host, r.status]).toEqual([host, 400])
        expect(r.body.message).toContain('not an allowed destination (outbound policy)')
      }
      // The same forms of an address the operator allows (the tests allow 127.0.0.0/8) pass.
      for (const host of ['[::127.0.0.1]', '[::ffff:0:127.0.0.1]']) {
        const r = await a.req('PUT', '/api/v1/config/v6probe', {
          token: operator,
          body: { type: 'webhook', config: { url: `http://${host}:9/x` } },
        })
        expect([host, r.status]).toEqual([host, 200])
      }
    })
  })
})
