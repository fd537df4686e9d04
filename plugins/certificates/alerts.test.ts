import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import type { CertificateEvent } from '../../core/events'
import { type TestApp, forEachEngine, makeApp, until } from '../../test/helpers'
import { type TlsServer, issue, tlsServer } from './testing'

/** Polls `fn` until it holds or the deadline passes. */
forEachEngine((engine) => {
  let a: TestApp
  let admin: string
  let viewer: string
  let server: TlsServer
  const events: Array<{ name: string; e: CertificateEvent }> = []
  beforeAll(async () => {
    a = await makeApp(engine, { plugins: { certificates: { check_interval_s: 0, probe_timeout_ms: 2000 } } })
    admin = await a.token('admin')
    viewer = await a.token('viewer')
    a.bus.on('certificate_expiring', (e) => {
      events.push({ name: 'certificate_expiring', e })
    })
    a.bus.on('certificate_expired', (e) => {
      events.push({ name: 'certificate_expired', e })
    })
    server = await tlsServer(issue(['localhost'], 200))
  })
  afterAll(async () => {
    await server.close()
    await a.stop()
  })
  const check = (id: string) => a.req('POST', `/api/v1/certificates/${id}/check`, { token: admin })
  const rule = async (body: Record<string, unknown>) => {
    const r = await a.req('POST', '/api/v1/certificates/alerts', { token: admin, body })
    expect(r.status).toBe(201)
    return r.body.data
  }

  describe('certificate alert rules', () => {
    test('a rule raises certificate_expiring once per window, again after a renewal, and certificate_expired once', async () => {
      const cert = (
        await a.req('POST', '/api/v1/certificates', {
          token: admin,
          body: { domain: 'localhost', address: '127.0.0.1', port: server.port, thresholdDays: 14 },
        })
      ).body.data
      expect(cert.status).toBe('active')
      const r = await rule({ domain: 'localhost', thresholdDays: 45 })
      expect(r).toMatchObject({ domain: 'localhost', thresholdDays: 45, active: true })
      expect(r.lastTriggeredAt).toBeUndefined()
      expect(events).toHaveLength(0)

      // Into the rule's 45-day window, still outside the certificate's own 14 days.
      server.serve(issue(['localhost'], 40))
      expect((await check(cert.id)).body.data.status).toBe('active')
      expect(events).toHaveLength(1)
      expect(events[0]).toMatchObject({
        name: 'certificate_expiring',
        e: {
          id: cert.id,
          domain: 'localhost',
          port: server.port,
          days_left: 39,
          rule_id: r.id,
          threshold_days: 45,
        },
      })
      await check(cert.id)
      await a.req('POST', '/api/v1/certificates/check-all', { token: admin })
      expect(events).toHaveLength(1)
      const after = (await a.req('GET', '/api/v1/certificates/alerts?domain=localhost', { token: viewer }))
        .body.data
      expect(after).toHaveLength(1)
      expect(after[0].lastEvent).toBe('certificate_expiring')
      expect(Date.now() - Date.parse(after[0].lastTriggeredAt)).toBeLessThan(60_000)

      // A renewal moves the window: the next approach alerts again.
      server.serve(issue(['localhost'], 300))
      await check(cert.id)
      expect(events).toHaveLength(1)
      server.serve(issue(['localhost'], 20))
      await check(cert.id)
      expect(events.map((x) => x.name)).toEqual(['certificate_expiring', 'certificate_expiring'])
      expect(events[1].e.days_left).toBe(19)

      server.serve(issue(['localhost'], -3, { fromDays: -50 }))
      expect((await check(cert.id)).body.data.status).toBe('expired')
      await check(cert.id)
      expect(events.map((x) => x.name)).toEqual([
        'certificate_expiring',
        'certificate_expiring',
        'certificate_expired',
      ])
      expect(events[2].e).toMatchObject({ days_left: -3, id: cert.id })
    })

    test('an inactive rule stays silent; a rule created for a stored expiring certificate fires at once', async () => {
      const pem = issue(['vault.ironbark.example'], 9).cert
      await a.req('POST', '/api/v1/certificates', {
        token: admin,
        body: { domain: 'vault.ironbark.example', certificate: pem },
      })
      const before = events.length
      const quiet = await rule({ domain: 'vault.ironbark.example', thresholdDays: 30, active: false })
      expect(events.length).toBe(before)
      expect(quiet.active).toBe(false)
      const loud = await rule({ domain: 'vault.ironbark.example', thresholdDays: 10 })
      expect(events.length).toBe(before + 1)
      expect(loud.lastTriggeredAt).toBeString()
      expect(events.at(-1)).toMatchObject({
        name: 'certificate_expiring',
        e: { domain: 'vault.ironbark.example', rule_id: loud.id },
      })
      // Switching the quiet rule on fires it at the next check, once.
      const on = await a.req('PUT', `/api/v1/certificates/alerts/${quiet.id}`, {
        token: admin,
        body: { active: true },
      })
      expect(on.body.data).toMatchObject({ active: true, thresholdDays: 30 })
      await a.req('POST', '/api/v1/certificates/check-all', { token: admin })
      await a.req('POST', '/api/v1/certificates/check-all', { token: admin })
      expect(events.filter((x) => x.e.rule_id === quiet.id)).toHaveLength(1)
    })

    test('bad rule input answers 400 naming the field; unknown ids 404; viewers 403; no token 401', async () => {
      for (const [body, field] of [
        [{ thresholdDays: 30 }, 'body.domain'],
        [{ domain: 'a.example', thresholdDays: 0 }, 'body.thresholdDays'],
        [{ domain: 'a.example', thresholdDays: '30' }, 'body.thresholdDays'],
        [{ domain: 'a.example', active: 'yes' }, 'body.active'],
        [{ domain: 'a.example', lastTriggeredAt: '2026-01-01T00:00:00Z' }, 'body.lastTriggeredAt'],
      ] as const) {
        const r = await a.req('POST', '/api/v1/certificates/alerts', { token: admin, body })
        expect([field, r.status]).toEqual([field, 400])
        expect(r.body.message).toContain(field)
      }
      expect(
        (await a.req('GET', '/api/v1/certificates/alerts?domain=a.example', { token: admin })).body.data,
      ).toEqual([])
      const r = await rule({ domain: 'partial.ironbark.example', thresholdDays: 12 })
      const put = await a.req('PUT', `/api/v1/certificates/alerts/${r.id}`, {
        token: admin,
        body: { thresholdDays: 7 },
      })
      expect(put.body.data).toMatchObject({ thresholdDays: 7, active: true })
      expect(
        (await a.req('PUT', `/api/v1/certificates/alerts/${r.id}`, { token: admin, body: { colour: 1 } }))
          .status,
      ).toBe(400)
      expect(
        (await a.req('PUT', '/api/v1/certificates/alerts/nope', { token: admin, body: { active: false } }))
          .status,
      ).toBe(404)
      expect((await a.req('DELETE', '/api/v1/certificates/alerts/nope', { token: admin })).status).toBe(404)
      expect(
        (await a.req('POST', '/api/v1/certificates/alerts', { token: viewer, body: { domain: 'x.example' } }))
          .status,
      ).toBe(403)
      expect((await a.req('DELETE', `/api/v1/certificates/alerts/${r.id}`, { token: viewer })).status).toBe(
        403,
      )
      expect((await a.req('GET', '/api/v1/certificates/alerts')).status).toBe(401)
      expect((await a.req('DELETE', `/api/v1/certificates/alerts/${r.id}`, { token: admin })).status).toBe(
        200,
      )
      expect((await a.req('DELETE', `/api/v1/certificates/alerts/${r.id}`, { token: admin })).status).toBe(
        404,
      )
    })
  })

  test('the scheduled check-all reads renewed certificates on its own', async () => {
    const s = await tlsServer(issue(['localhost'], 5))
    const b = await makeApp(engine, { plugins: { certificates: { check_interval_s: 1 } } })
    try {
      const token = await b.token('admin')
      const d = (
        await b.req('POST', '/api/v1/certificates', {
          token,
          body: { domain: 'localhost', address: '127.0.0.1', port: s.port },
        })
      ).body.data
      expect(d.status).toBe('expiring')
      s.serve(issue(['localhost'], 150))
      await until(async () => {
        const r = await b.req('GET', `/api/v1/certificates/${d.id}`, { token })
        return r.body.data.status === 'active'
      }, 8000)
      expect((await b.req('GET', `/api/v1/certificates/${d.id}`, { token })).body.data.daysLeft).toBe(149)
    } finally {
      await b.stop()
      await s.close()
    }
  })
})
