import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { mkdtempSync, readdirSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import pkg from '../../package.json'
import { ADMIN_PASSWORD, PG_URL, type TestApp, engines, forEachEngine, makeApp, pgUrlWith } from '../helpers'
import { tcpProxy } from '../tcp-proxy'

/*
 * Issue 38 point 6: errors say what to do. A missing query parameter is `required`; a POST
 * without a body names what it needs; a short ADMIN_PASSWORD or a port in use is one line and
 * exit 2 before anything is written; `liveops --version`; a database outage around login is 503.
 */
const main = join(import.meta.dir, '../../core/main.ts')

forEachEngine((engine) => {
  let a: TestApp
  beforeAll(async () => {
    a = await makeApp(engine, { plugins: { games: {}, ingest: {}, analytics: {} } })
  })
  afterAll(() => a.stop())

  test('a missing query parameter is `required`, each one named', async () => {
    const r = await a.req('GET', '/api/v1/analytics/realtime/series', { token: await a.token('admin') })
    expect(r.status).toBe(400)
    expect(r.body.message).toBe('query.gameId: required; query.env: required')
    expect(r.body.details.errors).toEqual([
      { field: 'query.gameId', reason: 'required' },
      { field: 'query.env', reason: 'required' },
    ])
  })

  test('a POST without a body says it needs a JSON object and its required fields', async () => {
    const admin = await a.token('admin')
    const games = await a.req('POST', '/api/games', { token: admin })
    expect(games.status).toBe(400)
    expect(games.body.message).toBe(
      'body: required: a JSON object with name, genre, platforms, timezone, defaultCurrency',
    )
    const login = await a.req('POST', '/api/v1/auth/login', { token: null })
    expect(login.status).toBe(400)
    expect(login.body.message).toBe('body: required: a JSON object with username, password')
    // A field left out of a body is `required` too.
    const partial = await a.req('POST', '/api/v1/auth/login', { token: null, body: { username: 'admin' } })
    expect(partial.body.message).toBe('body.password: required')
  })
})

describe.if(engines.includes('postgres'))('a database outage around login', () => {
  const pg = new URL(PG_URL)
  const proxy = tcpProxy({ hostname: pg.hostname, port: Number(pg.port || 5432) })
  let a: TestApp
  beforeAll(async () => {
    a = await makeApp('postgres', {
      config: { database: { url: pgUrlWith({ host: '127.0.0.1', port: proxy.port }), pool: 3 } },
    })
  })
  afterAll(async () => {
    await a.stop()
    proxy.stop()
  })

  test('login, token refresh (both families) and /me answer 503, never 401 or 404', async () => {
    const login = await a.req('POST', '/api/auth/login', {
      token: null,
      body: { email: 'admin@localhost', password: ADMIN_PASSWORD },
    })
    expect(login.status).toBe(200)
    const { token: accessToken, refreshToken } = login.body
    for (const mode of ['refuse', 'hang'] as const) {
      proxy.set(mode)
      const answers = [
        await a.req('POST', '/api/v1/auth/login', {
          token: null,
          body: { username: 'admin', password: ADMIN_PASSWORD },
        }),
        await a.req('POST', '/api/auth/refresh', { token: null, body: { refreshToken } }),
        await a.req('POST', '/api/v1/auth/refresh', { token: accessToken }),
        await a.req('GET', '/api/v1/auth/me', { token: accessToken }),
      ].map((r) => r.status)
      expect({ mode, answers }).toEqual({ mode, answers: [503, 503, 503, 503] })
    }
    proxy.set('pass')
  }, 30_000)
})

describe('the command line', () => {
  const dirs: string[] = []
  afterAll(() => {
    for (const d of dirs) rmSync(d, { recursive: true, force: true })
  })
  async function serve(env: Record<string, string>) {
    const dir = mkdtempSync(join(tmpdir(), 'liveops-errors-'))
    dirs.push(dir)
    const p = Bun.spawn([process.execPath, main, 'serve'], {
      env: {
        PATH: process.env.PATH ?? '',
        HOME: dir,
        DATA_DIR: join(dir, 'data'),
        HOST: '127.0.0.1',
        ...env,
      },
      cwd: dir,
      stdout: 'pipe',
      stderr: 'pipe',
    })
    const timer = setTimeout(() => p.kill(), 15_000)
    const [out, err, code] = await Promise.all([
      new Response(p.stdout).text(),
      new Response(p.stderr).text(),
      p.exited,
    ])
    clearTimeout(timer)
    let written: string[] = []
    try {
      written = readdirSync(join(dir, 'data'))
    } catch {}
    return { out, err, code, written }
  }

  test('a short ADMIN_PASSWORD: one line, exit 2, nothing written', async () => {
    const r = await serve({ ADMIN_PASSWORD: 'short', PORT: '0' })
    expect(r.code).toBe(2)
    expect(r.err.trim().split('\n')).toHaveLength(1)
    expect(r.err).toContain('ADMIN_PASSWORD')
    expect(r.err).toContain('at least 8 characters')
    expect(r.written).toEqual([])
  }, 20_000)

  test('a port in use: one line naming it, exit 2, nothing written', async () => {
    const taken = Bun.serve({ hostname: '127.0.0.1', port: 0, fetch: () => new Response('taken') })
    try {
      const r = await serve({ ADMIN_PASSWORD: 'long-enough-1', PORT: String(taken.port) })
      expect(r.code).toBe(2)
      expect(r.err.trim().split('\n')).toHaveLength(1)
      expect(r.err).toContain(`port ${taken.port}`)
      expect(r.err).toContain('in use')
      expect(r.written).toEqual([])
      expect(r.out).toBe('')
    } finally {
      taken.stop(true)
    }
  }, 20_000)

  test('liveops --version prints the version', async () => {
    for (const flag of ['--version', 'version']) {
      const p = Bun.spawnSync([process.execPath, main, flag])
      expect(p.exitCode).toBe(0)
      expect(p.stdout.toString().trim()).toBe(`liveops ${pkg.version}`)
    }
  })
})
