import { describe, expect, test } from 'bun:test'
import { NO_ANSWER } from '../../core/outbound'
import { forEachEngine } from '../../test/helpers'
import { certificatesSuite } from './certificates-fixture'
import { issue, silentServer } from './testing'

// Registration and domain-info read from TLS servers: probes (certificates-fixture.ts).
forEachEngine((engine) => {
  const fx = certificatesSuite(engine)
  const { serve, register, servers } = fx

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
      const renewed = await fx.a.req('POST', `/api/v1/certificates/${d.id}/check`, { token: fx.admin })
      expect(renewed.status).toBe(200)
      expect(renewed.body.data).toMatchObject({ status: 'active', daysLeft: 299 })
      expect(renewed.body.data.error).toBeUndefined()
      expect(Date.parse(renewed.body.data.lastChecked)).toBeGreaterThan(Date.parse(d.lastChecked) - 1)
      await s.close()
      servers.splice(servers.indexOf(s), 1)
      const down = await fx.a.req('POST', `/api/v1/certificates/${d.id}/check`, { token: fx.admin })
      expect(down.body.data).toMatchObject({ status: 'active', daysLeft: 299 })
      expect(down.body.data.error).toContain(NO_ANSWER)
    })

    test('domain-info shows subject, issuer, SANs, validity and chain of valid, expiring, expired, self-signed and wrong-host servers', async () => {
      const valid = await serve(issue(['localhost', 'api.localhost'], 100))
      const r = await fx.a.req(
        'GET',
        `/api/v1/certificates/domain-info?domain=localhost&address=127.0.0.1&port=${valid.port}`,
        {
          token: fx.admin,
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
      const e = await fx.a.req(
        'GET',
        `/api/v1/certificates/domain-info?domain=localhost&address=127.0.0.1&port=${expired.port}`,
        {
          token: fx.admin,
        },
      )
      expect(e.body.data.daysLeft).toBe(-1)
      expect(e.body.data.authorizationError).toBeString()

      const self = await serve(issue(['localhost'], 30, { selfSigned: true }))
      const ss = await fx.a.req(
        'GET',
        `/api/v1/certificates/domain-info?domain=localhost&address=127.0.0.1&port=${self.port}`,
        {
          token: fx.admin,
        },
      )
      expect(ss.body.data).toMatchObject({
        selfSigned: true,
        chain: [],
        authorizationError: 'DEPTH_ZERO_SELF_SIGNED_CERT',
      })

      const wrong = await fx.a.req(
        'GET',
        `/api/v1/certificates/domain-info?domain=billing.tidewater.example&address=127.0.0.1&port=${valid.port}`,
        { token: fx.admin },
      )
      expect(wrong.body.data).toMatchObject({ hostnameMatches: false, commonName: 'localhost' })
    })

    test('domain-info answers 422 alike when nothing listens and past the timeout, 400 without a domain', async () => {
      const gone = await serve(issue(['localhost'], 10))
      const port = gone.port
      await gone.close()
      servers.splice(servers.indexOf(gone), 1)
      const refused = await fx.a.req(
        'GET',
        `/api/v1/certificates/domain-info?domain=localhost&address=127.0.0.1&port=${port}`,
        {
          token: fx.admin,
        },
      )
      expect(refused.status).toBe(422)
      expect(refused.body.code).toBe(422)
      // One answer whether the port refused or stayed silent: no port scanner (issue 34 point 5).
      expect(refused.body.message).toBe(`127.0.0.1:${port}: ${NO_ANSWER}`)
      const s = await silentServer()
      // A silent port answers the same 422 once the connect timeout passes (the test's limit
      // catches a hang).
      const slow = await fx.a.req(
        'GET',
        `/api/v1/certificates/domain-info?domain=localhost&address=127.0.0.1&port=${s.port}`,
        {
          token: fx.admin,
        },
      )
      expect(slow.status).toBe(422)
      expect(slow.body.message).toBe(`127.0.0.1:${s.port}: ${NO_ANSWER}`)
      await s.close()
      const bad = await fx.a.req('GET', '/api/v1/certificates/domain-info', { token: fx.admin })
      expect(bad.status).toBe(400)
      expect(bad.body.message).toContain('domain')
      const port0 = await fx.a.req(
        'GET',
        '/api/v1/certificates/domain-info?domain=localhost&address=127.0.0.1&port=70000',
        {
          token: fx.admin,
        },
      )
      expect(port0.status).toBe(400)
      expect(port0.body.message).toContain('port')
      expect((await fx.a.req('GET', '/api/v1/certificates/domain-info?domain=localhost')).status).toBe(401)
      // It makes the server connect where the caller says: only those who may register use it.
      const viewer403 = await fx.a.req(
        'GET',
        `/api/v1/certificates/domain-info?domain=localhost&address=127.0.0.1&port=${port}`,
        {
          token: fx.viewer,
        },
      )
      expect(viewer403.status).toBe(403)
    })
  })
})
