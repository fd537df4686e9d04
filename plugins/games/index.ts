import { Type as T } from '@sinclair/typebox'
import { definePlugin } from '../../core/plugin'
import m001 from './migrations/001_games.sql' with { type: 'text' }
import { gamesRoutes } from './routes'
import { gamesStore } from './store'
import './types'

/**
 * The game and environment registry (spec 1), per-environment settings, and the API keys bound
 * to an environment. Provides `games` (see `types.ts`) to the plugins that depend on it.
 */
export default definePlugin({
  name: 'games',
  // Spec 1: the operator role is "game management".
  permissions: { games: { write: ['operator'] }, environments: { write: ['operator'] } },
  config: T.Object(
    {
      /** How stale a cached game or environment read may be, in ms; bounds how late other instances' writes show. */
      cache_ttl_ms: T.Integer({ minimum: 0, default: 1000 }),
    },
    { additionalProperties: false },
  ),
  migrations: [{ id: 1, name: 'games', sql: m001 }],
  setup(ctx) {
    // Other instances drop their cached copy when told (LISTEN/NOTIFY); the TTL is the safety net.
    const store = gamesStore(ctx.db, ctx.config.cache_ttl_ms, (c) => void ctx.changes.publish('games', c))
    ctx.changes.on('games', (d, origin) => {
      if (origin === 'remote')
        store.changedElsewhere({
          gameId: String(d.gameId),
          environment: d.environment ? String(d.environment) : undefined,
          deleted: d.deleted === true,
        })
    })
    // Rows found and ids that named none (at most 1,000 of each kind: anyone may ask for made-up ids).
    const cached = ctx.metrics.gauge('svc_games_cache_entries', 'Reads by id the games cache holds', [
      'cache',
      'kind',
    ])
    ctx.metrics.collect(() => {
      for (const [cache, size] of Object.entries(store.cached())) {
        cached.set({ cache, kind: 'rows' }, size.hits)
        cached.set({ cache, kind: 'misses' }, size.misses)
      }
    })
    ctx.provide('games', store.service)
    return gamesRoutes(ctx, store)
  },
})
