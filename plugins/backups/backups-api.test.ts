import { describe, expect, test } from 'bun:test'
import { existsSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import type { AuditEntry } from '../../core/events'
import { forEachEngine } from '../../test/helpers'
import { backup, backupsSuite, download, sha256 } from './backups-fixture'

// Making, reading, downloading and deleting backups through the API (backups-fixture.ts).
forEachEngine((engine) => {
  const fx = backupsSuite(engine)

  describe('backups', () => {
    test('a backup runs in the background to succeeded, with the file, its size and sha256 recorded', async () => {
      const b = await backup(fx.a, fx.admin)
      expect(b).toMatchObject({
        name: 'nightly drill',
        type: 'full',
        driver: engine,
        trigger: 'api',
        status: 'succeeded',
      })
      expect(b.checksum).toMatch(/^[0-9a-f]{64}$/)
      const file = join(fx.a.dataDir, 'backups', b.location)
      const bytes = readFileSync(file)
      expect(bytes.length).toBe(b.size)
      expect(sha256(bytes)).toBe(b.checksum)
      expect(Date.parse(b.completedAt)).toBeGreaterThanOrEqual(Date.parse(b.startedAt))
      expect(readdirSync(join(fx.a.dataDir, 'backups')).filter((f) => f.endsWith('.partial'))).toEqual([])
      const { res, bytes: got } = await download(fx.a, fx.admin, b.id)
      expect(res.status).toBe(200)
      expect(sha256(got)).toBe(b.checksum)
      expect(res.headers.get('x-checksum-sha256')).toBe(b.checksum)
      expect(res.headers.get('content-disposition')).toMatch(
        /^attachment; filename="liveops-nightly_drill-\d{8}T\d{6}Z\.sql(ite)?"$/,
      )
      const list = await fx.a.req('GET', '/api/v1/backups', { token: fx.admin })
      expect(list.body.data.items[0].id).toBe(b.id)
    })

    test('bad input answers 400 naming the field and starts nothing; another engine is refused clearly', async () => {
      const before = (await fx.a.req('GET', '/api/v1/backups', { token: fx.admin })).body.data.total
      const other = engine === 'mysql' ? 'postgres' : 'mysql'
      const cases: Array<[unknown, string]> = [
        [{ driver: other }, 'body.driver'],
        [{ driver: engine === 'sqlite' ? 'postgres' : 'sqlite' }, 'body.driver'],
        [{ driver: 'oracle' }, 'body.driver'],
        [{ type: 'incremental' }, 'body.type'],
        [{ name: '' }, 'body.name'],
        [{ name: '../../etc/passwd' }, 'body.name'],
        [{ name: 42 }, 'body.name'],
        [{ name: 'x', compress: true }, 'body.compress'],
      ]
      for (const [body, field] of cases) {
        const r = await fx.a.req('POST', '/api/v1/backups', { token: fx.admin, body })
        expect([field, r.status]).toEqual([field, 400])
        expect(r.body.code).toBe(400)
        expect(r.body.message).toContain(field)
      }
      const wrong = await fx.a.req('POST', '/api/v1/backups', { token: fx.admin, body: { driver: other } })
      expect(wrong.body.message).toContain(`'${other}' is not this server's store, which is ${engine}`)
      expect((await fx.a.req('GET', '/api/v1/backups?status=done', { token: fx.admin })).status).toBe(400)
      expect((await fx.a.req('GET', '/api/v1/backups', { token: fx.admin })).body.data.total).toBe(before)
    })

    test("one at a time: while one is unfinished another is 409 and nothing is made; another instance's stale one holds it an hour at most", async () => {
      const list = async () => (await fx.a.req('GET', '/api/v1/backups', { token: fx.admin })).body.data.total
      const unfinished = async (instance: string, createdAt: number) => {
        const id = `0000000000000000000000000${createdAt % 10_000_000}`
        await fx.a.db.run(
          `INSERT INTO backups (id, name, type, driver, trigger, status, created_at, instance_id)
           VALUES (?, 'held', 'full', ?, 'api', 'running', ?, ?)`,
          [id, engine, createdAt, instance],
        )
        return id
      }
      const mine = (await fx.a.db.get<{ i: string }>('SELECT instance_id AS i FROM backups LIMIT 1'))!.i
      const held = await unfinished(mine, Date.now() - 5 * 3_600_000)
      const before = await list()
      const refused = await fx.a.req('POST', '/api/v1/backups', { token: fx.admin, body: { name: 'again' } })
      expect([refused.status, refused.body.message]).toEqual([
        409,
        'a backup is already pending or running: ask again once it finished',
      ])
      expect(await list()).toBe(before)
      await fx.a.db.run("UPDATE backups SET status = 'failed' WHERE id = ?", [held])
      // Another instance's: within the hour it holds the API back, older it does not.
      const recent = await unfinished('another-instance', Date.now() - 60_000)
      expect((await fx.a.req('POST', '/api/v1/backups', { token: fx.admin, body: {} })).status).toBe(409)
      await fx.a.db.run('UPDATE backups SET created_at = ? WHERE id = ?', [
        Date.now() - 2 * 3_600_000,
        recent,
      ])
      expect((await backup(fx.a, fx.admin)).status).toBe('succeeded')
      await fx.a.db.run('DELETE FROM backups WHERE id IN (?, ?)', [held, recent])
    })

    test('a backup that would not fit is refused with 507 naming the free space; nothing is made', async () => {
      const last = (await fx.a.req('GET', '/api/v1/backups?status=succeeded', { token: fx.admin })).body.data
        .items[0]
      expect(last).toBeDefined()
      // The newest backup said to be a petabyte: the next needs twice that free.
      await fx.a.db.run('UPDATE backups SET size = ? WHERE id = ?', [1e15, last.id])
      const before = (await fx.a.req('GET', '/api/v1/backups', { token: fx.admin })).body.data.total
      const r = await fx.a.req('POST', '/api/v1/backups', { token: fx.admin, body: {} })
      expect([r.status, r.body.message]).toEqual([
        507,
        expect.stringMatching(/^\d+ MB free where backups go; a backup needs \d+ MB/),
      ])
      expect((await fx.a.req('GET', '/api/v1/backups', { token: fx.admin })).body.data.total).toBe(before)
      await fx.a.db.run('UPDATE backups SET size = ? WHERE id = ?', [last.size, last.id])
    })

    test('no token 401; viewers and analysts neither read nor make backups (403); an operator does', async () => {
      const b = (await fx.a.req('GET', '/api/v1/backups?status=succeeded', { token: fx.admin })).body.data
        .items[0]
      for (const [m, p] of [
        ['POST', '/api/v1/backups'],
        ['GET', '/api/v1/backups'],
        ['GET', `/api/v1/backups/${b.id}/download`],
        ['DELETE', `/api/v1/backups/${b.id}`],
      ] as const) {
        expect((await fx.a.req(m, p, { body: m === 'POST' ? {} : undefined })).status).toBe(401)
        for (const role of ['viewer', 'analyst'])
          expect(
            (await fx.a.req(m, p, { token: await fx.a.token(role), body: m === 'POST' ? {} : undefined }))
              .status,
          ).toBe(403)
      }
      const operator = await fx.a.token('operator')
      expect((await fx.a.req('GET', '/api/v1/backups', { token: operator })).status).toBe(200)
      const own = await backup(fx.a, operator, { name: 'operator copy' })
      expect(own.status).toBe('succeeded')
      // Operators run backups but do not take the file away: it holds the secrets the API masks.
      const refused = await fx.a.req('GET', `/api/v1/backups/${own.id}/download`, { token: operator })
      expect(refused.status).toBe(403)
      expect(refused.body.message).toContain('admin role')
      expect((await download(fx.a, fx.admin, own.id)).res.status).toBe(200)
    }, 20_000)

    test('download refuses what it cannot vouch for: failed (409), missing file (410), changed file (500); unknown ids 404', async () => {
      const b = await backup(fx.a, fx.admin, { name: 'tamper' })
      const file = join(fx.a.dataDir, 'backups', b.location)
      const original = readFileSync(file)
      const changed = Buffer.from(original)
      changed[changed.length - 1] ^= 0xff
      writeFileSync(file, changed)
      const bad = await fx.a.req('GET', `/api/v1/backups/${b.id}/download`, { token: fx.admin })
      expect(bad.status).toBe(500)
      expect(bad.body.message).toContain('does not match its record')
      rmSync(file)
      expect((await fx.a.req('GET', `/api/v1/backups/${b.id}/download`, { token: fx.admin })).status).toBe(
        410,
      )
      for (const [m, p] of [
        ['GET', '/api/v1/backups/nope'],
        ['GET', '/api/v1/backups/nope/download'],
        ['DELETE', '/api/v1/backups/nope'],
      ] as const) {
        const r = await fx.a.req(m, p, { token: fx.admin })
        expect(r.status).toBe(404)
        expect(r.body).toMatchObject({ code: 404, data: null })
      }
    })

    test('delete removes the record and its file; making, downloading and deleting are audited', async () => {
      const heard: AuditEntry[] = []
      const off = fx.a.bus.on('audit', (e) => {
        heard.push(e)
      })
      const b = await backup(fx.a, fx.admin, { name: 'short-lived' })
      expect((await download(fx.a, fx.admin, b.id)).res.status).toBe(200)
      const file = join(fx.a.dataDir, 'backups', b.location)
      expect(existsSync(file)).toBe(true)
      expect((await fx.a.req('DELETE', `/api/v1/backups/${b.id}`, { token: fx.admin })).status).toBe(200)
      expect(existsSync(file)).toBe(false)
      expect((await fx.a.req('GET', `/api/v1/backups/${b.id}`, { token: fx.admin })).status).toBe(404)
      off()
      expect(heard.filter((e) => e.target === b.id).map((e) => e.action)).toEqual([
        'backups.create',
        'backups.download',
        'backups.delete',
      ])
      expect(heard[0]).toMatchObject({
        actor_kind: 'user',
        actor_name: 'admin-user',
        details: { name: 'short-lived' },
      })
    })
  })
})
