import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import type { AuditEntry } from '../../core/events'
import { NO_ANSWER } from '../../core/outbound'
import { type TestApp, forEachEngine, makeApp } from '../../test/helpers'
import { type TlsServer, issue, otherKey, silentServer, tlsServer } from './testing'

const DAY_MS = 86_400_000
const days = (iso: string) => (Date.parse(iso) - Date.now()) / DAY_MS

forEachEngine((engine) => {
  let a: TestApp
  let admin: string
  let viewer: string
  const servers: TlsServer[] = []
  const audits: AuditEntry[] = []
  beforeAll(async () => {
    a = await makeApp(engine, {
      plugins: { certificates: { check_interval_s: 0, probe_timeout_ms: 1500, default_threshold_days: 21 } },
    })
    admin = await a.token('admin')
    viewer = await a.token('viewer')
    a.bus.on('audit', (e) => {
      audits.push(e)
    })
  })
  afterAll(async () => {
    await Promise.all(servers.map((s) => s.close()))
    await a.stop()
  })
  const serve = async (c: ReturnType<typeof issue>) => {
    const s = await tlsServer(c)
    servers.push(s)
    return s
  }
  const register = async (body: Record<string, unknown>, status = 201) => {
    const r = await a.req('POST', '/api/v1/certificates', { token: admin, body })
    expect(r.status).toBe(status)
    return r.body.data
  }
  const count = async () => (await a.req('GET', '/api/v1/certificates', { token: admin })).body.data.total

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
      const got = await a.req('GET', `/api/v1/certificates/${d.id}`, { token: viewer })
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

    test('a PEM that does not parse is kept as unknown with the parse error', async () => {
      const d = await register({
        domain: 'broken.tidewater.example',
        certificate: '-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydGlmaWNhdGU=\n-----END CERTIFICATE-----',
      })
      expect(d.status).toBe('unknown')
      expect(d.error).toContain('certificate does not parse')
      expect(d.validTo).toBeUndefined()
      const checked = await a.req('POST', `/api/v1/certificates/${d.id}/check`, { token: admin })
      expect(checked.body.data).toMatchObject({ status: 'unknown' })
      expect(checked.body.data.error).toContain('does not parse')
      const text = await register({ domain: 'text.tidewater.example', certificate: 'hello' })
      expect(text).toMatchObject({
        status: 'unknown',
        error: expect.stringContaining('no PEM certificate block'),
      })
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
        const r = await a.req('POST', '/api/v1/certificates', { token: admin, body })
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
        const r = await a.req('POST', '/api/v1/certificates', { token: admin, body })
        expect([field, r.status]).toEqual([field, 400])
        expect(r.body.code).toBe(400)
        expect(r.body.message).toContain(field)
      }
      const array = await a.req('POST', '/api/v1/certificates', { token: admin, body: [pem] })
      expect(array.status).toBe(400)
      expect(await count()).toBe(before)
      await register({ domain: 'dup.tidewater.example', certificate: pem })
      const again = await a.req('POST', '/api/v1/certificates', {
        token: admin,
        body: { domain: 'dup.tidewater.example', certificate: pem },
      })
      expect(again.status).toBe(409)
      expect(again.body.message).toContain('dup.tidewater.example:443')
    })
  })

  describe('probes', () => {
    test('registration without a PEM reads the certificate from the server', async () => {
      const s = await serve(issue(['localhost'], 12))
      const d = await register({ domain: '127.0.0.1', port: s.port })
      // Without an address the probe connects to the domain itself (an IP here: no SNI).
      expect(d).toMatchObject({ domain: '127.0.0.1', source: 'probe', status: 'expiring', chainLength: 1 })
      expect(d.address).toBeUndefined()
      expect(d.daysLeft).toBe(11)
      expect(d.certificate).toContain('-----BEGIN CERTIFICATE-----')
    })

    test('a probe that fails still registers: unknown with the reason, until a check succeeds', async () => {
      const s = await silentServer()
      const d = await register({ domain: 'localhost', address: '127.0.0.1', port: s.port })
      expect(d.status).toBe('unknown')
      expect(d.error).toBe(`127.0.0.1:${s.port}: ${NO_ANSWER}`)
      await s.close()
    })

    test('check reads a renewed certificate; when the server is gone the stored expiry still decides', async () => {
      const s = await serve(issue(['localhost'], 6))
      const d = await register({ domain: 'localhost', address: '127.0.0.1', port: s.port })
      expect(d.status).toBe('expiring')
      s.serve(issue(['localhost'], 300))
      const renewed = await a.req('POST', `/api/v1/certificates/${d.id}/check`, { token: admin })
      expect(renewed.status).toBe(200)
      expect(renewed.body.data).toMatchObject({ status: 'active', daysLeft: 299 })
      expect(renewed.body.data.error).toBeUndefined()
      expect(Date.parse(renewed.body.data.lastChecked)).toBeGreaterThan(Date.parse(d.lastChecked) - 1)
      await s.close()
      servers.splice(servers.indexOf(s), 1)
      const down = await a.req('POST', `/api/v1/certificates/${d.id}/check`, { token: admin })
      expect(down.body.data).toMatchObject({ status: 'active', daysLeft: 299 })
      expect(down.body.data.error).toContain(NO_ANSWER)
    })

    test('domain-info shows subject, issuer, SANs, validity and chain of valid, expiring, expired, self-signed and wrong-host servers', async () => {
      const valid = await serve(issue(['localhost', 'api.localhost'], 100))
      const r = await a.req(
        'GET',
        `/api/v1/certificates/domain-info?domain=localhost&address=127.0.0.1&port=${valid.port}`,
        {
          token: admin,
        },
      )
      expect(r.status).toBe(200)
      expect(r.body.data).toMatchObject({
        domain: 'localhost',
        port: valid.port,
        subject: 'CN=localhost, O=Liveops Test',
        issuer: 'CN=Liveops Test Root CA, O=Liveops Test',
        sans: ['localhost', 'api.localhost'],
        daysLeft: 99,
        selfSigned: false,
        hostnameMatches: true,
        // the test CA is in no trust store
        authorized: false,
        chain: [{ subject: 'CN=Liveops Test Root CA, O=Liveops Test' }],
      })
      expect(r.body.data.protocol).toMatch(/^TLSv1\.[23]$/)

      const expired = await serve(issue(['localhost'], -1, { fromDays: -60 }))
      const e = await a.req(
        'GET',
        `/api/v1/certificates/domain-info?domain=localhost&address=127.0.0.1&port=${expired.port}`,
        {
          token: admin,
        },
      )
      expect(e.body.data.daysLeft).toBe(-1)
      expect(e.body.data.authorizationError).toBeString()

      const self = await serve(issue(['localhost'], 30, { selfSigned: true }))
      const ss = await a.req(
        'GET',
        `/api/v1/certificates/domain-info?domain=localhost&address=127.0.0.1&port=${self.port}`,
        {
          token: admin,
        },
      )
      expect(ss.body.data).toMatchObject({
        selfSigned: true,
        chain: [],
        authorizationError: 'DEPTH_ZERO_SELF_SIGNED_CERT',
      })

      const wrong = await a.req(
        'GET',
        `/api/v1/certificates/domain-info?domain=billing.tidewater.example&address=127.0.0.1&port=${valid.port}`,
        { token: admin },
      )
      expect(wrong.body.data).toMatchObject({ hostnameMatches: false, commonName: 'localhost' })
    })

    test('domain-info answers 422 alike when nothing listens and past the timeout, 400 without a domain', async () => {
      const gone = await serve(issue(['localhost'], 10))
      const port = gone.port
      await gone.close()
      servers.splice(servers.indexOf(gone), 1)
      const refused = await a.req(
        'GET',
        `/api/v1/certificates/domain-info?domain=localhost&address=127.0.0.1&port=${port}`,
        {
          token: admin,
        },
      )
      expect(refused.status).toBe(422)
      expect(refused.body.code).toBe(422)
      // One answer whether the port refused or stayed silent: no port scanner (issue 34 point 5).
      expect(refused.body.message).toBe(`127.0.0.1:${port}: ${NO_ANSWER}`)
      const s = await silentServer()
      // A silent port answers the same 422 once the connect timeout passes (the test's limit
      // catches a hang).
      const slow = await a.req(
        'GET',
        `/api/v1/certificates/domain-info?domain=localhost&address=127.0.0.1&port=${s.port}`,
        {
          token: admin,
        },
      )
      expect(slow.status).toBe(422)
      expect(slow.body.message).toBe(`127.0.0.1:${s.port}: ${NO_ANSWER}`)
      await s.close()
      const bad = await a.req('GET', '/api/v1/certificates/domain-info', { token: admin })
      expect(bad.status).toBe(400)
      expect(bad.body.message).toContain('domain')
      const port0 = await a.req(
        'GET',
        '/api/v1/certificates/domain-info?domain=localhost&address=127.0.0.1&port=70000',
        {
          token: admin,
        },
      )
      expect(port0.status).toBe(400)
      expect(port0.body.message).toContain('port')
      expect((await a.req('GET', '/api/v1/certificates/domain-info?domain=localhost')).status).toBe(401)
      // It makes the server connect where the caller says: only those who may register use it.
      const viewer403 = await a.req(
        'GET',
        `/api/v1/certificates/domain-info?domain=localhost&address=127.0.0.1&port=${port}`,
        {
          token: viewer,
        },
      )
      expect(viewer403.status).toBe(403)
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
      const r = await a.req('POST', '/api/v1/certificates/check-all', { token: admin })
      expect(r.status).toBe(200)
      const all = (await a.req('GET', '/api/v1/certificates', { token: viewer })).body.data
      expect(r.body.data.checked).toBe(all.items.filter((c: { enabled: boolean }) => c.enabled).length)
      const probed = all.items.find((c: { id: string }) => c.id === d.id)
      expect(probed).toMatchObject({ status: 'expiring', daysLeft: 7 })
      expect(all.items.find((c: { id: string }) => c.id === off.id).lastChecked).toBe(off.lastChecked)

      const stats = (await a.req('GET', '/api/v1/certificates/stats', { token: viewer })).body.data
      expect(stats).toEqual(r.body.data.stats)
      for (const st of ['active', 'expiring', 'expired', 'unknown'])
        expect(stats[st]).toBe(all.items.filter((c: { status: string }) => c.status === st).length)
      expect(stats.total).toBe(all.total)

      const expiring = (await a.req('GET', '/api/v1/certificates/expiring', { token: viewer })).body.data
      expect(expiring.items.every((c: { status: string }) => c.status === 'expiring')).toBe(true)
      expect(expiring.total).toBe(stats.expiring)
      const ends = expiring.items.map((c: { validTo: string }) => Date.parse(c.validTo))
      expect(ends).toEqual([...ends].sort((x, y) => x - y))
      const week = (await a.req('GET', '/api/v1/certificates/expiring?days=7', { token: viewer })).body.data
      expect(week.items.every((c: { daysLeft: number }) => c.daysLeft >= 0 && c.daysLeft < 7)).toBe(true)
      expect(week.items.some((c: { domain: string }) => c.domain === 'soon.tidewater.example')).toBe(true)
      expect((await a.req('GET', '/api/v1/certificates/expiring?days=0', { token: viewer })).status).toBe(400)

      const filtered = (await a.req('GET', '/api/v1/certificates?status=expired', { token: viewer })).body
        .data
      expect(filtered.items.map((c: { domain: string }) => c.domain)).toEqual(['old.tidewater.example'])
      expect((await a.req('GET', '/api/v1/certificates?status=dead', { token: viewer })).status).toBe(400)
    })

    test('the expiry gauge gives each domain its soonest expiry in seconds', async () => {
      const text = await a.metrics.text()
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
      expect((await a.req('DELETE', `/api/v1/certificates/${d.id}`, { token: admin })).status).toBe(200)
      for (const [m, p] of [
        ['GET', `/api/v1/certificates/${d.id}`],
        ['DELETE', `/api/v1/certificates/${d.id}`],
        ['POST', `/api/v1/certificates/${d.id}/check`],
      ] as const) {
        const r = await a.req(m, p, { token: admin })
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
        expect((await a.req(m, p, { body: m === 'POST' ? body : undefined })).status).toBe(401)
      for (const [m, p] of [
        ['POST', '/api/v1/certificates'],
        ['POST', '/api/v1/certificates/check-all'],
        ['POST', `/api/v1/certificates/${d.id}/check`],
        ['DELETE', `/api/v1/certificates/${d.id}`],
      ] as const) {
        const r = await a.req(m, p, { token: viewer, body: m === 'POST' ? body : undefined })
        expect(r.status).toBe(403)
        expect(r.body.code).toBe(403)
      }
      expect((await a.req('GET', `/api/v1/certificates/${d.id}`, { token: viewer })).status).toBe(200)
      const operator = await a.token('operator')
      const own = await a.req('POST', '/api/v1/certificates', {
        token: operator,
        body: { domain: 'ops.tidewater.example', certificate: issue(['ops.tidewater.example'], 70).cert },
      })
      expect(own.status).toBe(201)
      expect(
        (await a.req('POST', `/api/v1/certificates/${own.body.data.id}/check`, { token: operator })).status,
      ).toBe(200)
    })

    test('writes are audited with who, what and where to; never the private key', async () => {
      const c = issue(['audit.tidewater.example'], 90)
      const d = await register({ domain: 'audit.tidewater.example', certificate: c.cert, privateKey: c.key })
      await a.req('POST', `/api/v1/certificates/${d.id}/check`, { token: admin })
      await a.req('DELETE', `/api/v1/certificates/${d.id}`, { token: admin })
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
      const r = await a.req('GET', '/healthz')
      expect(r.status).toBe(200)
      const stats = (await a.req('GET', '/api/v1/certificates/stats', { token: viewer })).body.data
      expect(r.body.checks.certificates).toMatchObject({ status: 'up', ...stats })
      expect(stats.expired).toBeGreaterThan(0)
    })
  })
})
