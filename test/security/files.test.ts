import { afterAll, beforeAll, expect, test } from 'bun:test'
import {
  chmodSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { type TestApp, forEachEngine, makeApp, until } from '../helpers'
import { ADMIN_TOKEN } from './lib'

/*
 * Issue 34 point 10: files are private. DATA_DIR is created 0700 and every file liveops writes
 * there is 0600, whatever the umask (the test runs under umask 0, where a file created without
 * an explicit mode is world-writable); files an older version left looser are tightened.
 */
const mode = (path: string) => (statSync(path).mode & 0o777).toString(8)

forEachEngine((engine) => {
  let root: string
  let dataDir: string
  let app: TestApp
  let umask: number
  beforeAll(async () => {
    root = mkdtempSync(join(tmpdir(), 'liveops-files-'))
    dataDir = join(root, 'fresh', 'data')
    umask = process.umask(0)
    app = await makeApp(engine, {
      plugins: { notify: {}, backups: { schedule_interval_s: 0 } },
      config: {
        data_dir: dataDir,
        // SQLite: the default store in data_dir; PostgreSQL stays on its schema.
        ...(engine === 'sqlite' ? { database: { url: '' } } : {}),
        auth: { jwt_secret: '' },
        log: { level: 'info', file: join(dataDir, 'logs', 'liveops.log') },
      },
    })
  })
  afterAll(async () => {
    process.umask(umask)
    await app.stop()
    rmSync(root, { recursive: true, force: true })
  })

  test('DATA_DIR is created 0700; the store, its WAL, jwt-secret, the instance id, the log and backups are 0600', async () => {
    expect(mode(dataDir)).toBe('700')
    const files = ['jwt-secret', 'instance-id', join('logs', 'liveops.log')]
    if (engine === 'sqlite') {
      // A write, so the WAL and its index exist.
      await app.auth.createUser({ email: 'files@x.io', password: 'password-123', roles: ['viewer'] })
      files.push('liveops.sqlite', 'liveops.sqlite-wal', 'liveops.sqlite-shm')
    }
    const r = await app.req('POST', '/api/v1/backups', {
      headers: { 'x-admin-token': ADMIN_TOKEN },
      body: { name: 'private', type: 'full' },
    })
    expect(r.status).toBe(202)
    const done = await until(async () => {
      const b = await app.req('GET', `/api/v1/backups/${r.body.data.id}`, {
        headers: { 'x-admin-token': ADMIN_TOKEN },
      })
      return ['succeeded', 'failed'].includes(b.body.data.status) ? b.body.data : undefined
    }, 30_000)
    expect(done.status).toBe('succeeded')
    expect(mode(join(dataDir, 'backups'))).toBe('700')
    files.push(join('backups', done.location))
    for (const f of files) {
      expect(existsSync(join(dataDir, f))).toBe(true)
      expect([f, mode(join(dataDir, f))]).toEqual([f, '600'])
    }
    expect(mode(join(dataDir, 'logs'))).toBe('700')
  })

  if (engine === 'sqlite')
    test('a store and a jwt-secret an older version wrote 0644 are tightened at start', async () => {
      const old = join(root, 'old')
      mkdirSync(old)
      const db = join(old, 'liveops.sqlite')
      writeFileSync(db, '')
      writeFileSync(join(old, 'jwt-secret'), 'an-old-secret')
      chmodSync(db, 0o644)
      chmodSync(join(old, 'jwt-secret'), 0o644)
      const again = await makeApp('sqlite', {
        plugins: {},
        config: { data_dir: old, database: { url: '' }, auth: { jwt_secret: '' } },
      })
      try {
        await again.auth.createUser({ email: 'old@x.io', password: 'password-123', roles: ['viewer'] })
        for (const f of readdirSync(old)) expect([f, mode(join(old, f))]).toEqual([f, '600'])
      } finally {
        await again.stop()
      }
    })
})
