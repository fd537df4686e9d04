import { afterAll, beforeAll, expect } from 'bun:test'
import type { AuditEntry } from '../../core/events'
import { type Engine, type TestApp, makeApp } from '../../test/helpers'
import { type TlsServer, type issue, tlsServer } from './testing'

/**
 * The certificates plugin's route tests: the certificates-*.test.ts files beside this one
 * (pem-lists: registration from a PEM, then lists, stats and check-all over what it registered;
 * probes: registration and domain-info read from TLS servers).
 *
 * The app of the calling file's suite on `engine` (no periodic check, a 21-day threshold),
 * started once: `fx.a`, `fx.admin` and `fx.viewer` once it began; `fx.audits` collects its audit
 * events. `serve` starts a TLS server with a certificate (closed with the app), `register` posts
 * one as admin and expects `status`, `count` is how many are registered.
 */
export function certificatesSuite(engine: Engine) {
  const servers: TlsServer[] = []
  const audits: AuditEntry[] = []
  const fx = { a: undefined as unknown as TestApp, admin: '', viewer: '', servers, audits }
  beforeAll(async () => {
    fx.a = await makeApp(engine, {
      plugins: { certificates: { check_interval_s: 0, probe_timeout_ms: 1500, default_threshold_days: 21 } },
    })
    fx.admin = await fx.a.token('admin')
    fx.viewer = await fx.a.token('viewer')
    fx.a.bus.on('audit', (e) => {
      audits.push(e)
    })
  })
  afterAll(async () => {
    await Promise.all(servers.map((s) => s.close()))
    await fx.a.stop()
  })
  const serve = async (c: ReturnType<typeof issue>) => {
    const s = await tlsServer(c)
    servers.push(s)
    return s
  }
  const register = async (body: Record<string, unknown>, status = 201) => {
    const r = await fx.a.req('POST', '/api/v1/certificates', { token: fx.admin, body })
    expect(r.status).toBe(status)
    return r.body.data
  }
  const count = async () =>
    (await fx.a.req('GET', '/api/v1/certificates', { token: fx.admin })).body.data.total
  return Object.assign(fx, { serve, register, count })
}
