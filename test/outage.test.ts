import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { existsSync } from 'node:fs'
import { SECRET, game, signed } from '../plugins/ingest/testing'
import { ADMIN_PASSWORD, type TestApp, type TestResponse, engines, makeApp, until } from './helpers'
import { type OwnPostgres, ownPostgres } from './own-postgres'

/**
 * Issue 36 point 1: a PostgreSQL that goes away for a while. The test runs a PostgreSQL of its
 * own (initdb, pg_ctl on a free port) and stops and starts it under the real app: writes, reads,
 * logins and signed ingestion (whose transactions run on the ingest persist thread's own
 * connections) answer 503 with Retry-After while it is away, never 500 and never 401, and every
 * connection works again once it is back, with no connection of the outage failing later.
 */
const haveServer = existsSync('/usr/lib/postgresql/15/bin/initdb') || !!process.env.PG_BIN

describe.if(engines.includes('postgres') && haveServer)(
  'a PostgreSQL of its own, stopped and started',
  () => {
    let pg: OwnPostgres
    let a: TestApp
    let admin: string
    let gameId: string
    beforeAll(async () => {
      pg = ownPostgres()
      a = await makeApp('postgres', {
        pgUrl: pg.url,
        config: { database: { pool: 4 } },
        plugins: { games: {}, ingest: { signing_secret: SECRET, purge_interval_minutes: 0 } },
      })
      admin = await a.token('admin')
      gameId = (await a.req('POST', '/api/games', { token: admin, body: game })).body.id
    }, 60_000)
    afterAll(async () => {
      await a?.stop().catch(() => undefined)
      pg?.destroy()
    })

    let n = 0
    const requests = {
      write: () => a.req('POST', '/api/games', { token: admin, body: { ...game, name: `Outage ${++n}` } }),
      read: () => a.req('GET', '/api/games', { token: admin }),
      ingest: () =>
        signed(a, '/api/ingest/events', [
          { event: 'login', ts: String(Date.now()), game_id: gameId, env: 'prod', uid: `u${++n}` },
        ]),
      login: () =>
        a.req('POST', '/api/auth/login', { body: { email: 'admin@localhost', password: ADMIN_PASSWORD } }),
    }
    const refused = (r: TestResponse) =>
      r.status === 503 && Number(r.headers.get('retry-after')) > 0 && r.body.error === 'storage_unavailable'

    test('stopped: every kind of request answers 503 storage_unavailable with Retry-After, /readyz 503; started: all recover', async () => {
      for (const [kind, send] of Object.entries(requests))
        expect([kind, (await send()).status < 300]).toEqual([kind, true])

      pg.stop('fast')
      for (const [kind, send] of Object.entries(requests))
        for (const attempt of [1, 2]) {
          const r = await send()
          expect([kind, attempt, r.status, refused(r)]).toEqual([kind, attempt, 503, true])
        }
      const ready = await a.req('GET', '/readyz')
      expect(ready.status).toBe(503)
      expect(ready.body.checks.database.status).toBe('down')
      expect(Number(ready.headers.get('retry-after'))).toBeGreaterThan(0)

      pg.start()
      await until(
        async () => {
          if ((await a.req('GET', '/readyz')).status === 200) return true
          await Bun.sleep(50)
        },
        { ms: 20_000, what: '/readyz 200 again' },
      )
      // Each pool finds the server back on its own probe (every 500 ms): the login throttle's
      // counters and the ingest persist thread's connections may follow /readyz by a probe.
      for (const [kind, send] of Object.entries(requests))
        await until(
          async () => {
            if ((await send()).status < 300) return true
            await Bun.sleep(50)
          },
          { ms: 20_000, what: `${kind} answering 2xx again` },
        )
      // Every connection of the outage was replaced: forty requests in a row all succeed (one
      // ingestion connection kept failing for 30 s after a restart before).
      const after: Array<[string, number]> = []
      for (let i = 0; i < 10; i++)
        for (const [kind, send] of Object.entries(requests)) after.push([kind, (await send()).status])
      expect(after.filter(([, status]) => status >= 300)).toEqual([])
    }, 90_000)

    test('restarted as after a crash, under load: each request answers 2xx or 503 with Retry-After, never 500', async () => {
      const seen: Array<[string, number, boolean]> = []
      let going = true
      const load = (async () => {
        while (going)
          await Promise.all(
            Object.entries(requests).map(async ([kind, send]) => {
              const r = await send()
              seen.push([kind, r.status, r.status < 300 || refused(r)])
              if (r.status >= 300) await Bun.sleep(20)
            }),
          )
      })()
      // Five rounds of the four kinds, a login's Argon2id among them: seconds on a loaded machine.
      await until(() => seen.length >= 20, { ms: 30_000, what: 'twenty answers before the crash' })
      pg.stop('immediate')
      await until(() => seen.some(([, status]) => status === 503), {
        ms: 10_000,
        what: 'a 503 during the outage',
      })
      pg.start()
      const before = seen.length
      await until(() => seen.length > before + 40 && seen.slice(-40).every(([, status]) => status < 300), {
        ms: 30_000,
        what: 'forty successes in a row after the restart',
      })
      going = false
      await load
      expect(seen.filter(([, , fine]) => !fine)).toEqual([])
    }, 90_000)
  },
)
