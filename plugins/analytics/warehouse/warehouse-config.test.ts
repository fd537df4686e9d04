import { describe, expect, test } from 'bun:test'
import { join } from 'node:path'
import postgres from 'postgres'
import { PG_URL, type TestApp, forEachEngine, makeApp } from '../../../test/helpers'
import { ingestMigrations } from '../../ingest/migrations'
import { SECRET, game, signed } from '../../ingest/testing'
import { warehouseSuite } from './warehouse-fixture'

// The warehouse store configuration (moved from ingest, issue 16).
forEachEngine((engine) => {
  const fx = warehouseSuite(engine)

  describe('configuration', () => {
    test('no warehouse: 503 service_unavailable', async () => {
      const b = await makeApp(engine, {
        plugins: { games: {}, ingest: {}, analytics: { warehouse: { dsn: 'none' } } },
      })
      try {
        // Every warehouse endpoint of spec 1 section 4 (rule 3 of section 7), with a valid query.
        const tok = await b.token('admin')
        for (const path of [
          'warehouse/dau',
          'warehouse/online',
          'warehouse/revenue',
          'invocations/summary',
          'invocations/trend',
          'invocations',
        ]) {
          const w = await b.req('GET', `/api/v1/analytics/${path}?gameId=g&env=prod`, { token: tok })
          expect([path, w.status, w.body.error]).toEqual([path, 503, 'service_unavailable'])
        }
      } finally {
        await b.stop()
      }
    })

    test('a separate warehouse store named by WAREHOUSE_DSN', async () => {
      const dir = fx.a.dataDir
      const b = await makeApp(engine, {
        plugins: { games: {}, ingest: { signing_secret: SECRET }, analytics: {} },
        env: { WAREHOUSE_DSN: join(dir, 'warehouse.sqlite') },
      })
      try {
        const tok = await b.token('admin')
        const g = await b.req('POST', '/api/games', { token: tok, body: game })
        const r = await signed(b, '/api/ingest/events', [
          { event: 'login', uid: 'w1', ts: String(Date.now()), game_id: g.body.id, env: 'prod' },
        ])
        expect(r.status).toBe(200)
        const dau = await b.req(
          'GET',
          `/api/v1/analytics/warehouse/dau?gameId=${g.body.id}&env=prod&days=1`,
          { token: tok },
        )
        expect(dau.body.points[0].dau).toBe(1)
        const main = await b.db.get<{ n: number }>(
          "SELECT COUNT(*) AS n FROM liveops_migrations WHERE plugin = 'ingest'",
        )
        expect(Number(main?.n)).toBe(ingestMigrations.length)
        // The event went to the warehouse file, not the main store.
        const inMain = await b.db.get<{ n: number }>('SELECT COUNT(*) AS n FROM ingest_events')
        expect(Number(inMain?.n)).toBe(0)
      } finally {
        await b.stop()
      }
    })

    // In the [postgres] block, which exists when PostgreSQL answers; the main store is SQLite all the same.
    test.skipIf(engine !== 'postgres')(
      'a PostgreSQL warehouse named by WAREHOUSE_DSN beside a SQLite main store',
      async () => {
        const name = `wh_${crypto.randomUUID().replace(/-/g, '').slice(0, 16)}`
        const admin = postgres(PG_URL, { max: 1, onnotice: () => undefined })
        await admin.unsafe(`CREATE DATABASE ${name}`)
        const url = new URL(PG_URL)
        url.pathname = `/${name}`
        const wh = postgres(url.toString(), { max: 1, onnotice: () => undefined })
        let b: TestApp | undefined
        try {
          b = await makeApp('sqlite', {
            plugins: {
              games: {},
              ingest: { signing_secret: SECRET, purge_interval_minutes: 0 },
              analytics: {},
            },
            env: { WAREHOUSE_DSN: url.toString() },
          })
          expect(b.db.dialect).toBe('sqlite')
          const tok = await b.token('admin')
          const g = await b.req('POST', '/api/games', { token: tok, body: game })
          const r = await signed(b, '/api/ingest/events', [
            { event: 'login', uid: 'pg-1', ts: String(Date.now()), game_id: g.body.id, env: 'prod' },
            { event: 'login', uid: 'pg-2', ts: String(Date.now()), game_id: g.body.id, env: 'prod' },
          ])
          expect(r.status).toBe(200)
          const dau = await b.req(
            'GET',
            `/api/v1/analytics/warehouse/dau?gameId=${g.body.id}&env=prod&days=1`,
            { token: tok },
          )
          expect(dau.body.points).toEqual([
            expect.objectContaining({ gameId: g.body.id, env: 'prod', dau: 2, newUsers: 2 }),
          ])
          // The events and the ingest migrations are in the PostgreSQL database...
          const [pg] = await wh`SELECT COUNT(*)::int AS n FROM ingest_events WHERE game_id = ${g.body.id}`
          expect(pg.n).toBe(2)
          const [mig] = await wh`SELECT COUNT(*)::int AS n FROM liveops_migrations WHERE plugin = 'ingest'`
          expect(mig.n).toBe(ingestMigrations.length)
          // ...and no event is in the main SQLite file.
          const inMain = await b.db.get<{ n: number }>('SELECT COUNT(*) AS n FROM ingest_events')
          expect(Number(inMain?.n)).toBe(0)
        } finally {
          await b?.stop()
          await wh.end()
          await admin.unsafe(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)
          await admin.end()
        }
      },
      // A database created and dropped, and an app started on it: seconds on a shared machine.
      30_000,
    )
  })
})
