import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { ConfigError, loadConfig } from '../../core/config'
import { NO_ANSWER, Outbound, OutboundPolicy, OutboundRefused } from '../../core/outbound'
import { plugins } from '../../plugins'
import { issue, silentServer } from '../../plugins/certificates/testing'
import { newGame, trainedClassifier } from '../../plugins/ml/testing'
import { httpSink, smtpSink } from '../../plugins/notify/testing'
import { type TestApp, forEachEngine, makeApp, until } from '../helpers'
import { surfaceApp } from './surface-app'

/*
 * Issue 34 point 5: requests to hosts given through the API go only where the operator allows.
 * The app here runs the shipped policy (no `outbound.allow`): loopback, private networks,
 * link-local and cloud metadata are refused; the sinks listen on loopback, so every request the
 * API points at them must be refused, while the channel the YAML names still sends.
 */

const METADATA = [
  'http://169.254.169.254/latest/meta-data/',
  'http://[fd00:ec2::254]/latest/meta-data/',
  'http://100.100.100.200/latest/meta-data/',
  'http://[::ffff:169.254.169.254]/',
]
const LOOPBACK = ['http://127.0.0.1:9/x', 'http://localhost:9/x', 'http://2130706433:9/x', 'http://[::1]:9/x']

describe('the policy', () => {
  const policy = (allow: string[] = [], deny: string[] = []) => new OutboundPolicy({ allow, deny })

  test('public addresses pass; loopback, private, link-local and metadata are refused by default', () => {
    const p = policy()
    for (const a of ['8.8.8.8', '1.1.1.1', '2606:4700:4700::1111']) expect(p.allows(a)).toBe(true)
    for (const a of [
      '127.0.0.1',
      '::1',
      '10.1.2.3',
      '172.20.0.1',
      '192.168.1.1',
      '169.254.169.254',
      '100.100.100.200',
      'fd00:ec2::254',
      'fe80::1',
      '::ffff:127.0.0.1',
      '0.0.0.0',
      '168.63.129.16',
    ])
      expect(p.allows(a), a).toBe(false)
  })

  test('IPv6 forms embedding an IPv4 address are judged by it, or denied unless allowed (audit 19)', () => {
    const p = policy()
    // IPv4-compatible ::/96 and SIIT ::ffff:0:0:0/96: the IPv4 address decides.
    for (const a of [
      '::10.0.0.1',
      '::a00:1',
      '::127.0.0.1',
      '::169.254.169.254',
      '::ffff:0:10.0.0.1',
      '::ffff:0:7f00:1',
    ])
      expect(p.allows(a), a).toBe(false)
    for (const a of ['::8.8.8.8', '::ffff:0:8.8.8.8', '64:ff9b::8.8.8.8']) expect(p.allows(a), a).toBe(true)
    // `::` and `::1` stay IPv6 (unspecified, loopback), refused as such.
    expect([p.allows('::'), p.allows('::1')]).toEqual([false, false])
    expect(policy(['::1']).allows('::1')).toBe(true)
    expect(policy(['::1']).allows('0.0.0.1')).toBe(false)
    // Local-use NAT64 and 6to4 place the IPv4 elsewhere: refused whatever it is, unless allowed.
    for (const a of ['64:ff9b:1::7f00:1', '64:ff9b:1:ff00::808:808', '2002:7f00:1::1', '2002:808:808::1'])
      expect(p.allows(a), a).toBe(false)
    expect(policy(['2002::/16']).allows('2002:808:808::1')).toBe(true)
    expect(policy(['::ffff:0:127.0.0.0/104']).allows('::127.0.0.1')).toBe(true)
  })

  test('the most specific entry wins: allowing a network does not open the metadata address in it', () => {
    const p = policy(['169.254.0.0/16', '100.64.0.0/10', '127.0.0.0/8'], ['8.8.8.0/24'])
    expect(p.allows('169.254.1.1')).toBe(true)
    expect(p.allows('169.254.169.254')).toBe(false)
    expect(p.allows('100.100.100.200')).toBe(false)
    expect(p.allows('127.0.0.1')).toBe(true)
    expect(p.allows('8.8.8.8')).toBe(false)
    expect(p.allows('8.8.4.4')).toBe(true)
    // Only an exact entry opens it.
    expect(policy(['169.254.169.254']).allows('169.254.169.254')).toBe(true)
  })

  test('outbound.allow and LIVEOPS_OUTBOUND_ALLOW are read; a malformed entry stops startup naming it', () => {
    const yaml = 'outbound: { allow: [10.0.0.0/8] }\nplugins: {}\n'
    expect(loadConfig(yaml, plugins, {}).core.outbound.allow).toEqual(['10.0.0.0/8'])
    expect(
      loadConfig(yaml, plugins, { LIVEOPS_OUTBOUND_ALLOW: '127.0.0.0/8, 192.168.0.0/16' }).core.outbound
        .allow,
    ).toEqual(['127.0.0.0/8', '192.168.0.0/16'])
    let error: unknown
    try {
      loadConfig('outbound: { deny: [10.0.0.0/33] }\nplugins: {}\n', plugins, {})
    } catch (e) {
      error = e
    }
    expect(error).toBeInstanceOf(ConfigError)
    expect((error as ConfigError).errors).toEqual([
      "outbound.deny[0]: '10.0.0.0/33' is not an address or a network in CIDR notation",
    ])
  })
})

describe('the client connects to the address it checked', () => {
  const sink = httpSink()
  afterAll(() => sink.stop())
  const port = new URL(sink.url).port

  test('a name is resolved once: the request reaches the checked address, with its own Host header', async () => {
    // A name only this resolver knows: the connection cannot have asked the system's DNS again.
    const out = new Outbound(new OutboundPolicy({ allow: ['127.0.0.0/8'], deny: [] }), {
      lookup: async () => ['127.0.0.1'],
    })
    const res = await out.fetch(`http://hooks.rebind.test:${port}/hook`, { method: 'POST', body: '{}' })
    expect(res.status).toBe(200)
    expect(sink.hits.at(-1)!.headers.host).toBe(`hooks.rebind.test:${port}`)
  })

  test('every address of the name is checked: one refused address refuses the name', async () => {
    const out = new Outbound(new OutboundPolicy({ allow: ['127.0.0.0/8'], deny: [] }), {
      lookup: async () => ['127.0.0.1', '169.254.169.254'],
    })
    const before = sink.hits.length
    await expect(out.fetch(`http://twice.rebind.test:${port}/hook`)).rejects.toBeInstanceOf(OutboundRefused)
    expect(sink.hits.length).toBe(before)
  })

  test('https keeps the server name: the certificate of the name verifies at the pinned address', async () => {
    const cert = issue(['hooks.tls.test'], 30)
    const tls = Bun.serve({
      port: 0,
      hostname: '127.0.0.1',
      tls: { cert: cert.chain, key: cert.key },
      fetch: (r) => new Response(new URL(r.url).host),
    })
    try {
      const out = new Outbound(new OutboundPolicy({ allow: ['127.0.0.0/8'], deny: [] }), {
        lookup: async () => ['127.0.0.1'],
      })
      const ca = cert.chain.slice(cert.cert.length)
      const res = await out.fetch(`https://hooks.tls.test:${tls.port}/`, { tls: { ca } } as RequestInit)
      expect(await res.text()).toBe(`hooks.tls.test:${tls.port}`)
    } finally {
      tls.stop(true)
    }
  })

  test('a redirect is an answer, never followed', async () => {
    const redirect = httpSink(() => new Response(null, { status: 302, headers: { location: sink.url } }))
    try {
      const out = new Outbound(new OutboundPolicy({ allow: ['127.0.0.0/8'], deny: [] }))
      const before = sink.hits.length
      expect((await out.fetch(redirect.url, { method: 'POST', body: '{}' })).status).toBe(302)
      expect(sink.hits.length).toBe(before)
    } finally {
      redirect.stop()
    }
  })
})

forEachEngine((engine) => {
  const sink = httpSink(() => new Response('internal detail: db01 password=hunter2', { status: 500 }))
  const mail = smtpSink()
  let a: TestApp
  let admin: string
  beforeAll(async () => {
    a = await surfaceApp(engine, {
      // The shipped policy: nothing allowed beyond the public internet.
      config: { outbound: { allow: [] } },
      plugins: { notify: { channels: { fromyaml: { type: 'webhook', url: sink.url } } } },
    })
    admin = await a.token('admin')
  })
  afterAll(async () => {
    await a.stop()
    sink.stop()
    mail.stop()
  })
  const as = (method: string, path: string, body?: unknown) => a.req(method, path, { token: admin, body })

  test('webhook and chat channels: metadata and loopback targets are refused when configured', async () => {
    for (const url of [...METADATA, ...LOOPBACK, sink.url]) {
      const r = await as('PUT', '/api/v1/config/probe', { type: 'webhook', config: { url } })
      expect(r.status, url).toBe(400)
      expect(r.body.message, url).toContain('not an allowed destination (outbound policy)')
    }
    expect((await as('GET', '/api/v1/config/probe')).status).toBe(404)
  })

  test('an SMTP host is checked the same way, with its connection test off too', async () => {
    for (const host of ['169.254.169.254', '127.0.0.1', 'localhost', '2130706433'])
      for (const verify of [true, false]) {
        const r = await as('PUT', '/api/v1/config/mailer', {
          type: 'smtp',
          config: { host, port: mail.port, from: 'ops@example.com', security: 'none', verify },
        })
        expect([host, verify, r.status]).toEqual([host, verify, 400])
        expect(r.body.message, host).toContain('not an allowed destination')
      }
    expect((await as('GET', '/api/v1/config/mailer')).status).toBe(404)
    expect(mail.mails).toHaveLength(0)
  })

  test('the certificate probe and domain-info refuse them at once', async () => {
    for (const [domain, address] of [
      ['169.254.169.254', undefined],
      ['metadata.example', '169.254.169.254'],
      ['localhost', '127.0.0.1'],
    ]) {
      const q = `domain=${domain}${address ? `&address=${address}` : ''}&port=443`
      const info = await as('GET', `/api/v1/certificates/domain-info?${q}`)
      expect(info.status, q).toBe(400)
      expect(info.body.message).toContain('not an allowed destination')
      const reg = await as('POST', '/api/v1/certificates', { domain, address, port: 443 })
      expect(reg.status, q).toBe(400)
    }
  })

  test('an ML serving endpoint is refused at deploy', async () => {
    const { model } = await trainedClassifier(a, admin, await newGame(a, admin), 5, undefined, 200)
    for (const url of [METADATA[0], `${sink.url}?token=x`]) {
      const r = await as('POST', `/api/ml-models/${model.id}/deploy`, { servingEndpoint: url })
      expect(r.status, url).toBe(400)
      expect(r.body.message).toContain('not an allowed destination')
    }
  })

  test('site webhooks and ops routing channels set through the API do not reach refused hosts', async () => {
    const before = sink.hits.length
    expect((await as('PUT', '/api/v1/site/notification.webhookUrl', { value: sink.url })).status).toBe(200)
    const builtin = await as('POST', '/api/v1/site/notification/test', { channel: 'webhook' })
    expect(builtin.body.data).toMatchObject({ ok: false })
    expect(builtin.body.data.error).toContain('not an allowed destination')
    await as('PUT', '/api/v1/ops/notifications', {
      channels: [{ id: 'meta', type: 'chatbot', url: METADATA[0] }],
      rules: [],
    })
    const routed = await as('POST', '/api/v1/site/notification/test', { channel: 'meta' })
    expect(routed.body.data.error).toContain('not an allowed destination')
    expect(sink.hits.length).toBe(before)
    await as('DELETE', '/api/v1/site/notification.webhookUrl')
  })

  test('the channel the YAML names is trusted; its failure shows a status, never the answer', async () => {
    const n = await as('POST', '/api/v1/notify', { type: 'deploy', title: 'to yaml', channels: ['fromyaml'] })
    expect(n.body.code).toBe(0)
    const id = n.body.data.task_ids[0]
    const log = await until(async () => {
      const r = await as('GET', `/api/v1/logs/${id}`)
      return r.body.data?.attempts?.length ? r.body.data : undefined
    })
    expect(sink.hits.length).toBeGreaterThan(0)
    expect(log.attempts[0].error).toBe('unexpected status code: 500')
    const viewer = await a.token('viewer')
    for (const token of [admin, viewer]) {
      const all = JSON.stringify((await a.req('GET', '/api/v1/logs', { token })).body)
      expect(all).not.toContain('hunter2')
      expect(all).not.toContain('internal detail')
    }
  })
})

forEachEngine((engine) => {
  test('allowed targets: a closed port and a silent one read the same, no port scanner', async () => {
    const silent = await silentServer()
    const closed = Bun.serve({ port: 0, hostname: '127.0.0.1', fetch: () => new Response() })
    const closedPort = closed.port
    closed.stop(true)
    const a = await makeApp(engine, {
      plugins: { notify: {}, 'webhook-provider': {} },
    })
    try {
      const errors: string[] = []
      for (const [name, port] of [
        ['closed', closedPort],
        ['silent', silent.port],
      ] as const) {
        const put = await a.req('PUT', `/api/v1/config/${name}`, {
          headers: { 'x-admin-token': 'test-admin-token' },
          body: { type: 'webhook', config: { url: `http://127.0.0.1:${port}/x`, timeout_ms: 300 } },
        })
        expect(put.status).toBe(200)
        const n = await a.req('POST', '/api/v1/notify', {
          headers: { 'x-admin-token': 'test-admin-token' },
          body: { type: 'x', title: name, channels: [name] },
        })
        const id = n.body.data.task_ids[0]
        errors.push(
          await until(async () => {
            const r = await a.req('GET', `/api/v1/logs/${id}`, {
              headers: { 'x-admin-token': 'test-admin-token' },
            })
            return r.body.data?.attempts?.[0]?.error as string | undefined
          }),
        )
      }
      expect(errors).toEqual([NO_ANSWER, NO_ANSWER])
    } finally {
      await a.stop()
      await silent.close()
    }
  })
})
