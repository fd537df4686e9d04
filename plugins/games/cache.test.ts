import { expect, test } from 'bun:test'
import { type Db, migrate } from '../../core/db'
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
      let hold: Promise<void> | undefined
      let reads = 0
      const held = new Proxy(db, {
        get(target, key) {
          if (key === 'get')
            return async (sql: string, params?: unknown[]) => {
              const row = await target.get(sql, params as never)
              if (sql.includes('FROM environments WHERE game_id = ? AND name = ?')) {
                reads++
                await hold
              }
              return row
            }
          const v = Reflect.get(target, key)
          return typeof v === 'function' ? v.bind(target) : v
        },
      }) as Db
      const store = gamesStore(held, 60_000)
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
      let release = () => {}
      hold = new Promise((r) => {
        release = r
      })
      const reading = store.service.environment(game.id, 'qa-lab')
      while (reads < 1) await Bun.sleep(1)
      hold = undefined
      await store.updateEnv(game.id, 'qa-lab', { settings: { pii: { email: 'mask' } } })
      release()
      expect((await reading)?.settings.pii.email).toBe('mask')
      expect((await store.service.environment(game.id, 'qa-lab'))?.settings.pii.email).toBe('mask')
      // The read that met the change was read again.
      expect(reads).toBe(2)
    } finally {
      await done()
    }
  })
})
