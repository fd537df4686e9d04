import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import {
  chmodSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readdirSync,
  rmSync,
  writeFileSync,
} from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import mysql from 'mysql2/promise'
import postgres from 'postgres'
import type { AuditEntry } from '../../core/events'
import { PG_URL, type TestApp, forEachEngine, freshMysqlDb, makeApp, until } from '../../test/helpers'

const sha256 = (b: Uint8Array) => new Bun.CryptoHasher('sha256').update(b).digest('hex')

/** Polls a backup until it leaves pending and running. */
async function finished(a: TestApp, token: string, id: string) {
  return until(async () => {
    const r = await a.req('GET', `/api/v1/backups/${id}`, { token })
    return ['succeeded', 'failed'].includes(r.body.data.status) ? r.body.data : undefined
  }, 15_000)
}

async function backup(
  a: TestApp,
  token: string,
  body: Record<string, unknown> = { name: 'nightly drill', type: 'full' },
) {
  const r = await a.req('POST', '/api/v1/backups', { token, body })
  expect(r.status).toBe(202)
  expect(r.body.data.status).toBe('pending')
  expect(r.headers.get('location')).toBe(`/api/v1/backups/${r.body.data.id}`)
  return finished(a, token, r.body.data.id)
}

async function download(a: TestApp, token: string, id: string) {
  const res = await a.app.handle(
    new Request(`http://localhost/api/v1/backups/${id}/download`, {
      headers: { authorization: `Bearer ${token}` },
    }),
  )
  return { res, bytes: new Uint8Array(await res.arrayBuffer()) }
}

forEachEngine((engine) => {
  let a: TestApp
  let admin: string
  beforeAll(async () => {
    a = await makeApp(engine, { plugins: { backups: { schedule_interval_s: 0 } } })
    admin = await a.token('admin')
    await a.auth.createUser({
      email: 'drill@ironbark.example',
      username: 'restore-drill',
      password: 'drill-pass-7731',
      roles: ['analyst'],
    })
  })
  afterAll(() => a.stop())

  describe('backups', () => {
    test('a backup runs in the background to succeeded, with the file, its size and sha256 recorded', async () => {
      const b = await backup(a, admin)
      expect(b).toMatchObject({
        name: 'nightly drill',
        type: 'full',
        driver: engine,
        trigger: 'api',
        status: 'succeeded',
      })
      expect(b.checksum).toMatch(/^[0-9a-f]{64}$/)
      const file = join(a.dataDir, 'backups', b.location)
      const bytes = readFileSync(file)
      expect(bytes.length).toBe(b.size)
      expect(sha256(bytes)).toBe(b.checksum)
      expect(Date.parse(b.completedAt)).toBeGreaterThanOrEqual(Date.parse(b.startedAt))
      expect(readdirSync(join(a.dataDir, 'backups')).filter((f) => f.endsWith('.partial'))).toEqual([])
      const { res, bytes: got } = await download(a, admin, b.id)
      expect(res.status).toBe(200)
      expect(sha256(got)).toBe(b.checksum)
      expect(res.headers.get('x-checksum-sha256')).toBe(b.checksum)
      expect(res.headers.get('content-disposition')).toMatch(
        /^attachment; filename="liveops-nightly_drill-\d{8}T\d{6}Z\.sql(ite)?"$/,
      )
      const list = await a.req('GET', '/api/v1/backups', { token: admin })
      expect(list.body.data.items[0].id).toBe(b.id)
    })

    test(`the ${engine} backup restores into a fresh store that serves a login`, async () => {
      const b = await backup(a, admin, { name: 'restore' })
      const { bytes } = await download(a, admin, b.id)
      if (engine === 'sqlite') {
        const dir = mkdtempSync(join(tmpdir(), 'liveops-restore-'))
        const file = join(dir, 'liveops.sqlite')
        writeFileSync(file, bytes)
        const restored = await makeApp('sqlite', {
          config: { database: { url: file } },
          plugins: { backups: { schedule_interval_s: 0 } },
        })
        try {
          const login = await restored.req('POST', '/api/auth/login', {
            body: { email: 'drill@ironbark.example', password: 'drill-pass-7731' },
          })
          expect(login.status).toBe(200)
          expect(login.body.token ?? login.body.accessToken).toBeString()
          // The copy was taken while its own record said running; the restored server closes it.
          const own = await restored.req('GET', `/api/v1/backups/${b.id}`, {
            headers: { 'x-admin-token': 'test-admin-token' },
          })
          expect(own.body.data).toMatchObject({
            status: 'failed',
            error: expect.stringContaining('interrupted'),
          })
        } finally {
          await restored.stop()
          rmSync(dir, { recursive: true, force: true })
        }
      } else if (engine === 'mysql') {
        // Restored with the client into a scratch database, then read.
        const text = new TextDecoder().decode(bytes)
        expect(text).toContain('CREATE TABLE `users`')
        const scratch = await freshMysqlDb()
        try {
          const dump = join(a.dataDir, 'restore.sql')
          writeFileSync(dump, bytes)
          const url = new URL(scratch.url)
          const client = Bun.which('mariadb') ?? 'mysql'
          const load = Bun.spawnSync(
            [
              client,
              `--host=${url.hostname}`,
              `--port=${url.port || '3306'}`,
              `--user=${url.username}`,
              scratch.name,
            ],
            {
              stdin: Bun.file(dump),
              stderr: 'pipe',
              env: { ...process.env, MYSQL_PWD: decodeURIComponent(url.password) },
            },
          )
          expect(load.stderr.toString()).toBe('')
          expect(load.exitCode).toBe(0)
          const c = await mysql.createConnection({ uri: scratch.url })
          const [rows] = await c.query("SELECT username FROM users WHERE email = 'drill@ironbark.example'")
          const [own] = await c.query('SELECT status, error FROM backups WHERE id = ?', [b.id])
          await c.end()
          expect((rows as Array<{ username: string }>).map((r) => r.username)).toEqual(['restore-drill'])
          // The copy was taken while its own record said running; the dump closes it.
          expect((own as Array<{ status: string; error: string }>)[0]).toMatchObject({
            status: 'failed',
            error: expect.stringContaining('interrupted'),
          })
        } finally {
          await scratch.drop()
        }
      } else {
        const text = new TextDecoder().decode(bytes)
        const schema = /CREATE SCHEMA (\w+);/.exec(text)?.[1]
        expect(schema).toStartWith('t_')
        expect(text).not.toContain('OWNER TO')
        const db = `restore_${crypto.randomUUID().replace(/-/g, '').slice(0, 12)}`
        const admin = postgres(PG_URL, { max: 1, onnotice: () => undefined })
        await admin.unsafe(`CREATE DATABASE ${db}`)
        try {
          const url = new URL(PG_URL)
          url.pathname = `/${db}`
          const dump = join(a.dataDir, 'restore.sql')
          writeFileSync(dump, bytes)
          const psql = Bun.spawnSync(['psql', '--set=ON_ERROR_STOP=1', '-q', '-d', url.href, '-f', dump], {
            stderr: 'pipe',
          })
          expect(psql.stderr.toString()).toBe('')
          expect(psql.exitCode).toBe(0)
          const scratch = postgres(url.href, { max: 1, onnotice: () => undefined })
          const rows = await scratch.unsafe(
            `SELECT username FROM ${schema}.users WHERE email = 'drill@ironbark.example'`,
          )
          await scratch.end()
          expect(rows.map((r) => r.username)).toEqual(['restore-drill'])
        } finally {
          await admin.unsafe(`DROP DATABASE IF EXISTS ${db} WITH (FORCE)`)
          await admin.end()
        }
      }
    }, 30_000)

    test('bad input answers 400 naming the field and starts nothing; another engine is refused clearly', async () => {
      const before = (await a.req('GET', '/api/v1/backups', { token: admin })).body.data.total
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
        const r = await a.req('POST', '/api/v1/backups', { token: admin, body })
        expect([field, r.status]).toEqual([field, 400])
        expect(r.body.code).toBe(400)
        expect(r.body.message).toContain(field)
      }
      const wrong = await a.req('POST', '/api/v1/backups', { token: admin, body: { driver: other } })
      expect(wrong.body.message).toContain(`'${other}' is not this server's store, which is ${engine}`)
      expect((await a.req('GET', '/api/v1/backups?status=done', { token: admin })).status).toBe(400)
      expect((await a.req('GET', '/api/v1/backups', { token: admin })).body.data.total).toBe(before)
    })

    test('no token 401; viewers and analysts neither read nor make backups (403); an operator does', async () => {
      const b = (await a.req('GET', '/api/v1/backups?status=succeeded', { token: admin })).body.data.items[0]
      for (const [m, p] of [
        ['POST', '/api/v1/backups'],
        ['GET', '/api/v1/backups'],
        ['GET', `/api/v1/backups/${b.id}/download`],
        ['DELETE', `/api/v1/backups/${b.id}`],
      ] as const) {
        expect((await a.req(m, p, { body: m === 'POST' ? {} : undefined })).status).toBe(401)
        for (const role of ['viewer', 'analyst'])
          expect(
            (await a.req(m, p, { token: await a.token(role), body: m === 'POST' ? {} : undefined })).status,
          ).toBe(403)
      }
      const operator = await a.token('operator')
      expect((await a.req('GET', '/api/v1/backups', { token: operator })).status).toBe(200)
      const own = await backup(a, operator, { name: 'operator copy' })
      expect(own.status).toBe('succeeded')
      // Operators run backups but do not take the file away: it holds the secrets the API masks.
      const refused = await a.req('GET', `/api/v1/backups/${own.id}/download`, { token: operator })
      expect(refused.status).toBe(403)
      expect(refused.body.message).toContain('admin role')
      expect((await download(a, admin, own.id)).res.status).toBe(200)
    }, 20_000)

    test('download refuses what it cannot vouch for: failed (409), missing file (410), changed file (500); unknown ids 404', async () => {
      const b = await backup(a, admin, { name: 'tamper' })
      const file = join(a.dataDir, 'backups', b.location)
      const original = readFileSync(file)
      const changed = Buffer.from(original)
      changed[changed.length - 1] ^= 0xff
      writeFileSync(file, changed)
      const bad = await a.req('GET', `/api/v1/backups/${b.id}/download`, { token: admin })
      expect(bad.status).toBe(500)
      expect(bad.body.message).toContain('does not match its record')
      rmSync(file)
      expect((await a.req('GET', `/api/v1/backups/${b.id}/download`, { token: admin })).status).toBe(410)
      for (const [m, p] of [
        ['GET', '/api/v1/backups/nope'],
        ['GET', '/api/v1/backups/nope/download'],
        ['DELETE', '/api/v1/backups/nope'],
      ] as const) {
        const r = await a.req(m, p, { token: admin })
        expect(r.status).toBe(404)
        expect(r.body).toMatchObject({ code: 404, data: null })
      }
    })

    test('delete removes the record and its file; making, downloading and deleting are audited', async () => {
      const heard: AuditEntry[] = []
      const off = a.bus.on('audit', (e) => {
        heard.push(e)
      })
      const b = await backup(a, admin, { name: 'short-lived' })
      expect((await download(a, admin, b.id)).res.status).toBe(200)
      const file = join(a.dataDir, 'backups', b.location)
      expect(existsSync(file)).toBe(true)
      expect((await a.req('DELETE', `/api/v1/backups/${b.id}`, { token: admin })).status).toBe(200)
      expect(existsSync(file)).toBe(false)
      expect((await a.req('GET', `/api/v1/backups/${b.id}`, { token: admin })).status).toBe(404)
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

  describe('failures, retention, schedule', () => {
    test('a backup that cannot be written fails with the reason and lists no file', async () => {
      const blocker = join(a.dataDir, 'not-a-dir')
      writeFileSync(blocker, 'x')
      const b = await makeApp(engine, {
        plugins: { backups: { schedule_interval_s: 0, dir: join(blocker, 'backups') } },
      })
      try {
        const token = await b.token('admin')
        const r = await backup(b, token, { name: 'doomed' })
        expect(r.status).toBe('failed')
        expect(r.error).toContain('ENOTDIR')
        expect(r.location).toBeUndefined()
        expect((await b.req('GET', `/api/v1/backups/${r.id}/download`, { token })).status).toBe(409)
      } finally {
        await b.stop()
      }
    }, 20_000)

    test('retention keeps the newest keep_last backups and removes the others with their files', async () => {
      const b = await makeApp(engine, { plugins: { backups: { schedule_interval_s: 0, keep_last: 2 } } })
      try {
        const token = await b.token('admin')
        const made = []
        for (const name of ['first', 'second', 'third']) made.push(await backup(b, token, { name }))
        // Retention runs right after a backup is recorded as succeeded.
        const names = async () =>
          (await b.req('GET', '/api/v1/backups', { token })).body.data.items.map(
            (x: { name: string }) => x.name,
          )
        await until(async () => ((await names()).length === 2 ? true : undefined), 15_000)
        expect(await names()).toEqual(['third', 'second'])
        expect(existsSync(join(b.dataDir, 'backups', made[0].location))).toBe(false)
        expect(readdirSync(join(b.dataDir, 'backups')).sort()).toEqual(
          [made[1].location, made[2].location].sort(),
        )
      } finally {
        await b.stop()
      }
    }, 20_000)

    test('retention removes backups older than keep_days with their files', async () => {
      const b = await makeApp(engine, { plugins: { backups: { schedule_interval_s: 0, keep_days: 7 } } })
      try {
        const token = await b.token('admin')
        const old = await backup(b, token, { name: 'ten days old' })
        const aged = Date.now() - 10 * 86_400_000
        await b.db.run('UPDATE backups SET created_at = ? WHERE id = ?', [aged, old.id])
        const fresh = await backup(b, token, { name: 'today' })
        const ids = async () =>
          (await b.req('GET', '/api/v1/backups', { token })).body.data.items.map((x: { id: string }) => x.id)
        await until(async () => ((await ids()).length === 1 ? true : undefined), 15_000)
        expect(await ids()).toEqual([fresh.id])
        expect(existsSync(join(b.dataDir, 'backups', old.location))).toBe(false)
      } finally {
        await b.stop()
      }
    }, 20_000)

    test('the schedule makes backups on its own', async () => {
      const b = await makeApp(engine, { plugins: { backups: { schedule_interval_s: 1 } } })
      try {
        const token = await b.token('admin')
        const got = await until(async () => {
          const items = (await b.req('GET', '/api/v1/backups?status=succeeded', { token })).body.data.items
          return items.find((x: { trigger: string }) => x.trigger === 'schedule')
        }, 15_000)
        expect(got).toMatchObject({ name: 'scheduled', status: 'succeeded' })
      } finally {
        await b.stop()
      }
    }, 20_000)

    if (engine === 'postgres') {
      test('pg_dump gets the password through PGPASSWORD, never argv; a missing pg_dump fails naming it', async () => {
        const dir = mkdtempSync(join(tmpdir(), 'liveops-pgdump-'))
        const spy = join(dir, 'pg_dump')
        writeFileSync(
          spy,
          `#!/bin/sh\necho "$@" > ${dir}/argv\necho "$PGPASSWORD" > ${dir}/password\nexec pg_dump "$@"\n`,
        )
        chmodSync(spy, 0o755)
        const url = new URL(PG_URL)
        url.password = 'Tr0ub4dor-secret'
        const b = await makeApp('postgres', {
          config: { database: { url: url.href } },
          plugins: { backups: { schedule_interval_s: 0, pg_dump: spy } },
        })
        try {
          const token = await b.token('admin')
          expect((await backup(b, token, { name: 'spied' })).status).toBe('succeeded')
          expect(readFileSync(join(dir, 'password'), 'utf8').trim()).toBe('Tr0ub4dor-secret')
          const argv = readFileSync(join(dir, 'argv'), 'utf8')
          expect(argv).toContain('--format=plain --no-owner')
          expect(argv).not.toContain('Tr0ub4dor')
        } finally {
          await b.stop()
        }
        const c = await makeApp('postgres', {
          plugins: { backups: { schedule_interval_s: 0, pg_dump: join(dir, 'absent', 'pg_dump') } },
        })
        try {
          const r = await backup(c, await c.token('admin'), { name: 'no tool' })
          expect(r.status).toBe('failed')
          expect(r.error).toContain('pg_dump not found')
        } finally {
          await c.stop()
          rmSync(dir, { recursive: true, force: true })
        }
      }, 30_000)
      test('a shutdown during a backup ends the dump at once and leaves no partial file', async () => {
        const dir = mkdtempSync(join(tmpdir(), 'liveops-slowdump-'))
        const slow = join(dir, 'pg_dump')
        // Writes half a dump to its --file, then hangs.
        writeFileSync(
          slow,
          `#!/bin/sh\nfor a in "$@"; do case $a in --file=*) echo 'half a dump' > "\${a#--file=}";; esac; done\necho $$ > ${dir}/pid\nexec sleep 600\n`,
        )
        chmodSync(slow, 0o755)
        const out = join(dir, 'out')
        const b = await makeApp('postgres', {
          plugins: { backups: { schedule_interval_s: 0, pg_dump: slow, dir: out } },
        })
        const token = await b.token('admin')
        const r = await b.req('POST', '/api/v1/backups', { token, body: { name: 'cut short' } })
        await until(async () => {
          const g = await b.req('GET', `/api/v1/backups/${r.body.data.id}`, { token })
          return g.body.data.status === 'running' && existsSync(join(dir, 'pid')) ? true : undefined
        }, 15_000)
        const pid = Number(readFileSync(join(dir, 'pid'), 'utf8'))
        expect(readdirSync(out)).toHaveLength(1)
        // The dump would hang for ten minutes: stop returning with it gone (well within the test's
        // limit) shows stop ended it rather than waited for it.
        await b.stop()
        expect(() => process.kill(pid, 0)).toThrow()
        expect(readdirSync(out)).toEqual([])
        rmSync(dir, { recursive: true, force: true })
      }, 60_000)
    }
    if (engine === 'mysql') {
      test('the dump gets the password through MYSQL_PWD, never argv, in one transaction; a missing tool fails naming it', async () => {
        const dir = mkdtempSync(join(tmpdir(), 'liveops-mysqldump-'))
        const tool = Bun.which('mariadb-dump') ?? Bun.which('mysqldump')
        const spy = join(dir, 'dump')
        writeFileSync(
          spy,
          `#!/bin/sh\necho "$@" > ${dir}/argv\necho "$MYSQL_PWD" > ${dir}/password\nexec ${tool} "$@"\n`,
        )
        chmodSync(spy, 0o755)
        const scratch = await freshMysqlDb()
        const user = `u_${scratch.name.slice(2, 14)}`
        const root = await mysql.createConnection({ uri: scratch.url })
        await root.query(`CREATE USER '${user}'@'%' IDENTIFIED BY 'Tr0ub4dor-secret'`)
        await root.query(`GRANT ALL ON ${scratch.name}.* TO '${user}'@'%'`)
        const url = new URL(scratch.url)
        url.username = user
        url.password = 'Tr0ub4dor-secret'
        const b = await makeApp('mysql', {
          config: { database: { url: url.href } },
          plugins: { backups: { schedule_interval_s: 0, mysql_dump: spy } },
        })
        try {
          const token = await b.token('admin')
          expect((await backup(b, token, { name: 'spied' })).status).toBe('succeeded')
          expect(readFileSync(join(dir, 'password'), 'utf8').trim()).toBe('Tr0ub4dor-secret')
          const argv = readFileSync(join(dir, 'argv'), 'utf8')
          expect(argv).toContain('--single-transaction')
          expect(argv).toContain(`--user=${user}`)
          expect(argv).not.toContain('Tr0ub4dor')
        } finally {
          await b.stop()
          await root.query(`DROP USER '${user}'@'%'`)
          await root.end()
          await scratch.drop()
        }
        const c = await makeApp('mysql', {
          plugins: { backups: { schedule_interval_s: 0, mysql_dump: join(dir, 'absent', 'mariadb-dump') } },
        })
        try {
          const r = await backup(c, await c.token('admin'), { name: 'no tool' })
          expect(r.status).toBe('failed')
          expect(r.error).toContain(`${join(dir, 'absent', 'mariadb-dump')} not found`)
        } finally {
          await c.stop()
          rmSync(dir, { recursive: true, force: true })
        }
      }, 30_000)
    }
    if (engine === 'sqlite') {
      test('after a crash, partial files are removed and unfinished backups marked failed', async () => {
        const dir = join(a.dataDir, 'backups')
        const row = await a.db.get<{ id: string }>(
          "INSERT INTO backups (id, name, type, driver, trigger, status, created_at, started_at) VALUES ('crashed-1', 'crash', 'full', 'sqlite', 'api', 'running', ?, ?) RETURNING id",
          [Date.now(), Date.now()],
        )
        mkdirSync(dir, { recursive: true })
        writeFileSync(join(dir, '.crashed-1.partial'), 'half a file')
        const b = await makeApp('sqlite', {
          config: { database: { url: join(a.dataDir, 'test.sqlite') } },
          plugins: { backups: { schedule_interval_s: 0, dir } },
        })
        try {
          const r = await b.req('GET', `/api/v1/backups/${row!.id}`, {
            headers: { 'x-admin-token': 'test-admin-token' },
          })
          expect(r.body.data).toMatchObject({
            status: 'failed',
            error: expect.stringContaining('interrupted'),
          })
          expect(existsSync(join(dir, '.crashed-1.partial'))).toBe(false)
        } finally {
          await b.stop()
        }
      })
    }
  })
})
