import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { Elysia } from 'elysia'
import { definePlugin } from '../../core/plugin'
import motd, { lifecycle } from '../example/motd'
import { type TestApp, forEachEngine, makeApp } from '../helpers'

/**
 * The plugin contract (docs/plugins.md), checked through the example plugin `test/example/motd.ts`,
 * which declares one of each extension point: permissions, error family, health, metrics,
 * secrets, bus (both ways), migrations, settings with an env override, a service, start and stop.
 */
forEachEngine((engine) => {
  let a: TestApp
  let gameId: string
  beforeAll(async () => {
    a = await makeApp(engine, {
      plugins: {
        games: {},
        motd: {
          translate_key: 'tk-0123456789-wxyz',
          archive_url: 'https://bob:hunter2-long@archive.example/x?token=abcdef123456',
        },
      },
      extraPlugins: { motd },
      env: { MOTD_GREETING: 'Hello from the environment' },
      config: { telemetry: { prometheus: { enabled: true, path: '/metrics/prometheus' } } },
    })
    const g = await a.req('POST', '/api/games', {
      token: await a.token('admin'),
      body: {
        name: 'Contract Quest',
        genre: 'PUZZLE',
        platforms: ['WEB'],
        timezone: 'Asia/Tokyo',
        defaultCurrency: 'JPY',
      },
    })
    gameId = g.body.id
  })
  afterAll(() => a.stop())

  const put = async (role: string | null, body: unknown, id = gameId) =>
    a.req('PUT', `/api/v1/motd/${id}`, { token: role ? await a.token(role) : null, body })

  describe('a plugin declares what it adds', () => {
    test('permissions: the declared grant holds (analyst writes, operator and viewer only read), and the role table is the union', async () => {
      expect((await put('analyst', { text: 'Double XP weekend' })).status).toBe(200)
      expect((await put('operator', { text: 'x' })).status).toBe(403)
      expect((await put('viewer', { text: 'x' })).status).toBe(403)
      expect((await put(null, { text: 'x' })).status).toBe(401)
      const read = await a.req('GET', `/api/v1/motd/${gameId}`, { token: await a.token('viewer') })
      expect(read.body).toMatchObject({ text: 'Double XP weekend', postedBy: 'analyst-user' })
      const table = a.auth.permissions.table()
      expect(table.motd).toEqual({
        read: ['admin', 'operator', 'analyst', 'developer', 'viewer'],
        write: ['admin', 'analyst'],
      })
      expect(table.games.write).toEqual(['admin', 'operator'])
    })

    test('authentication and permission come before the body is read or validated', async () => {
      const bad = { text: 42, extra: true }
      const anon = await put(null, bad)
      expect(anon.status).toBe(401)
      expect(JSON.stringify(anon.body)).not.toContain('text')
      const expired = await a.req('PUT', `/api/v1/motd/${gameId}`, {
        token: 'eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ4IiwiZXhwIjoxfQ.c2ln',
        body: bad,
      })
      expect(expired.status).toBe(401)
      const malformed = await a.req('PUT', `/api/v1/motd/${gameId}`, {
        raw: '{"text":',
        headers: { 'content-type': 'application/json' },
      })
      expect(malformed.status).toBe(401)
      expect((await put('viewer', bad)).status).toBe(403)
      const invalid = await put('analyst', bad)
      expect(invalid.status).toBe(400)
    })

    test('its API family error body: /api/v1/motd answers {error, message, details}, other /api/v1 routes the envelope', async () => {
      const invalid = await put('analyst', { text: '<b>bold</b>' })
      expect(invalid.status).toBe(400)
      expect(invalid.body).toEqual({
        error: 'bad_request',
        message: 'body.text: must not contain markup',
        details: { field: 'body.text', reason: 'must not contain markup' },
      })
      const missing = await put('analyst', { text: 'hi' }, 'no-such-game')
      expect(missing.status).toBe(404)
      expect(Object.keys(missing.body).sort()).toEqual(['details', 'error', 'message'])
      const envelope = await a.req('GET', '/api/v1/monitoring/metrics')
      expect(Object.keys(envelope.body).sort()).toEqual(['code', 'data', 'message'])
    })

    test('settings: validated under plugins.motd, env override applied, secrets masked on read', async () => {
      const read = await a.req('GET', '/api/v1/no-motd-here', { token: await a.token('viewer') })
      expect(read.status).toBe(404)
      const other = await makeApp(engine, { plugins: { games: {}, motd: {} }, extraPlugins: { motd } })
      try {
        const r = await other.req('GET', `/api/v1/motd/${gameId}`, { token: await other.token('viewer') })
        expect(r.body.text).toBe('Welcome back!')
      } finally {
        await other.stop()
      }
      const fresh = await a.req('GET', '/api/v1/motd/never-posted', { token: await a.token('viewer') })
      expect(fresh.body.text).toBe('Hello from the environment')
      const s = await a.req('GET', '/api/v1/motd-settings', { token: await a.token('viewer') })
      expect(s.body).toEqual({
        greeting: 'Hello from the environment',
        translate_key: 'set:wxyz',
        archive_url: 'https://set:set%3Along@archive.example/set?token=set%3A3456',
        healthy: true,
      })
      expect(JSON.stringify(s.body)).not.toContain('hunter2')
      await expect(
        makeApp(engine, { plugins: { games: {}, motd: { greting: 'typo' } }, extraPlugins: { motd } }),
      ).rejects.toThrow('plugins.motd')
    })

    test('health: its check shows in /healthz, /readyz and svc_health_check_up; a failing one turns them 503', async () => {
      const h = await a.req('GET', '/healthz')
      expect(h.status).toBe(200)
      expect(h.body.checks.motd).toEqual({ status: 'up', messages: 1 })
      expect(h.body.checks.database.status).toBe('up')
      const down = await makeApp(engine, {
        plugins: { games: {}, motd: { healthy: false } },
        extraPlugins: { motd },
        config: { telemetry: { prometheus: { enabled: true, path: '/metrics/prometheus' } } },
      })
      try {
        const viewer = await down.token('viewer')
        for (const path of ['/healthz', '/readyz']) {
          // A signed-in user (any role reads `ops`) gets the error's text.
          const r = await down.req('GET', path, { token: viewer })
          expect(r.status).toBe(503)
          expect(r.body).toMatchObject({
            status: 'unavailable',
            checks: { motd: { status: 'down', error: 'told to be down' } },
          })
          // Without credentials, or with a forged one: the same status, no error text.
          for (const token of [undefined, 'forged']) {
            const anon = await down.req('GET', path, { token })
            expect(anon.status).toBe(503)
            expect(anon.body.checks.motd).toEqual({ status: 'down' })
            expect(JSON.stringify(anon.body)).not.toContain('told to be down')
          }
        }
        const text = (await down.req('GET', '/metrics/prometheus')).body as string
        expect(text).toContain('svc_health_check_up{check="motd"} 0')
        expect(text).toContain('svc_health_check_up{check="database"} 1')
      } finally {
        await down.stop()
      }
    })

    test('metrics: its own series appear in the exposition', async () => {
      const text = (await a.req('GET', '/metrics/prometheus')).body as string
      expect(text).toContain(`svc_motd_posts_total{game_id="${gameId}"}`)
    })

    test('migrations: its tables exist and the ledger records them under its name', async () => {
      const rows = await a.db.all<{ plugin: string; id: number }>(
        "SELECT plugin, id FROM liveops_migrations WHERE plugin = 'motd'",
      )
      expect(rows.map((r) => Number(r.id))).toEqual([1])
    })

    test('bus: it raises alert.fired without knowing who listens, and reacts to certificate_expired without importing its producer', async () => {
      const heard: string[] = []
      const off = a.bus.on('alert.fired', (e) => {
        heard.push(`${e.source}:${e.alert_id}`)
      })
      await put('analyst', { text: 'Server merge tonight' })
      off()
      expect(heard).toEqual([`motd:motd:${gameId}`])
      await a.bus.emit('certificate_expired', {
        id: 'c1',
        domain: 'play.example',
        port: 443,
        valid_to: '2026-01-01T00:00:00.000Z',
      })
      const r = await a.req('GET', `/api/v1/motd/${gameId}`, { token: await a.token('viewer') })
      expect(r.body).toMatchObject({
        text: 'Maintenance: play.example is being renewed',
        postedBy: 'certificates',
      })
    })
  })

  describe('core refuses a plugin that breaks the contract, before anything serves', () => {
    const bad = (name: string, manifest: Partial<Parameters<typeof definePlugin>[0]>) =>
      makeApp(engine, {
        plugins: { games: {}, [name]: {} },
        extraPlugins: {
          [name]: definePlugin({ name, setup: () => new Elysia({ name }), ...manifest }),
        },
      })

    test('a service of a plugin not named in dependsOn', async () => {
      await expect(
        bad('sneaky', {
          setup(ctx) {
            ctx.service('games')
            return new Elysia({ name: 'sneaky' })
          },
        }),
      ).rejects.toThrow("plugin 'sneaky' uses service 'games' of 'games' without listing it in dependsOn")
    })

    test('a route naming a permission area nobody declared', async () => {
      await expect(
        bad('typo', {
          setup: (ctx) =>
            new Elysia({ name: 'typo' })
              .use(ctx.guard)
              .get('/api/typo', () => 'x', { permission: 'gmaes:read' }),
        }),
      ).rejects.toThrow("permission 'gmaes:read' names no declared area")
    })

    test('an area declared twice, or granted to an unknown role', async () => {
      await expect(bad('twice', { permissions: { games: { write: [] } } })).rejects.toThrow(
        "permission area 'games' declared by both 'games' and 'twice'",
      )
      await expect(bad('odd', { permissions: { odd: { write: ['superuser' as 'admin'] } } })).rejects.toThrow(
        "grants unknown role 'superuser'",
      )
    })

    test('a health check name registered twice', async () => {
      await expect(
        bad('dbcheck', {
          setup(ctx) {
            ctx.health('database', () => ({ status: 'up' }))
            return new Elysia({ name: 'dbcheck' })
          },
        }),
      ).rejects.toThrow("health check 'database' registered twice")
    })
  })

  test('one way to start and stop: onStart ran before the app was handed out, onStop runs on stop', async () => {
    lifecycle.length = 0
    const b = await makeApp(engine, { plugins: { games: {}, motd: {} }, extraPlugins: { motd } })
    expect(lifecycle).toEqual(['start'])
    await b.stop()
    expect(lifecycle).toEqual(['start', 'stop'])
  })
})
