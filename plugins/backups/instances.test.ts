import { afterAll, beforeAll, expect, test } from 'bun:test'
import { existsSync, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { forEachEngine, until } from '../../test/helpers'
import { appOn, ownStore } from '../notify/testing'

/**
 * Issue 36 point 3: instances sharing a store share the backup records, not the files. A backup
 * belongs to the instance that made it: only that one settles it, another answers its download
 * with 409 naming it, unless the backup directory is shared.
 */
const ADMIN = { 'x-admin-token': 'test-admin-token' }

forEachEngine((engine) => {
  let store: Awaited<ReturnType<typeof ownStore>>
  const dirs: string[] = []
  const apps: Array<Awaited<ReturnType<typeof appOn>>> = []
  beforeAll(async () => {
    store = await ownStore(engine)
  })
  afterAll(async () => {
    for (const a of apps.splice(0)) await a.stop()
    await store.drop()
    for (const d of dirs) rmSync(d, { recursive: true, force: true })
  })
  const start = async (name: string, backupDir?: string) => {
    const dataDir = mkdtempSync(join(tmpdir(), `liveops-backup-${name}-`))
    dirs.push(dataDir)
    const app = await appOn(
      store,
      { backups: { schedule_interval_s: 0, ...(backupDir ? { dir: backupDir } : {}) } },
      { data_dir: dataDir, instance_id: name },
    )
    apps.push(app)
    return app
  }
  const make = async (on: Awaited<ReturnType<typeof appOn>>) => {
    const r = await on.req('POST', '/api/v1/backups', { name: 'fleet' }, ADMIN)
    expect(r.status).toBe(202)
    type Made = { id: string; instance: string; checksum: string; location: string }
    return until(async () => {
      const b = (await on.req('GET', `/api/v1/backups/${r.body.data.id}`, undefined, ADMIN)).body.data
      return b.status === 'succeeded' && (b as unknown as Made)
    }, 15_000)
  }
  const download = (on: Awaited<ReturnType<typeof appOn>>, id: string) =>
    on.app.handle(new Request(`http://localhost/api/v1/backups/${id}/download`, { headers: ADMIN }))

  test('a backup made on A downloads on A; on B (its own directory) 409 names A, and B deletes nothing', async () => {
    const a = await start('a')
    const b = await start('b')
    const made = await make(a)
    expect(made.instance).toBe('a')
    expect((await download(a, made.id)).status).toBe(200)
    const there = await download(b, made.id)
    expect(there.status).toBe(409)
    const body = await there.json()
    expect(body).toMatchObject({ code: 409, data: { instance: 'a' } })
    expect(body.message).toContain("on instance 'a'")
    const del = await b.req('DELETE', `/api/v1/backups/${made.id}`, undefined, ADMIN)
    expect(del.status).toBe(409)
    expect(del.body.data).toEqual({ instance: 'a' })
    expect((await download(a, made.id)).status).toBe(200)
    expect((await a.req('DELETE', `/api/v1/backups/${made.id}`, undefined, ADMIN)).status).toBe(200)
    for (const x of apps.splice(0)) await x.stop()
  })

  test('with a shared backup directory every instance downloads and deletes any backup', async () => {
    const shared = mkdtempSync(join(tmpdir(), 'liveops-backup-shared-'))
    dirs.push(shared)
    const a = await start('a', shared)
    const b = await start('b', shared)
    const made = await make(a)
    const res = await download(b, made.id)
    expect(res.status).toBe(200)
    expect(res.headers.get('x-checksum-sha256')).toBe(made.checksum)
    expect((await b.req('DELETE', `/api/v1/backups/${made.id}`, undefined, ADMIN)).status).toBe(200)
    expect(existsSync(join(shared, made.location))).toBe(false)
    for (const x of apps.splice(0)) await x.stop()
  })

  test("a starting instance leaves another instance's unfinished backup alone; its own instance settles it", async () => {
    const a = await start('a')
    // A backup of A in flight, as its record shows it while A works on it.
    const row = await a.db.get<{ id: string }>(
      `INSERT INTO backups (id, name, type, driver, trigger, status, created_at, started_at, instance_id)
       VALUES (?, 'in flight', 'full', ?, 'api', 'running', ?, ?, 'a') RETURNING id`,
      [crypto.randomUUID(), engine, Date.now(), Date.now()],
    )
    const id = row!.id
    const b = await start('b')
    expect((await b.req('GET', `/api/v1/backups/${id}`, undefined, ADMIN)).body.data.status).toBe('running')
    // B stopping settles nothing of A's either.
    await b.stop()
    apps.splice(1)
    expect((await a.req('GET', `/api/v1/backups/${id}`, undefined, ADMIN)).body.data.status).toBe('running')
    // A restarting under the same name knows it can never finish it.
    await a.stop()
    apps.splice(0)
    const again = await start('a')
    const settled = (await again.req('GET', `/api/v1/backups/${id}`, undefined, ADMIN)).body.data
    expect(settled).toMatchObject({ status: 'failed', instance: 'a' })
    expect(settled.error).toContain('interrupted')
    for (const x of apps.splice(0)) await x.stop()
  })
})
