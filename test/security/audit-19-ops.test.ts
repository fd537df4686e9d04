import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { existsSync, readdirSync } from 'node:fs'
import { join } from 'node:path'
import type { Logger } from '../../core/log'
import { auditView } from '../../core/secrets'
import { backupRunner } from '../../plugins/backups/runner'
import { backupStore } from '../../plugins/backups/store'
import { CertificateCreate } from '../../plugins/certificates/schema'
import { issue, otherKey } from '../../plugins/certificates/testing'
import { type TestApp, forEachEngine, makeApp, until } from '../helpers'

/*
 * The nineteenth session's audit of the operations plugins (certificates, backups, site, audit):
 * F1 the private key of a refused registration in the audit log, F2 a burst of backups on
 * PostgreSQL and MariaDB, and the two minor findings (site.clear's empty entry, domain-info's
 * 422 quoting the caller's address). F3 is in audit-19-certificates.test.ts.
 */

/** A PEM text's body lines: what a copy of the key would carry whatever masked its frame. */
const bodyLines = (pem: string) => pem.split('\n').filter((l) => l && !l.startsWith('-----'))

forEachEngine((engine) => {
  let a: TestApp
  let op: string
  beforeAll(async () => {
    a = await makeApp(engine, {
      plugins: {
        notify: {},
        site: {},
        audit: {},
        certificates: { check_interval_s: 0 },
        backups: { schedule_interval_s: 0 },
      },
    })
    op = await a.token('operator')
  })
  afterAll(() => a.stop())
  const as = (method: string, path: string, body?: unknown) => a.req(method, path, { token: op, body })
  const audits = async (action: string) =>
    (await as('GET', `/api/v1/audit?size=500&action=${action}`)).body.data.items as Array<{
      ok: boolean
      details?: Record<string, unknown>
    }>

  describe('F1: a refused certificate registration keeps no private key', () => {
    test('409 (already registered) and 400 (key of another certificate) leave no key text in any audit entry', async () => {
      const c = issue(['keys.audit19.example'], 90)
      const wrong = otherKey()
      const body = { domain: 'keys.audit19.example', certificate: c.cert, privateKey: c.key }
      expect((await as('POST', '/api/v1/certificates', body)).status).toBe(201)
      expect((await as('POST', '/api/v1/certificates', body)).status).toBe(409)
      const mismatch = await as('POST', '/api/v1/certificates', { ...body, port: 8443, privateKey: wrong })
      expect([mismatch.status, mismatch.body.data?.field]).toEqual([400, 'body.privateKey'])
      await until(async () => (await audits('certificates.register')).length >= 3)
      const entries = await audits('certificates.register')
      expect(entries.filter((e) => !e.ok).length).toBe(2)
      const text = JSON.stringify((await as('GET', '/api/v1/audit?size=500')).body.data)
      const leaked = [...bodyLines(c.key), ...bodyLines(wrong)].filter((l) => text.includes(l))
      expect(leaked).toEqual([])
      expect(text).not.toContain('PRIVATE KEY')
    })

    test("the registration schema marks privateKey secret: a refused body's audit view masks it", () => {
      const c = issue(['schema.audit19.example'], 90)
      const shown = auditView(CertificateCreate, {
        domain: 'schema.audit19.example',
        certificate: c.cert,
        privateKey: c.key,
      })
      const key = (shown as { privateKey: string }).privateKey
      expect(key).toMatch(/^set/)
      expect(bodyLines(c.key).some((l) => JSON.stringify(shown).includes(l))).toBe(false)
    })

    test('the audit names catch privateKey, private_key and apiKey forms, not ids beside them', async () => {
      const secret = 'MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQ'
      await a.bus.emit('audit', {
        actor_kind: 'user',
        actor_name: 'ops',
        action: 'names.audit19',
        target: 'x',
        details: {
          privateKey: secret,
          private_key: secret,
          tlsPrivateKey: secret,
          'x-api-key': secret,
          apiKey: secret,
          nested: { sshPrivateKey: secret },
          apiKeyId: 'key-17',
          keyId: 'k-1',
          monkey: 'banana',
        },
      })
      await until(async () => (await audits('names.audit19')).length === 1)
      const [e] = await audits('names.audit19')
      expect(e.details).toEqual({
        privateKey: 'set',
        private_key: 'set',
        tlsPrivateKey: 'set',
        'x-api-key': 'set',
        apiKey: 'set',
        nested: { sshPrivateKey: 'set' },
        apiKeyId: 'key-17',
        keyId: 'k-1',
        monkey: 'banana',
      })
    })
  })

  describe('F2: one backup at a time, on every engine', () => {
    test('10 POST /api/v1/backups at once: exactly one 202, nine 409', async () => {
      const answers = await Promise.all(
        Array.from({ length: 10 }, (_, i) => as('POST', '/api/v1/backups', { name: `burst-${i}` })),
      )
      const codes = answers.map((r) => r.status).sort()
      expect(codes).toEqual([202, ...Array(9).fill(409)])
      const made = answers.find((r) => r.status === 202)!.body.data.id
      const done = await until(async () => {
        const r = await as('GET', `/api/v1/backups/${made}`)
        return ['succeeded', 'failed'].includes(r.body.data.status) ? r.body.data : undefined
      }, 15_000)
      expect(done.status).toBe('succeeded')
      expect((await as('GET', '/api/v1/backups')).body.data.total).toBe(1)
    }, 20_000)

    test('free space is checked again when the backup starts: one that no longer fits fails naming it, no file left', async () => {
      // The runner over the app's store, as the plugin makes it; its queue is this test's alone.
      const dir = join(a.dataDir, 'backups-recheck')
      const store = backupStore(a.db, 'recheck-instance')
      const failures: unknown[] = []
      const log: Logger = {
        debug: () => undefined,
        info: () => undefined,
        warn: () => undefined,
        error: (msg, fields) => void failures.push({ msg, ...fields }),
        child: () => log,
      }
      const runner = backupRunner(a.db, store, log, {
        dir,
        pgDump: 'pg_dump',
        mysqlDump: '',
        keepLast: 0,
        keepDays: 0,
      })
      const row = await store.claim(3_600_000, {
        name: 'late',
        type: 'full',
        driver: runner.driver,
        trigger: 'api',
      })
      expect(row).toBeDefined()
      // Between the request's check and the start the store grew: the newest backup a petabyte.
      const big = 'recheck-petabyte-backup'
      await a.db.run(
        `INSERT INTO backups (id, name, type, driver, trigger, status, size, created_at, instance_id)
         VALUES (?, 'big', 'full', ?, 'api', 'succeeded', ?, ?, 'recheck-instance')`,
        [big, runner.driver, 1e15, Date.now() + 1000],
      )
      await runner.enqueue(row!)
      const after = await store.get(row!.id)
      expect(after.status).toBe('failed')
      expect(after.error).toMatch(/^\d+ MB free where backups go; a backup needs \d+ MB/)
      expect(existsSync(dir) ? readdirSync(dir) : []).toEqual([])
      expect(failures).toEqual([expect.objectContaining({ msg: 'backup failed', error: after.error })])
      await a.db.run('DELETE FROM backups WHERE id IN (?, ?)', [big, row!.id])
    })
  })

  describe('minor findings', () => {
    test('DELETE /api/v1/site/{key} records site.clear with the key and the before value masked', async () => {
      const secret = 'clear-me-smtp-password-4821'
      expect((await as('PUT', '/api/v1/site/notification.smtpPassword', { value: secret })).status).toBe(200)
      expect((await as('DELETE', '/api/v1/site/notification.smtpPassword')).status).toBe(200)
      await until(async () => (await audits('site.clear')).length === 1)
      const [e] = await audits('site.clear')
      expect(e.details).toEqual({ key: 'notification.smtpPassword', before: 'set:4821', after: '' })
      expect(JSON.stringify(await audits('site'))).not.toContain(secret)
    })

    test("domain-info's 422 quotes the caller's address: no line break of theirs in the message", async () => {
      const r = await as(
        'GET',
        '/api/v1/certificates/domain-info?domain=localhost&port=9&address=127.0.0.1%0aX-Injected:%201',
      )
      expect(r.status).toBe(422)
      expect(r.body.message).not.toContain('\n')
      expect(r.body.message).toContain('"127.0.0.1\\nX-Injected: 1":9')
    })
  })
})
