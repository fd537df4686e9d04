import { describe, expect, test } from 'bun:test'
import { forEachEngine } from '../../test/helpers'
import { certificatesSuite } from './certificates-fixture'
import { issue, otherKey } from './testing'

const DAY_MS = 86_400_000
const days = (iso: string) => (Date.parse(iso) - Date.now()) / DAY_MS

// Registration from a PEM, then lists, stats, check-all, deletes, roles and audits over what it
// registered (certificates-fixture.ts).
forEachEngine((engine) => {
  const fx = certificatesSuite(engine)
  const { serve, register, count, audits } = fx

  describe('registration from a PEM', () => {
    test('a valid certificate is active, with what the certificate says about itself', async () => {
      const c = issue(['shop.tidewater.example', 'www.tidewater.example'], 200)
      const d = await register({ domain: 'shop.tidewater.example', port: 8443, certificate: c.chain })
      expect(d).toMatchObject({
        domain: 'shop.tidewater.example',
        port: 8443,
        source: 'manual',
        status: 'active',
        commonName: 'shop.tidewater.example',
        sans: ['shop.tidewater.example', 'www.tidewater.example'],
        issuer: 'CN=Liveops Test Root CA, O=Liveops Test',
        algorithm: 'RSA-2048',
        chainLength: 1,
        thresholdDays: 21,
        hasPrivateKey: false,
        enabled: true,
      })
      expect(Math.round(days(d.validTo))).toBe(200)
      expect(d.daysLeft).toBe(199)
      expect(d.fingerprint256).toMatch(/^([0-9A-F]{2}:){31}[0-9A-F]{2}$/)
      expect(d.certificate).toContain('-----BEGIN CERTIFICATE-----')
      expect(d.error).toBeUndefined()
      const got = await fx.a.req('GET', `/api/v1/certificates/${d.id}`, { token: fx.viewer })
      expect(got.status).toBe(200)
      expect(got.body).toMatchObject({ code: 0, data: { id: d.id, status: 'active' } })
    })

    test('the port defaults to 443; within the threshold is expiring, past expiry expired', async () => {
      const soon = await register({
        domain: 'soon.tidewater.example',
        certificate: issue(['soon.tidewater.example'], 5).cert,
      })
      expect(soon).toMatchObject({ port: 443, status: 'expiring', daysLeft: 4 })
      const narrow = await register({
        domain: 'soon.tidewater.example',
        port: 9443,
        thresholdDays: 3,
        certificate: issue(['soon.tidewater.example'], 5).cert,
      })
      expect(narrow).toMatchObject({ status: 'active', thresholdDays: 3 })
      const gone = await register({
        domain: 'old.tidewater.example',
        certificate: issue(['old.tidewater.example'], -2, { fromDays: -90 }).cert,
      })
      expect(gone).toMatchObject({ status: 'expired', daysLeft: -2 })
    })

    test('a PEM that does not parse is 400 naming body.certificate, and nothing is stored', async () => {
      const before = await count()
      for (const [certificate, reason] of [
        [
          '-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydGlmaWNhdGU=\n-----END CERTIFICATE-----',
          'certificate does not parse',
        ],
        ['hello', 'no PEM certificate block'],
      ]) {
        const r = await fx.a.req('POST', '/api/v1/certificates', {
          token: fx.admin,
          body: { domain: 'broken.tidewater.example', certificate },
        })
        expect(r.status).toBe(400)
        expect(r.body).toMatchObject({ code: 400, data: { field: 'body.certificate' } })
        expect(r.body.message).toContain(reason)
      }
      expect(await count()).toBe(before)
    })

    test('a private key is checked against the certificate and never stored', async () => {
      const c = issue(['keyed.tidewater.example'], 90)
      const d = await register({ domain: 'keyed.tidewater.example', certificate: c.cert, privateKey: c.key })
      expect(d.hasPrivateKey).toBe(true)
      expect(JSON.stringify(d)).not.toContain('PRIVATE KEY')
      const before = await count()
      for (const [body, reason] of [
        [{ domain: 'k2.tidewater.example', certificate: c.cert, privateKey: otherKey() }, 'does not match'],
        [
          { domain: 'k3.tidewater.example', certificate: c.cert, privateKey: 'not a key' },
          'not a readable private key',
        ],
        [{ domain: 'k4.tidewater.example', privateKey: c.key }, 'needs body.certificate'],
      ] as const) {
        const r = await fx.a.req('POST', '/api/v1/certificates', { token: fx.admin, body })
        expect(r.status).toBe(400)
        expect(r.body).toMatchObject({ code: 400, data: { field: 'body.privateKey' } })
        expect(r.body.message).toContain(reason)
      }
      expect(await count()).toBe(before)
    })

    test('bad input answers 400 naming the field; a second entry for domain and port 409', async () => {
      const pem = issue(['dup.tidewater.example'], 90).cert
      const before = await count()
      const cases: Array<[unknown, string]> = [
        [{ certificate: pem }, 'body.domain'],
        [{ domain: '', certificate: pem }, 'body.domain'],
        [{ domain: 'has space.example', certificate: pem }, 'body.domain'],
        [{ domain: 'dup.tidewater.example', port: 0, certificate: pem }, 'body.port'],
        [{ domain: 'dup.tidewater.example', port: '443', certificate: pem }, 'body.port'],
        [{ domain: 'dup.tidewater.example', thresholdDays: 0, certificate: pem }, 'body.thresholdDays'],
        [{ domain: 'dup.tidewater.example', certificate: pem, colour: 'red' }, 'body.colour'],
        [{ domain: 'dup.tidewater.example', enabled: 'yes', certificate: pem }, 'body.enabled'],
      ]
      for (const [body, field] of cases) {
        const r = await fx.a.req('POST', '/api/v1/certificates', { token: fx.admin, body })
        expect([field, r.status]).toEqual([field, 400])
        expect(r.body.code).toBe(400)
        expect(r.body.message).toContain(field)
      }
      const array = await fx.a.req('POST', '/api/v1/certificates', { token: fx.admin, body: [pem] })
      expect(array.status).toBe(400)
      expect(await count()).toBe(before)
      await register({ domain: 'dup.tidewater.example', certificate: pem })
      const again = await fx.a.req('POST', '/api/v1/certificates', {
        token: fx.admin,
        body: { domain: 'dup.tidewater.example', certificate: pem },
      })
      expect(again.status).toBe(409)
      expect(again.body.message).toContain('dup.tidewater.example:443')
    })
  })

  describe('lists, stats, check-all', () => {
    test('check-all re-checks every enabled entry and answers the counts, which stats and expiring agree with', async () => {
      const s = await serve(issue(['localhost'], 400))
      const d = await register({ domain: 'localhost', address: '127.0.0.1', port: s.port })
      const off = await register({
        domain: 'localhost',
        address: '127.0.0.1',
        port: s.port + 1,
        enabled: false,
      })
      s.serve(issue(['localhost'], 8))
      const r = await fx.a.req('POST', '/api/v1/certificates/check-all', { token: fx.admin })
      expect(r.status).toBe(200)
      const all = (await fx.a.req('GET', '/api/v1/certificates', { token: fx.viewer })).body.data
      expect(r.body.data.checked).toBe(all.items.filter((c: { enabled: boolean }) => c.enabled).length)
      const probed = all.items.find((c: { id: string }) => c.id === d.id)
      expect(probed).toMatchObject({ status: 'expiring', daysLeft: 7 })
      expect(all.items.find((c: { id: string }) => c.id === off.id).lastChecked).toBe(off.lastChecked)

      const stats = (await fx.a.req('GET', '/api/v1/certificates/stats', { token: fx.viewer })).body.data
      expect(stats).toEqual(r.body.data.stats)
      for (const st of ['active', 'expiring', 'expired', 'unknown'])
        expect(stats[st]).toBe(all.items.filter((c: { status: string }) => c.status === st).length)
      expect(stats.total).toBe(all.total)

      const expiring = (await fx.a.req('GET', '/api/v1/certificates/expiring', { token: fx.viewer })).body
        .data
      expect(expiring.items.every((c: { status: string }) => c.status === 'expiring')).toBe(true)
      expect(expiring.total).toBe(stats.expiring)
      const ends = expiring.items.map((c: { validTo: string }) => Date.parse(c.validTo))
      expect(ends).toEqual([...ends].sort((x, y) => x - y))
      const week = (await fx.a.req('GET', '/api/v1/certificates/expiring?days=7', { token: fx.viewer })).body
        .data
      expect(week.items.every((c: { daysLeft: number }) => c.daysLeft >= 0 && c.daysLeft < 7)).toBe(true)
      expect(week.items.some((c: { domain: string }) => c.domain === 'soon.tidewater.example')).toBe(true)
      expect(
        (await fx.a.req('GET', '/api/v1/certificates/expiring?days=0', { token: fx.viewer })).status,
      ).toBe(400)

      const filtered = (await fx.a.req('GET', '/api/v1/certificates?status=expired', { token: fx.viewer }))
        .body.data
      expect(filtered.items.map((c: { domain: string }) => c.domain)).toEqual(['old.tidewater.example'])
      expect((await fx.a.req('GET', '/api/v1/certificates?status=dead', { token: fx.viewer })).status).toBe(
        400,
      )
    })

    test('the expiry gauge gives each domain its soonest expiry in seconds', async () => {
      const text = await fx.a.metrics.text()
      const line = text
        .split('\n')
        .find((l) => l.startsWith('svc_certificate_expiry_seconds{domain="old.tidewater.example"}'))
      expect(line).toBeDefined()
      const seconds = Number(line!.split(' ')[1])
      expect(Math.abs(seconds + 2 * 86_400)).toBeLessThan(120)
      expect(text).not.toContain('domain="broken.tidewater.example"')
    })

    test('delete removes the entry; unknown ids answer 404', async () => {
      const d = await register({
        domain: 'bye.tidewater.example',
        certificate: issue(['bye.tidewater.example'], 50).cert,
      })
      expect((await fx.a.req('DELETE', `/api/v1/certificates/${d.id}`, { token: fx.admin })).status).toBe(200)
      for (const [m, p] of [
        ['GET', `/api/v1/certificates/${d.id}`],
        ['DELETE', `/api/v1/certificates/${d.id}`],
        ['POST', `/api/v1/certificates/${d.id}/check`],
      ] as const) {
        const r = await fx.a.req(m, p, { token: fx.admin })
        expect(r.status).toBe(404)
        expect(r.body).toMatchObject({ code: 404, data: null })
      }
    })

    test('no token 401; a viewer reads but cannot register, check, check-all or delete (403); an operator can', async () => {
      const d = await register({
        domain: 'guard.tidewater.example',
        certificate: issue(['guard.tidewater.example'], 50).cert,
      })
      const body = { domain: 'guard2.tidewater.example', certificate: 'x' }
      for (const [m, p] of [
        ['POST', '/api/v1/certificates'],
        ['GET', '/api/v1/certificates'],
        ['GET', `/api/v1/certificates/${d.id}`],
        ['GET', '/api/v1/certificates/stats'],
        ['GET', '/api/v1/certificates/expiring'],
        ['POST', '/api/v1/certificates/check-all'],
      ] as const)
        expect((await fx.a.req(m, p, { body: m === 'POST' ? body : undefined })).status).toBe(401)
      for (const [m, p] of [
        ['POST', '/api/v1/certificates'],
        ['POST', '/api/v1/certificates/check-all'],
        ['POST', `/api/v1/certificates/${d.id}/check`],
        ['DELETE', `/api/v1/certificates/${d.id}`],
      ] as const) {
        const r = await fx.a.req(m, p, { token: fx.viewer, body: m === 'POST' ? body : undefined })
        expect(r.status).toBe(403)
        expect(r.body.code).toBe(403)
      }
      expect((await fx.a.req('GET', `/api/v1/certificates/${d.id}`, { token: fx.viewer })).status).toBe(200)
      const operator = await fx.a.token('operator')
      const own = await fx.a.req('POST', '/api/v1/certificates', {
        token: operator,
        body: { domain: 'ops.tidewater.example', certificate: issue(['ops.tidewater.example'], 70).cert },
      })
      expect(own.status).toBe(201)
      expect(
        (await fx.a.req('POST', `/api/v1/certificates/${own.body.data.id}/check`, { token: operator }))
          .status,
      ).toBe(200)
    })

    test('writes are audited with who, what and where to; never the private key', async () => {
      const c = issue(['audit.tidewater.example'], 90)
      const d = await register({ domain: 'audit.tidewater.example', certificate: c.cert, privateKey: c.key })
      await fx.a.req('POST', `/api/v1/certificates/${d.id}/check`, { token: fx.admin })
      await fx.a.req('DELETE', `/api/v1/certificates/${d.id}`, { token: fx.admin })
      const mine = audits.filter((e) => e.target === 'audit.tidewater.example:443')
      expect(mine.map((e) => e.action)).toEqual([
        'certificates.register',
        'certificates.check',
        'certificates.delete',
      ])
      expect(mine[0]).toMatchObject({
        actor_kind: 'user',
        actor_name: 'admin-user',
        ok: true,
        details: { id: d.id, hasPrivateKey: true },
      })
      expect(JSON.stringify(mine)).not.toContain('PRIVATE KEY')
      expect(audits.some((e) => e.action === 'certificates.check_all')).toBe(true)
    })

    test('/healthz reports the certificate counts without failing on an expired one', async () => {
      const r = await fx.a.req('GET', '/healthz')
      expect(r.status).toBe(200)
      const stats = (await fx.a.req('GET', '/api/v1/certificates/stats', { token: fx.viewer })).body.data
      expect(r.body.checks.certificates).toMatchObject({ status: 'up', ...stats })
      expect(stats.expired).toBeGreaterThan(0)
    })
  })
})
