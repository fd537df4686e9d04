import { describe, expect, test } from 'bun:test'
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
import { PG_URL, forEachEngine, freshMysqlDb, makeApp, until } from '../../test/helpers'
import { backup, backupsSuite } from './backups-fixture'

// Backups that fail, retention, the schedule, the dump tools and recovery after a crash (backups-fixture.ts).
forEachEngine((engine) => {
  const fx = backupsSuite(engine)

  describe('failures, retention, schedule', () => {
    test('a backup that cannot be written fails with the reason and lists no file', async () => {
      const blocker = join(fx.a.dataDir, 'not-a-dir')
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
        const dir = join(fx.a.dataDir, 'backups')
        const row = await fx.a.db.get<{ id: string }>(
          "INSERT INTO backups (id, name, type, driver, trigger, status, created_at, started_at) VALUES ('crashed-1', 'crash', 'full', 'sqlite', 'api', 'running', ?, ?) RETURNING id",
          [Date.now(), Date.now()],
        )
        mkdirSync(dir, { recursive: true })
        writeFileSync(join(dir, '.crashed-1.partial'), 'half a file')
        const b = await makeApp('sqlite', {
          config: { database: { url: join(fx.a.dataDir, 'test.sqlite') } },
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
