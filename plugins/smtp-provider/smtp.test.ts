import { afterAll, beforeAll, expect, test } from 'bun:test'
import { Value } from '@sinclair/typebox/value'
import { SmtpSettings, escapeHtml, securityOf, smtpProvider, transportOptions } from '.'
import { createLogger } from '../../core/log'
import type { Delivery } from '../../core/plugin'
import { type TestApp, forEachEngine, loopbackOutbound, makeApp, until } from '../../test/helpers'
import { smtpSink } from '../notify/testing'

const log = createLogger({
  level: 'error',
  format: 'json',
  max_size: 1,
  max_backups: 0,
  max_age: 0,
  sensitive_fields: [],
})
const delivery: Delivery = {
  id: '01900000-0000-7000-8000-000000000002',
  provider: 'mail',
  level: 'error',
  targets: ['mail'],
  recipients: ['ops@example.com'],
  timestamp: '2026-01-01T00:00:00.000Z',
  title: 'Disk <full>',
  body: 'a < b & "c"\nline 2',
  raw: {},
}
const sink = smtpSink()
const base = {
  host: '127.0.0.1',
  port: sink.port,
  security: 'none' as const,
  from: 'liveops@example.com',
  to: ['default@example.com'],
  timeout_ms: 2000,
  insecure_skip_verify: false,
  verify: true,
}
afterAll(() => sink.stop())

test('ssl on 465, starttls on 587, none elsewhere unless set', () => {
  expect(securityOf({ port: 465 })).toBe('ssl')
  expect(securityOf({ port: 587 })).toBe('starttls')
  expect(securityOf({ port: 25 })).toBe('none')
  expect(securityOf({ port: 2525, security: 'starttls' })).toBe('starttls')
  expect(transportOptions({ ...base, port: 465, security: undefined })).toMatchObject({
    secure: true,
    requireTLS: false,
  })
  expect(transportOptions({ ...base, port: 587, security: undefined })).toMatchObject({
    secure: false,
    requireTLS: true,
    ignoreTLS: false,
  })
  expect(transportOptions({ ...base, username: 'u', password: 'p' }).auth).toEqual({ user: 'u', pass: 'p' })
})

test('auth_method picks the SASL mechanism the server sees (LOGIN or PLAIN); absent, the library chooses', async () => {
  for (const method of ['login', 'plain'] as const) {
    const p = await smtpProvider.create(
      { ...base, username: 'u', password: 'secret', auth_method: method },
      { log, outbound: loopbackOutbound },
    )
    const before = sink.auths.length
    expect(await p.send(delivery)).toEqual({ ok: true })
    expect(sink.auths.slice(before)).toEqual([method.toUpperCase()])
    await p.close?.()
  }
})

test('the HTML part escapes the body', () => {
  expect(escapeHtml(`<b>"x" & 'y'</b>`)).toBe('&lt;b&gt;&quot;x&quot; &amp; &#39;y&#39;&lt;/b&gt;')
})

test('sends to the delivery recipients, else the configured to; subject is the title; html escaped', async () => {
  const p = await smtpProvider.create(
    { ...base, username: 'u', password: 'secret' },
    { log, outbound: loopbackOutbound },
  )
  await p.verify?.()
  expect(await p.send(delivery)).toEqual({ ok: true })
  const mail = sink.mails.at(-1)!
  expect(mail.from).toBe('liveops@example.com')
  expect(mail.to).toEqual(['ops@example.com'])
  expect(mail.data).toContain('Subject: Disk <full>')
  expect(mail.data).toContain('a &lt; b &amp; &quot;c&quot;<br>line 2')
  expect(await p.send({ ...delivery, recipients: [] })).toEqual({ ok: true })
  expect(sink.mails.at(-1)!.to).toEqual(['default@example.com'])
  const none = await smtpProvider.create({ ...base, to: [] }, { log, outbound: loopbackOutbound })
  expect(await none.send({ ...delivery, recipients: [] })).toEqual({
    ok: false,
    retryable: false,
    error: 'smtp: no recipients (none in the request, none configured in to)',
  })
  await p.close?.()
})

test('each recipient is one address: a list or a line break in one is refused for good, nothing sent', async () => {
  const p = await smtpProvider.create(base, { log, outbound: loopbackOutbound })
  const sent = sink.mails.length
  for (const [i, recipients] of [
    [2, ['ok@example.com', 'a@x.io, b@evil.test']],
    [1, ['victim@x.io\r\nBcc: evil@attacker.test']],
    [1, ['Someone <s@x.io>']],
  ] as const)
    expect(await p.send({ ...delivery, recipients: [...recipients] })).toEqual({
      ok: false,
      retryable: false,
      error: `smtp: recipient ${i} is not one mail address`,
    })
  expect(sink.mails.length).toBe(sent)
  expect(await p.send({ ...delivery, recipients: ['user+tag@sub.example.com'] })).toEqual({ ok: true })
  expect(sink.mails.at(-1)!.to).toEqual(['user+tag@sub.example.com'])
  await p.close?.()
  // The configured default recipients are checked when the settings are.
  expect(Value.Check(SmtpSettings, { ...base, to: ['a@x.io, b@y.io'] })).toBe(false)
})

test('a 5xx reply is permanent, a 4xx reply temporary, an unreachable server temporary', async () => {
  const perm = smtpSink({ rejectRcpt: 550 })
  const temp = smtpSink({ rejectRcpt: 450 })
  const r1 = await (
    await smtpProvider.create({ ...base, port: perm.port }, { log, outbound: loopbackOutbound })
  ).send(delivery)
  expect(r1.ok).toBe(false)
  expect(r1.ok === false && r1.retryable).toBe(false)
  const r2 = await (
    await smtpProvider.create({ ...base, port: temp.port }, { log, outbound: loopbackOutbound })
  ).send(delivery)
  expect(r2.ok === false && r2.retryable).toBe(true)
  perm.stop()
  temp.stop()
  const dead = await smtpProvider.create({ ...base, port: perm.port }, { log, outbound: loopbackOutbound })
  const r3 = await dead.send(delivery)
  expect(r3.ok === false && r3.retryable).toBe(true)
  expect(r3.ok === false && r3.error).toStartWith('smtp: ')
  await expect(dead.verify!()).rejects.toThrow()
})

forEachEngine((engine) => {
  let t: TestApp
  beforeAll(async () => {
    t = await makeApp(engine, {
      plugins: {
        notify: {
          auth: { enabled: false },
          channels: { mail: { type: 'smtp', ...base, password: 'hunter2-secret' } },
        },
        'smtp-provider': {},
      },
    })
  })
  afterAll(() => t.stop())

  test('a notify reaches the SMTP sink; the password reads masked; a PUT to an unreachable server keeps the old one', async () => {
    const r = await t.req('POST', '/api/v1/notify', {
      body: {
        type: 'x',
        channel: 'mail',
        title: `via ${engine}`,
        body: 'hi',
        recipients: { mail: ['r@example.com'] },
      },
    })
    expect(r.body.code).toBe(0)
    expect(await until(() => sink.mails.some((m) => m.data.includes(`Subject: via ${engine}`)))).toBe(true)
    const cfg = await t.req('GET', '/api/v1/config/mail')
    expect(cfg.body.data.config.password).toBe('set:cret')
    // Another port with the masked password: the password is not kept for it (issue 34 point 6).
    const masked = await t.req('PUT', '/api/v1/config/mail', {
      body: { config: { ...cfg.body.data.config, port: 1 } },
    })
    expect(masked.status).toBe(400)
    expect(masked.body.message).toContain('enter the secret again')
    // Nor for another way of sending it: TLS or the certificate check switched, another user or
    // mechanism, or the stored security left out (the port's default then decides).
    const { security: _, ...noSecurity } = cfg.body.data.config
    for (const config of [
      { ...cfg.body.data.config, security: 'starttls' },
      { ...cfg.body.data.config, insecure_skip_verify: true },
      { ...cfg.body.data.config, username: 'someone-else' },
      { ...cfg.body.data.config, auth_method: 'login' },
      noSecurity,
    ]) {
      const r = await t.req('PUT', '/api/v1/config/mail', { body: { config } })
      expect([JSON.stringify(config), r.status]).toEqual([JSON.stringify(config), 400])
      expect(r.body.message).toContain('enter the secret again')
    }
    const bad = await t.req('PUT', '/api/v1/config/mail', {
      body: { config: { ...cfg.body.data.config, port: 1, password: 'hunter2-secret' } },
    })
    expect(bad.status).toBe(400)
    expect(bad.body.message).toContain('verification failed')
    const noHost = await t.req('PUT', '/api/v1/config/mail', { body: { config: { from: 'a@b.c' } } })
    expect(noHost.body.data.field).toBe('body.config.host')
    expect((await t.req('GET', '/api/v1/config/mail')).body.data.config.port).toBe(sink.port)
  })
})
