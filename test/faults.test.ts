import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { spawnSync } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { SECRET, game, signed } from '../plugins/ingest/testing'
import { PG_URL, type TestApp, makeApp, pgUrlWith } from './helpers'
import { tcpProxy } from './tcp-proxy'

/**
 * Store faults fail fast and say why (issue: many instances and bad days): a full disk answers
 * 503 storage_unavailable naming the cause, turns /readyz to 503, acknowledges nothing it did not
 * store, and recovers by itself when space returns; a read-only data directory at start is one
 * line and exit code 2. Real file systems: a small tmpfs mounted for the test (root only, as in CI).
 */
const root = join(import.meta.dir, '..')
const isRoot = process.getuid?.() === 0

function mount(opts: string): string {
  const dir = mkdtempSync(join(tmpdir(), 'liveops-fs-'))
  const r = spawnSync('mount', ['-t', 'tmpfs', '-o', opts, 'tmpfs', dir])
  if (r.status !== 0) throw new Error(`mount failed: ${r.stderr}`)
  return dir
}
function unmount(dir: string) {
  spawnSync('umount', ['-l', dir])
  rmSync(dir, { recursive: true, force: true })
}
/** Fills the file system until it refuses another byte. */
function fill(dir: string): string {
  const file = join(dir, 'filler')
  spawnSync('dd', ['if=/dev/zero', `of=${file}`, 'bs=64k'], { stdio: 'ignore' })
  return file
}

describe.if(isRoot)('a full disk (SQLite on a 24 MB tmpfs)', () => {
  let dir: string
  let a: TestApp
  beforeAll(async () => {
    dir = mount('size=24m')
    a = await makeApp('sqlite', {
      plugins: { games: {}, ingest: { signing_secret: SECRET } },
      config: { data_dir: dir, database: { url: join(dir, 'liveops.sqlite') } },
    })
  })
  afterAll(async () => {
    await a.stop().catch(() => undefined)
    unmount(dir)
  })

  test('writes answer 503 storage_unavailable naming the cause; /readyz turns 503; space returns and both recover', async () => {
    const admin = await a.token('admin')
    const g = await a.req('POST', '/api/games', { token: admin, body: game })
    expect(g.status).toBe(201)
    const filler = fill(dir)

    // Every acknowledged write is stored; the first refused one says why.
    const stored: string[] = []
    let refused: { status: number; body: { error: string; message: string } } | undefined
    for (let i = 0; i < 2000 && !refused; i++) {
      const r = await a.req('POST', '/api/games', {
        token: admin,
        body: { ...game, name: `Full Disk ${i} ${'x'.repeat(180)}`.slice(0, 200) },
      })
      if (r.status === 201) stored.push(r.body.id)
      else refused = r
    }
    expect(refused?.status).toBe(503)
    expect(refused?.body.error).toBe('storage_unavailable')
    expect(refused?.body.message).toContain('the disk is full')
    // Ingestion is refused too. Its first event may still fit in a page SQLite freed: keep
    // sending until one is refused (each acknowledged one is stored).
    let events: Awaited<ReturnType<typeof signed>> | undefined
    for (let i = 0; i < 50 && (!events || events.status === 200); i++)
      events = await signed(a, '/api/ingest/events', [
        {
          event: 'login',
          ts: String(Date.now()),
          game_id: g.body.id,
          env: 'prod',
          uid: `u${i}`,
          pad: 'y'.repeat(60_000),
        },
      ])
    expect(events?.status).toBe(503)
    expect(events?.body.error).toBe('storage_unavailable')

    // The error's text to an operator; the status to anyone.
    const ready = await a.req('GET', '/readyz', { token: admin })
    expect(ready.status).toBe(503)
    expect(ready.body.checks.database).toMatchObject({ status: 'down' })
    expect(ready.body.checks.database.error).toContain('full')
    const anonymous = (await a.req('GET', '/readyz')).body.checks.database
    expect(anonymous.status).toBe('down')
    expect(anonymous.error).toBeUndefined()
    for (const id of stored.slice(-3))
      expect((await a.req('GET', `/api/games/${id}`, { token: admin })).status).toBe(200)

    rmSync(filler)
    const back = await a.req('GET', '/readyz')
    expect(back.status).toBe(200)
    expect(
      (await a.req('POST', '/api/games', { token: admin, body: { ...game, name: 'After' } })).status,
    ).toBe(201)
  }, 60_000)
})

describe.if(isRoot)('an unwritable data directory at start', () => {
  test('a read-only DATA_DIR is one clear line and exit code 2, no stack trace', () => {
    const dir = mount('size=1m,ro')
    try {
      const r = spawnSync(process.execPath, ['core/main.ts', 'serve'], {
        cwd: root,
        env: { ...process.env, DATA_DIR: dir, DATABASE_URL: '', PORT: '0', HOST: '127.0.0.1' },
        encoding: 'utf8',
        timeout: 20_000,
      })
      expect(r.status).toBe(2)
      const lines = r.stderr.trim().split('\n')
      expect(lines).toHaveLength(1)
      expect(lines[0]).toContain(`data_dir '${dir}' is not writable`)
      expect(lines[0]).toContain('EROFS')
      expect(r.stderr).not.toContain('    at ')
    } finally {
      unmount(dir)
    }
  })

  test('a data directory that is a file is refused the same way', () => {
    const file = join(mkdtempSync(join(tmpdir(), 'liveops-file-')), 'not-a-dir')
    writeFileSync(file, 'x')
    const r = spawnSync(process.execPath, ['core/main.ts', 'serve'], {
      cwd: root,
      env: { ...process.env, DATA_DIR: file, DATABASE_URL: '', PORT: '0', HOST: '127.0.0.1' },
      encoding: 'utf8',
      timeout: 20_000,
    })
    expect(r.status).toBe(2)
    expect(r.stderr.trim().split('\n')).toHaveLength(1)
    expect(r.stderr).toContain('is not writable')
  })
})

describe('PostgreSQL unreachable', () => {
  test('requests answer 503 within about 2 s while it is down or silent, and service resumes by itself', async () => {
    const pg = new URL(PG_URL)
    const proxy = tcpProxy({ hostname: pg.hostname, port: Number(pg.port || 5432) })
    const a = await makeApp('postgres', {
      config: { database: { url: pgUrlWith({ host: '127.0.0.1', port: proxy.port }), pool: 3 } },
      plugins: { games: {} },
    })
    try {
      const admin = await a.token('admin')
      expect((await a.req('GET', '/api/games', { token: admin })).status).toBe(200)
      for (const mode of ['refuse', 'hang', 'blackhole'] as const) {
        proxy.set(mode)
        // The first request meets its pooled connection closing (or, in a blackhole, silent:
        // the pool's watch gives up on it); the second is refused at once while the store is
        // known to be down.
        for (const attempt of [1, 2]) {
          const t0 = performance.now()
          const r = await a.req('POST', '/api/games', {
            token: admin,
            body: { ...game, name: `During ${mode}` },
          })
          const ms = performance.now() - t0
          expect([mode, attempt, r.status, r.body.error]).toEqual([mode, attempt, 503, 'storage_unavailable'])
          expect(Number(r.headers.get('retry-after'))).toBeGreaterThan(0)
          // A bound that tells "failed fast" from the 30 s hang before (connect_timeout is 2 s).
          expect(ms).toBeLessThan(15_000)
        }
        const ready = await a.req('GET', '/readyz')
        expect(ready.status).toBe(503)
        expect(ready.headers.get('retry-after')).not.toBeNull()
        proxy.set('pass')
        const deadline = Date.now() + 10_000
        let back = 0
        while (Date.now() < deadline && back !== 201) {
          back = (
            await a.req('POST', '/api/games', { token: admin, body: { ...game, name: `After ${mode}` } })
          ).status
          // A client's pause between retries (a refusal now takes no I/O: without one the loop
          // would never let the store's probe run).
          if (back !== 201) await Bun.sleep(50)
        }
        expect(back).toBe(201)
        expect((await a.req('GET', '/readyz')).status).toBe(200)
      }
    } finally {
      await a.stop().catch(() => undefined)
      proxy.stop()
    }
  }, 120_000)
})
