import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { newGame, trainedClassifier } from '../../plugins/ml/testing'
import { httpSink } from '../../plugins/notify/testing'
import { type TestApp, forEachEngine, until } from '../helpers'
import { surfaceApp } from './surface-app'

/*
 * Issue 34 point 6: a secret is masked by its schema whatever it looks like, and a masked secret
 * sent back is kept only for the destination it was entered for.
 */

const BCRYPT = '$2b$12$R9h/cIPz0gi.URNNX3kh2OPST9/PgBkqquzi.Ss7KIUgO2t0jWMUW'
const DOLLAR_PASSWORD = '$ecretSmtpPass'

/** The texts of `values` that appear in `body`. */
const leaks = (body: unknown, values: string[]) => values.filter((v) => JSON.stringify(body).includes(v))

forEachEngine((engine) => {
  const sink = httpSink()
  const attacker = httpSink()
  const served: Array<{ url: string; authorization: string | null }> = []
  const endpoint = Bun.serve({
    hostname: '127.0.0.1',
    port: 0,
    fetch(req) {
      served.push({ url: req.url, authorization: req.headers.get('authorization') })
      return Response.json({ prediction: 'yes', probability: 0.9 })
    },
  })
  let a: TestApp
  let admin: string
  beforeAll(async () => {
    a = await surfaceApp(engine)
    admin = await a.token('admin')
  })
  afterAll(async () => {
    await a.stop()
    sink.stop()
    attacker.stop()
    endpoint.stop(true)
  })
  const as = (method: string, path: string, body?: unknown, token = admin) =>
    a.req(method, path, { token, body })
  const auditText = async () => JSON.stringify((await as('GET', '/api/v1/audit?size=500')).body.data)

  describe('values that start with $ are secrets like any other', () => {
    test('a bearer header of a channel and an SMTP password read masked, in the answer and in GET', async () => {
      const hook = await as('PUT', '/api/v1/config/bcrypt', {
        type: 'webhook',
        config: { url: sink.url, headers: { Authorization: `Bearer ${BCRYPT}` } },
      })
      expect(hook.status).toBe(200)
      const mail = await as('PUT', '/api/v1/config/mail', {
        type: 'smtp',
        config: {
          host: '127.0.0.1',
          port: 2525,
          from: 'ops@example.com',
          password: DOLLAR_PASSWORD,
          verify: false,
        },
      })
      expect(mail.status).toBe(200)
      for (const r of [
        hook,
        mail,
        await as('GET', '/api/v1/config/bcrypt'),
        await as('GET', '/api/v1/config/mail'),
      ])
        expect(leaks(r.body, [BCRYPT, DOLLAR_PASSWORD, '$2b$12$'])).toEqual([])
      expect((await as('GET', '/api/v1/config/mail')).body.data.config.password).toBe('set:Pass')
    })

    test('the site smtpPassword: masked in GET, in the snapshot and in the audit details', async () => {
      const put = await as('PUT', '/api/v1/site/notification.smtpPassword', { value: DOLLAR_PASSWORD })
      expect(put.status).toBe(200)
      expect(put.body.data.value).toBe('set:Pass')
      expect((await as('GET', '/api/v1/site/notification.smtpPassword')).body.data.value).toBe('set:Pass')
      expect(leaks((await as('GET', '/api/v1/site/notification')).body, [DOLLAR_PASSWORD])).toEqual([])
      await until(async () => (await auditText()).includes('notification.smtpPassword'))
      expect(leaks(await auditText(), [DOLLAR_PASSWORD])).toEqual([])
      expect((await as('PUT', '/api/v1/site/notification.smtpPassword', { value: '' })).status).toBe(200)
    })
  })

  describe('an ML serving endpoint', () => {
    let model: string
    const url = () =>
      `http://svc:pw-Hidden-8842@127.0.0.1:${endpoint.port}/score/hk-Path-7710?token=tk-Secret-5531&v=2`
    beforeAll(async () => {
      model = (await trainedClassifier(a, admin, await newGame(a, admin), 5, undefined, 200)).model.id
    })

    test('reads with its user:password, path and query values masked, wherever the model is shown', async () => {
      const deploy = await as('POST', `/api/ml-models/${model}/deploy`, { servingEndpoint: url() })
      expect(deploy.status).toBe(200)
      const reads = [deploy, await as('GET', `/api/ml-models/${model}`), await as('GET', '/api/ml-models')]
      for (const r of reads)
        expect(leaks(r.body, ['pw-Hidden-8842', 'tk-Secret-5531', 'hk-Path-7710'])).toEqual([])
      const shown = new URL(reads[1].body.servingEndpoint)
      expect(decodeURIComponent(shown.password)).toBe('set:8842')
      expect(shown.searchParams.get('token')).toBe('set:5531')
      expect(shown.host).toBe(`127.0.0.1:${endpoint.port}`)
    })

    test('sent back as read it keeps the stored endpoint; moved with masked parts it is 400', async () => {
      const read = (await as('GET', `/api/ml-models/${model}`)).body.servingEndpoint as string
      const again = await as('POST', `/api/ml-models/${model}/deploy`, { servingEndpoint: read })
      expect(again.status).toBe(200)
      const p = await as('POST', `/api/ml-models/${model}/predict`, {
        features: { sessions: 1, days_since_purchase: 9 },
      })
      expect(p.status).toBe(200)
      const last = served.at(-1)!
      expect(new URL(last.url).searchParams.get('token')).toBe('tk-Secret-5531')
      expect(new URL(last.url).pathname).toBe('/score/hk-Path-7710')
      expect(last.authorization).toBe(`Basic ${btoa('svc:pw-Hidden-8842')}`)
      const moved = read.replace(`127.0.0.1:${endpoint.port}`, new URL(attacker.url).host)
      const r = await as('POST', `/api/ml-models/${model}/deploy`, { servingEndpoint: moved })
      expect(r.status).toBe(400)
      expect(r.body.message).toBe(
        'body.servingEndpoint: enter the secret again: its destination changed, and a masked secret is kept only for the same one',
      )
    })
  })

  describe('a masked secret is kept only for its destination', () => {
    test('an app token with the config scope cannot move a channel to its sink and receive the header', async () => {
      const secret = 'Bearer real-secret-7731'
      await as('PUT', '/api/v1/config/ops', {
        type: 'webhook',
        config: { url: sink.url, headers: { Authorization: secret } },
      })
      const token = (
        await as('POST', '/api/v1/app-tokens', { name: 'deployer', scopes: ['config', 'query'] })
      ).body.data.token
      const headers = { 'x-app-token': token }
      const read = (await a.req('GET', '/api/v1/config/ops', { headers })).body.data
      expect(read.config.headers.Authorization).toBe('set:7731')
      const moved = await a.req('PUT', '/api/v1/config/ops', {
        headers,
        body: { config: { ...read.config, url: attacker.url } },
      })
      expect(moved.status).toBe(400)
      expect(moved.body.data.field).toBe('body.config.headers.Authorization')
      expect(moved.body.message).toContain('enter the secret again')
      await as('POST', '/api/v1/notify', { type: 'x', title: 'after the attempt', channels: ['ops'] })
      await until(() => sink.hits.some((h) => h.body.title === 'after the attempt'))
      expect(attacker.hits).toHaveLength(0)
      expect(sink.hits.find((h) => h.body.title === 'after the attempt')!.headers.authorization).toBe(secret)
      // The same URL keeps it; a new secret for the new URL is taken.
      expect(
        (
          await a.req('PUT', '/api/v1/config/ops', {
            headers,
            body: { config: { ...read.config, timeout_ms: 900 } },
          })
        ).status,
      ).toBe(200)
      const reentered = await a.req('PUT', '/api/v1/config/ops', {
        headers,
        body: { config: { ...read.config, url: attacker.url, headers: { Authorization: 'Bearer own' } } },
      })
      expect(reentered.status).toBe(200)
    })

    test('an SMTP channel moved to another host with its masked password is 400', async () => {
      await as('PUT', '/api/v1/config/relay', {
        type: 'smtp',
        config: {
          host: '127.0.0.1',
          port: 2525,
          from: 'ops@example.com',
          password: 'relay-pass-0042',
          verify: false,
        },
      })
      const read = (await as('GET', '/api/v1/config/relay')).body.data
      const moved = await as('PUT', '/api/v1/config/relay', { config: { ...read.config, port: 2526 } })
      expect(moved.status).toBe(400)
      expect(moved.body.data.field).toBe('body.config.password')
    })

    test('an ops routing channel moved with its masked secret, or a site SMTP host under a set password, is 400', async () => {
      const put = (channels: unknown[]) => as('PUT', '/api/v1/ops/notifications', { channels, rules: [] })
      expect(
        (await put([{ id: 'hook', type: 'webhook', url: sink.url, secret: 'sign-secret-9911' }])).status,
      ).toBe(200)
      const read = (await as('GET', '/api/v1/ops/notifications')).body.data.channels[0]
      expect(read.secret).toBe('set:9911')
      const moved = await put([{ ...read, url: attacker.url }])
      expect(moved.status).toBe(400)
      expect(moved.body.data.field).toBe('body.channels[0].secret')

      expect((await as('PUT', '/api/v1/site/notification.smtpHost', { value: '127.0.0.1' })).status).toBe(200)
      expect(
        (await as('PUT', '/api/v1/site/notification.smtpPassword', { value: 'site-pass-3318' })).status,
      ).toBe(200)
      const host = await as('PUT', '/api/v1/site/notification.smtpHost', { value: 'mx.attacker.test' })
      expect(host.status).toBe(400)
      expect(host.body.message).toContain('enter the secret again')
      const port = await as('PUT', '/api/v1/site/notification.smtpPort', { value: 2526 })
      expect(port.status).toBe(400)
      expect((await as('GET', '/api/v1/site/notification.smtpHost')).body.data.value).toBe('127.0.0.1')
    })
  })
})
