import { afterAll, beforeAll, expect, test } from 'bun:test'
import { type TestApp, forEachEngine, makeApp, until } from '../../test/helpers'
import { httpSink } from './testing'

/** Platform events (core/events.ts) reach channels through notify's routes; producers never import notify. */
forEachEngine((engine) => {
  let a: TestApp
  const sink = httpSink()
  beforeAll(async () => {
    a = await makeApp(engine, {
      plugins: {
        'webhook-provider': {},
        notify: {
          channels: { oncall: { type: 'webhook', url: sink.url } },
          routes: [
            { type: 'alert.fired', levels: ['critical'], channels: ['oncall'] },
            { type: 'certificate_*', channels: ['oncall'] },
            { type: 'model_drift', channels: ['oncall'] },
          ],
        },
      },
    })
  })
  afterAll(async () => {
    await a.stop()
    sink.stop()
  })

  const titles = () => sink.hits.map((h) => String(h.body.title))

  test('alert.fired is routed by type and level; one that no route takes is dropped without failing the producer', async () => {
    await a.bus.emit('alert.fired', {
      alert_id: 'db-latency',
      source: 'ops-alerts',
      level: 'critical',
      title: 'svc_db_latency_ms above 250 for 3 checks',
      body: 'latency 412 ms',
      params: { metric: 'svc_db_latency_ms', env: 'prod' },
      at: '2026-11-24T10:00:00.000Z',
    })
    await a.bus.emit('alert.fired', {
      alert_id: 'queue',
      source: 'ops-alerts',
      level: 'info',
      title: 'queue is fine again',
      body: '',
      params: {},
      at: '2026-11-24T10:01:00.000Z',
    })
    const hit = await until(() =>
      sink.hits.find((h) => h.body.title === 'svc_db_latency_ms above 250 for 3 checks'),
    )
    expect(hit?.body).toMatchObject({ level: 'critical' })
    expect(JSON.stringify(hit?.body)).toContain('db-latency')
    const logs = await a.req('GET', '/api/v1/logs?provider=oncall', { token: await a.token('admin') })
    expect(logs.body.data.logs.map((l: { title: string }) => l.title)).not.toContain('queue is fine again')
  })

  test('the same alert raised twice at the same instant is delivered once (idempotency key)', async () => {
    const e = {
      alert_id: 'disk',
      source: 'ops-alerts',
      level: 'critical' as const,
      title: 'disk almost full',
      body: '97%',
      params: {},
      at: '2026-11-24T11:00:00.000Z',
    }
    await Promise.all([a.bus.emit('alert.fired', e), a.bus.emit('alert.fired', e)])
    await until(() => titles().includes('disk almost full'))
    const logs = await a.req('GET', '/api/v1/logs?provider=oncall', { token: await a.token('admin') })
    expect(logs.body.data.logs.filter((l: { title: string }) => l.title === 'disk almost full')).toHaveLength(
      1,
    )
  })

  test('certificate and model events become notifications of their own type and level', async () => {
    await a.bus.emit('certificate_expired', {
      id: 'c9',
      domain: 'eu.play.example',
      port: 8443,
      valid_to: '2026-11-20T00:00:00.000Z',
    })
    await a.bus.emit('model_drift', {
      model_id: 'churn-v3',
      game_id: 'g1',
      severity: 'high',
      accuracy_drop: 0.12,
    })
    const cert = await until(() =>
      sink.hits.find((h) => String(h.body.title).includes('eu.play.example:8443')),
    )
    expect(cert?.body).toMatchObject({
      level: 'critical',
      title: 'Certificate for eu.play.example:8443 has expired',
    })
    const drift = await until(() => sink.hits.find((h) => String(h.body.title).includes('churn-v3')))
    expect(drift?.body).toMatchObject({ level: 'error' })
    expect(String(drift?.body.body)).toContain('12.0 points')
  })
})
