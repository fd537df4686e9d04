import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { readFileSync, statSync } from 'node:fs'
import { join } from 'node:path'
import { type TestApp, forEachEngine, makeApp } from '../../test/helpers'
import { SECRET_FILE } from './secret'
import { game, signed } from './testing'

/*
 * Issue 38 point 5: the quick start reaches ingestion. Without a configured secret one is
 * generated on first start, kept in the data directory like the JWT secret (0600), readable by
 * admins and developers through the API (others 403); a first signed event is then accepted.
 */
forEachEngine((engine) => {
  describe('a generated ingest signing secret', () => {
    let a: TestApp
    beforeAll(async () => {
      a = await makeApp(engine, { plugins: { games: {}, ingest: { purge_interval_minutes: 0 } } })
    })
    afterAll(() => a.stop())

    test('kept in data_dir (0600), read by admins and developers only, and it signs a first event', async () => {
      const file = join(a.dataDir, SECRET_FILE)
      expect(statSync(file).mode & 0o777).toBe(0o600)
      const stored = readFileSync(file, 'utf8').trim()
      expect(stored.length).toBeGreaterThanOrEqual(32)
      for (const role of ['admin', 'developer']) {
        const r = await a.req('GET', '/api/v1/ingest/secret', { token: await a.token(role) })
        expect([role, r.status]).toEqual([role, 200])
        expect(r.body.data).toMatchObject({ secret: stored, source: 'generated' })
      }
      for (const role of ['operator', 'analyst', 'viewer'])
        expect([
          role,
          (await a.req('GET', '/api/v1/ingest/secret', { token: await a.token(role) })).status,
        ]).toEqual([role, 403])
      expect((await a.req('GET', '/api/v1/ingest/secret', { token: null })).status).toBe(401)

      const admin = await a.token('admin')
      const g = await a.req('POST', '/api/games', { token: admin, body: game })
      const r = await signed(
        a,
        '/api/ingest/events',
        [{ event: 'first_open', ts: String(Date.now()), game_id: g.body.id, env: 'prod', uid: 'p1' }],
        { secret: stored },
      )
      expect(r.status).toBe(200)
    })
  })

  test('a configured secret is the one shown (source configured) and nothing is generated', async () => {
    const a = await makeApp(engine, {
      plugins: { games: {}, ingest: { signing_secret: 'configured-secret-1' } },
    })
    try {
      const r = await a.req('GET', '/api/v1/ingest/secret', { token: await a.token('developer') })
      expect(r.body.data).toMatchObject({ secret: 'configured-secret-1', source: 'configured' })
      expect(() => statSync(join(a.dataDir, SECRET_FILE))).toThrow()
    } finally {
      await a.stop()
    }
  })
})
