import { expect, test } from 'bun:test'
import { migrate } from '../../core/db'
import { heldReads } from '../../test/held-reads'
import { forEachEngine, rawDb } from '../../test/helpers'
import games from './index'
import { gamesStore } from './store'

// Reads by id fill a cache (kept a minute here). A read under way when this instance changed the
// row (on PostgreSQL it waits on the network while the changing request runs) must not put the
// older row back: an environment's new PII policy went unapplied for the cache's lifetime.

forEachEngine((engine) => {
  test('an environment read begun before a settings change does not cache the old settings', async () => {
    const { db, done } = await rawDb(engine)
    try {
      await migrate(db, [{ plugin: 'games', migrations: games.migrations ?? [] }])
      const held = heldReads(db, 'get', (sql) =>
        sql.includes('FROM environments WHERE game_id = ? AND name = ?'),
      )
      const store = gamesStore(held.db, 60_000)
      const game = await store.createGame({
        name: 'Kite Harbour',
        genre: 'PUZZLE',
        platforms: ['ANDROID'],
        timezone: 'Pacific/Auckland',
        defaultCurrency: 'NZD',
      })
      await store.createEnv(game.id, { name: 'qa-lab', type: 'STAGING' })
      // As when another instance changed the game: the cached rows go.
      store.changedElsewhere({ gameId: game.id, deleted: false })
      const release = held.hold()
      const reading = store.service.environment(game.id, 'qa-lab')
      await held.reached(1)
      await store.updateEnv(game.id, 'qa-lab', { settings: { pii: { email: 'mask' } } })
      release()
      expect((await reading)?.settings.pii.email).toBe('mask')
      expect((await store.service.environment(game.id, 'qa-lab'))?.settings.pii.email).toBe('mask')
      // The read that met the change was read again.
      expect(held.reads()).toBe(2)
    } finally {
      await done()
    }
  })
})
