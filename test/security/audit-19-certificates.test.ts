import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import type { AddressInfo } from 'node:net'
import tls from 'node:tls'
import type { Db } from '../../core/db'
import type { Logger } from '../../core/log'
import { certService } from '../../plugins/certificates/service'
import { MAX_ALERTS, MAX_CERTIFICATES, certStore } from '../../plugins/certificates/store'
import { issue } from '../../plugins/certificates/testing'
import { type TestApp, forEachEngine, loopbackOutbound, makeApp } from '../helpers'

/*
 * The nineteenth session's audit of the operations plugins, F3: certificates without a bound,
 * each list loading every row's PEM (up to 256 KB), and check-alls at once each probing every
 * target. The other findings are in audit-19-ops.test.ts.
 */

const quiet: Logger = {
  debug: () => undefined,
  info: () => undefined,
  warn: () => undefined,
  error: () => undefined,
  child: () => quiet,
}

/** Rows of `table` inserted in one statement per 100, named `<prefix><n>`: a store at a cap. */
async function fill(db: Db, table: 'certificates' | 'certificate_alerts', prefix: string, n: number) {
  const now = Date.now()
  for (let from = 0; from < n; from += 100) {
    const rows = Array.from({ length: Math.min(100, n - from) }, (_, i) => {
      const id = `${prefix}${from + i}`
      return table === 'certificates'
        ? `('${id}', '${id}.example', 443, 'manual', 30, 'unknown', ${now}, ${now})`
        : `('${id}', '${id}.example', 30, 1, ${now}, ${now})`
    })
    await db.run(
      table === 'certificates'
        ? `INSERT INTO certificates (id, domain, port, source, threshold_days, status, created_at, updated_at) VALUES ${rows.join(', ')}`
        : `INSERT INTO certificate_alerts (id, domain, threshold_days, active, created_at, updated_at) VALUES ${rows.join(', ')}`,
    )
  }
}

forEachEngine((engine) => {
  let a: TestApp
  let op: string
  /** A TLS server on loopback that counts the connections made to it. */
  let server: tls.Server
  let port = 0
  let connections = 0
  beforeAll(async () => {
    a = await makeApp(engine, {
      plugins: { audit: {}, certificates: { check_interval_s: 0, probe_timeout_ms: 2000 } },
    })
    op = await a.token('operator')
    const c = issue(['localhost'], 200)
    server = tls.createServer({ cert: c.chain, key: c.key }, (s) => s.end())
    server.on('connection', () => {
      connections++
    })
    server.on('tlsClientError', () => undefined)
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    port = (server.address() as AddressInfo).port
  })
  afterAll(async () => {
    await new Promise<void>((resolve) => server.close(() => resolve()))
    await a.stop()
  })
  const as = (method: string, path: string, body?: unknown) => a.req(method, path, { token: op, body })
  const count = async () => (await as('GET', '/api/v1/certificates')).body.data.total as number

  describe('F3: certificates are bounded, and lists read no PEM', () => {
    test('a 256 KB text that is no certificate is 400 naming body.certificate; nothing is stored', async () => {
      const before = await count()
      const r = await as('POST', '/api/v1/certificates', {
        domain: 'bloat.audit19.example',
        certificate: 'A'.repeat(262_000),
      })
      expect([r.status, r.body.data?.field]).toEqual([400, 'body.certificate'])
      expect(r.body.message).toContain('no PEM certificate block')
      expect(await count()).toBe(before)
      const stored = await a.db.get<{ n: number }>(
        'SELECT COUNT(*) AS n FROM certificates WHERE domain = ?',
        ['bloat.audit19.example'],
      )
      expect(Number(stored?.n)).toBe(0)
    })

    test('lists, expiring, alert evaluation and check-all read no PEM in their lists', async () => {
      for (const [domain, days] of [
        ['soon.audit19.example', 5],
        ['later.audit19.example', 300],
      ] as const)
        expect(
          (await as('POST', '/api/v1/certificates', { domain, certificate: issue([domain], days).chain }))
            .status,
        ).toBe(201)
      // Every list the store reads goes through db.all: none may carry a row's PEM.
      const all = a.db.all.bind(a.db)
      const withPem: string[] = []
      a.db.all = (async (sql: string, params?: unknown[]) => {
        const rows = await all(sql, params as never)
        if (rows.some((r) => r && typeof r === 'object' && 'pem' in r)) withPem.push(sql.slice(0, 60))
        return rows
      }) as Db['all']
      try {
        expect((await as('GET', '/api/v1/certificates')).status).toBe(200)
        const expiring = await as('GET', '/api/v1/certificates/expiring')
        expect(expiring.body.data.items.map((c: { domain: string }) => c.domain)).toEqual([
          'soon.audit19.example',
        ])
        expect((await as('GET', '/api/v1/certificates/expiring?days=30')).body.data.total).toBe(1)
        expect(
          (await as('POST', '/api/v1/certificates/alerts', { domain: 'soon.audit19.example' })).status,
        ).toBe(201)
        const checked = await as('POST', '/api/v1/certificates/check-all')
        expect(checked.body.data).toMatchObject({ checked: await count(), stats: { expiring: 1 } })
      } finally {
        a.db.all = all
      }
      expect(withPem).toEqual([])
      // One certificate read alone still answers its PEM.
      const one = (await as('GET', '/api/v1/certificates')).body.data.items[0]
      expect((await as('GET', `/api/v1/certificates/${one.id}`)).body.data.certificate).toContain(
        '-----BEGIN CERTIFICATE-----',
      )
    })

    test(`at most ${MAX_CERTIFICATES} certificates and ${MAX_ALERTS} alert rules: 409 for a new one past it`, async () => {
      try {
        await fill(a.db, 'certificates', 'fill-cert-', MAX_CERTIFICATES - (await count()))
        expect(await count()).toBe(MAX_CERTIFICATES)
        const pem = issue(['over.audit19.example'], 90).cert
        const over = await as('POST', '/api/v1/certificates', {
          domain: 'over.audit19.example',
          certificate: pem,
        })
        expect([over.status, over.body.message]).toEqual([
          409,
          `at most ${MAX_CERTIFICATES} certificates: delete one first`,
        ])
        // A probe registration is refused before it connects anywhere.
        const seen = connections
        const probe = await as('POST', '/api/v1/certificates', {
          domain: 'localhost',
          address: '127.0.0.1',
          port,
        })
        expect(probe.status).toBe(409)
        expect(connections).toBe(seen)
        expect(await count()).toBe(MAX_CERTIFICATES)
        expect((await as('DELETE', '/api/v1/certificates/fill-cert-0')).status).toBe(200)
        expect(
          (await as('POST', '/api/v1/certificates', { domain: 'over.audit19.example', certificate: pem }))
            .status,
        ).toBe(201)

        const rules = Number(
          (await a.db.get<{ n: number }>('SELECT COUNT(*) AS n FROM certificate_alerts'))?.n,
        )
        await fill(a.db, 'certificate_alerts', 'fill-rule-', MAX_ALERTS - rules)
        const rule = await as('POST', '/api/v1/certificates/alerts', { domain: 'over.audit19.example' })
        expect([rule.status, rule.body.message]).toEqual([
          409,
          `at most ${MAX_ALERTS} certificate alert rules: delete one first`,
        ])
      } finally {
        await a.db.run("DELETE FROM certificate_alerts WHERE id LIKE 'fill-rule-%'")
        await a.db.run(
          "DELETE FROM certificates WHERE id LIKE 'fill-cert-%' OR domain = 'over.audit19.example'",
        )
      }
    })

    test('check-all is single-flight: a second caller shares the run under way, one probe per target', async () => {
      const reg = await as('POST', '/api/v1/certificates', {
        domain: 'localhost',
        address: '127.0.0.1',
        port,
      })
      expect(reg.status).toBe(201)
      // The service as the plugin makes it, over the app's store.
      const svc = certService(certStore(a.db), a.bus, quiet, {
        timeoutMs: 2000,
        concurrency: 4,
        outbound: loopbackOutbound,
      })
      const before = connections
      const first = svc.checkAll()
      const second = svc.checkAll()
      expect(second).toBe(first)
      const [r1, r2] = await Promise.all([first, second])
      expect(r2).toBe(r1)
      expect(connections - before).toBe(1)
      // Once it ended, the next call runs again.
      await svc.checkAll()
      expect(connections - before).toBe(2)
      // Through the API, calls at once all answer.
      const answers = await Promise.all([1, 2, 3].map(() => as('POST', '/api/v1/certificates/check-all')))
      expect(answers.map((r) => r.status)).toEqual([200, 200, 200])
    })
  })
})
