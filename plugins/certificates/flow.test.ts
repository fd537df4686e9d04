import { afterAll, beforeAll, expect, test } from 'bun:test'
import { type TestApp, forEachEngine, makeApp, until } from '../../test/helpers'
import { httpSink } from '../notify/testing'
import { issue } from './testing'

/**
 * A certificate alert travels the bus to notify and out of a webhook channel: no plugin imports
 * the other. (That a rule fires once per certificate is proven on the bus in alerts.test.ts.)
 */
forEachEngine((engine) => {
  let a: TestApp
  const sink = httpSink()
  beforeAll(async () => {
    a = await makeApp(engine, {
      plugins: {
        certificates: { check_interval_s: 0 },
        'webhook-provider': {},
        notify: {
          channels: { oncall: { type: 'webhook', url: sink.url } },
          routes: [{ type: 'certificate_*', channels: ['oncall'] }],
        },
      },
    })
  })
  afterAll(async () => {
    await a.stop()
    sink.stop()
  })

  test('an alert rule on an expiring certificate reaches the on-call webhook', async () => {
    const token = await a.token('admin')
    const reg = await a.req('POST', '/api/v1/certificates', {
      token,
      body: {
        domain: 'pay.saltmarsh.example',
        port: 9443,
        certificate: issue(['pay.saltmarsh.example'], 9).cert,
      },
    })
    expect(reg.body.data.status).toBe('expiring')
    const rule = await a.req('POST', '/api/v1/certificates/alerts', {
      token,
      body: { domain: 'pay.saltmarsh.example', thresholdDays: 14 },
    })
    expect(rule.status).toBe(201)
    const hit = await until(() =>
      sink.hits.find((h) => String(h.body.title).includes('pay.saltmarsh.example:9443')),
    )
    expect(hit?.body).toMatchObject({
      level: 'warning',
      title: 'Certificate for pay.saltmarsh.example:9443 expires in 8 days',
    })
  })
})
