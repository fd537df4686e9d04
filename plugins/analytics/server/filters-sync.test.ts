import { expect, test } from 'bun:test'
import { Elysia } from 'elysia'
import { migrate } from '../../../core/db'
import { heldReads } from '../../../test/held-reads'
import { forEachEngine, rawDb } from '../../../test/helpers'
import type { IngestFilter, IngestService } from '../../ingest/types'
import { migrations } from '../migrations'
import { filterRoutes } from './filters'

// Ingestion follows the sampling filters from memory. A filter changed through another instance
// reaches it by a change notice; when the notice is lost, by the periodic load (it never did:
// only notices carried changes). A notice's read begun before this instance's own save must not
// put the older filter back.

forEachEngine((engine) => {
  test("the filters reach ingestion without their notice, and a notice's older read does not undo a save", async () => {
    const { db, done } = await rawDb(engine)
    try {
      await migrate(db, [{ plugin: 'analytics', migrations: migrations.filter((m) => m.id === 3) }])
      const held = heldReads(db, 'get', (sql) => sql.includes('FROM analytics_filters WHERE'))
      const applied: Array<[string, number]> = []
      const ingest = {
        setFilter: (g: string, e: string, f: IngestFilter | undefined) =>
          applied.push([`${g}/${e}`, f?.samplingRate ?? 1]),
      } as unknown as IngestService
      const heard = new Map<string, (d: Record<string, unknown>, origin: string) => Promise<void>>()
      const changes = {
        on: (topic: string, fn: (d: Record<string, unknown>, origin: string) => Promise<void>) =>
          heard.set(topic, fn),
        publish: async () => undefined,
      }
      const games = { environment: async () => ({}) }
      const filters = filterRoutes(new Elysia() as never, held.db, games as never, ingest, changes as never)
      // Another instance saved a filter, and its notice never came: the periodic load applies it.
      await db.run(
        'INSERT INTO analytics_filters (game_id, env, sampling_ppm, drop_events, updated_at) VALUES (?, ?, ?, ?, ?)',
        ['lantern', 'prod', 250_000, '[]', Date.now()],
      )
      await filters.load()
      expect(applied.at(-1)).toEqual(['lantern/prod', 0.25])
      // A notice arrives; while its read is held, this instance saves.
      const release = held.hold()
      const hearing = heard.get('analytics.filters')!({ gameId: 'lantern', env: 'prod' }, 'remote')
      await held.reached(1)
      const put = await filters.routes.handle(
        new Request('http://liveops.test/api/v1/analytics/filters?gameId=lantern&env=prod', {
          method: 'PUT',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ samplingRate: 0.5 }),
        }),
      )
      expect(put.status).toBe(200)
      expect(applied.at(-1)).toEqual(['lantern/prod', 0.5])
      release()
      await hearing
      expect(applied.at(-1)).toEqual(['lantern/prod', 0.5])
      expect(held.reads()).toBe(3)
    } finally {
      await done()
    }
  })
})
