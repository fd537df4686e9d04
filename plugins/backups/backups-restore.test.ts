import { describe, expect, test } from 'bun:test'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import mysql from 'mysql2/promise'
import postgres from 'postgres'
import { PG_URL, forEachEngine, freshMysqlDb, makeApp } from '../../test/helpers'
import { backup, backupsSuite, download } from './backups-fixture'

// A backup of each engine restored into a fresh store that serves the fixture's analyst (backups-fixture.ts).
forEachEngine((engine) => {
  const fx = backupsSuite(engine)

  describe('backups', () => {
    test(`the ${engine} backup restores into a fresh store that serves a login`, async () => {
      const b = await backup(fx.a, fx.admin, { name: 'restore' })
      const { bytes } = await download(fx.a, fx.admin, b.id)
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
          const dump = join(fx.a.dataDir, 'restore.sql')
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
          const dump = join(fx.a.dataDir, 'restore.sql')
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
  })
})
