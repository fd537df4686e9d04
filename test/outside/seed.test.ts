import { afterAll, beforeAll, expect, test } from 'bun:test'
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import mysql from 'mysql2/promise'
import postgres from 'postgres'
import { forEachEngine, freshMysqlDb, scratchDatabase } from '../helpers'

// Issue 15 point 11: `bun run seed` is safe to run twice, exits as soon as it is done, and
// without ADMIN_PASSWORD says what to do before creating anything. Run as a user runs it.

const ROOT = `${import.meta.dir}/../..`
const SEED = `${ROOT}/scripts/seed.ts`

async function run(env: Record<string, string>, cwd: string) {
  const t0 = performance.now()
  const p = Bun.spawn([process.execPath, SEED, '--config', join(cwd, 'liveops.yaml')], {
    cwd,
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp', ...env },
    stdout: 'pipe',
    stderr: 'pipe',
  })
  // When the last line arrives, the work is done: the exit must follow at once.
  let lastLineAt = 0
  let out = ''
  const decoder = new TextDecoder()
  const reader = p.stdout.getReader()
  for (let r = await reader.read(); !r.done; r = await reader.read()) {
    out += decoder.decode(r.value)
    lastLineAt = performance.now()
  }
  const code = await p.exited
  const exitedAt = performance.now()
  return {
    code,
    out,
    err: await new Response(p.stderr).text(),
    lingerMs: lastLineAt ? exitedAt - lastLineAt : 0,
    totalMs: exitedAt - t0,
  }
}

forEachEngine((engine) => {
  let dir: string
  let env: Record<string, string>
  let pgDb: Awaited<ReturnType<typeof scratchDatabase>> | undefined
  let myDb: Awaited<ReturnType<typeof freshMysqlDb>> | undefined
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'liveops-seed-'))
    // Every plugin, as the shipped config has them: their timers are what could keep seed alive.
    writeFileSync(join(dir, 'liveops.yaml'), readShippedConfig())
    env = { DATA_DIR: join(dir, 'data'), INGEST_SIGNING_SECRET: 'seed-test-secret' }
    if (engine === 'postgres') {
      pgDb = await scratchDatabase('seed')
      env.DATABASE_URL = pgDb.url
    }
    if (engine === 'mysql') {
      myDb = await freshMysqlDb()
      env.DATABASE_URL = myDb.url
    }
  })
  afterAll(async () => {
    await pgDb?.drop()
    await myDb?.drop()
    rmSync(dir, { recursive: true, force: true })
  }, 30_000)

  const tables = async () => {
    if (engine === 'sqlite') return existsSync(env.DATA_DIR) ? readdirSync(env.DATA_DIR) : []
    if (engine === 'mysql') {
      const c = await mysql.createConnection({ uri: env.DATABASE_URL! })
      try {
        const [rows] = await c.query(
          'SELECT table_name AS t FROM information_schema.tables WHERE table_schema = DATABASE()',
        )
        return (rows as Array<{ t: string }>).map((r) => r.t)
      } finally {
        await c.end()
      }
    }
    const sql = postgres(env.DATABASE_URL!, { max: 1, onnotice: () => undefined })
    try {
      return (await sql`SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'`).map(
        (r) => r.table_name as string,
      )
    } finally {
      await sql.end()
    }
  }

  test('without ADMIN_PASSWORD: exit 2, says what to do, creates nothing', async () => {
    const r = await run(env, dir)
    expect(r.code).toBe(2)
    expect(r.err).toContain('ADMIN_PASSWORD=')
    expect(r.err).toContain('Nothing was created')
    expect(await tables()).toEqual([])
  }, 60_000)

  test('twice: the second run finds the games and keys of the first, and each run exits promptly', async () => {
    const first = await run({ ...env, ADMIN_PASSWORD: 'seed-admin-Pw-3' }, dir)
    expect(first.err).toBe('')
    expect(first.code).toBe(0)
    const keys = [...first.out.matchAll(/prod API key (lok_\S+)/g)].map((m) => m[1])
    expect(keys).toHaveLength(3)
    const ids = [...first.out.matchAll(/game (\S+)/g)].map((m) => m[1])
    expect(first.lingerMs).toBeLessThan(1000)

    const second = await run({ ...env, ADMIN_PASSWORD: 'seed-admin-Pw-3' }, dir)
    // Issue 38 point 8: the second run logged `Cannot use a closed database`; nothing may be
    // said on stderr nor logged above info (a plugin's timer using the store after stop()).
    expect(second.err).toBe('')
    for (const out of [first.out, second.out]) {
      expect(out).not.toContain('closed database')
      expect(out).not.toMatch(/"level":"(warn|error)"/)
    }
    expect(second.code).toBe(0)
    expect([...second.out.matchAll(/game (\S+) \(existed\)/g)].map((m) => m[1])).toEqual(ids)
    expect(second.out).not.toMatch(/prod API key lok_\S{20,}/)
    expect(second.out).toContain('not shown again')
    expect(second.lingerMs).toBeLessThan(1000)
    // Every write of both runs left its audit entry before the store closed.
    expect(`${first.out}${second.out}`).not.toContain('audit entry not stored')

    // The first run's key still works and there is one game per name: read through a server.
    const { createApp } = await import('../../core/app')
    const { loadConfig } = await import('../../core/config')
    const { plugins } = await import('../../plugins')
    const cfg = loadConfig(readShippedConfig(), plugins, { ...env, ADMIN_PASSWORD: 'seed-admin-Pw-3' })
    cfg.core.log.level = 'error'
    const built = await createApp(cfg, { plugins })
    try {
      const user = await built.auth.checkPassword('email', 'admin@localhost', 'seed-admin-Pw-3')
      const token = built.auth.accessToken(user)
      const names: string[] = []
      for (const id of ids) {
        const r = await built.app.handle(
          new Request(`http://localhost/api/games/${id}`, { headers: { authorization: `Bearer ${token}` } }),
        )
        names.push((await r.json()).name)
      }
      expect(names.sort()).toEqual(['Arena Legends', 'Block Drop', 'Dragon Tales'])
      for (const name of names) {
        const all = await built.db.all<{ n: number }>('SELECT COUNT(*) AS n FROM games WHERE name = ?', [
          name,
        ])
        expect(Number(all[0]?.n)).toBe(1)
      }
      expect(await built.auth.verifyApiKey(keys[0])).toBeTruthy()
      // The seed's last write (publishing the LIVE game) is in the audit log: nothing was dropped at exit.
      const published = await built.db.all<{ n: number }>(
        "SELECT COUNT(*) AS n FROM audit_log WHERE action = 'game.publish'",
      )
      expect(Number(published[0]?.n)).toBe(1)
    } finally {
      await built.stop()
    }
  }, 120_000)
})

function readShippedConfig(): string {
  return readFileSync(`${ROOT}/config/liveops.yaml`, 'utf8')
}
