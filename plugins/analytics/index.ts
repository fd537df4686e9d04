import { Elysia } from 'elysia'
import { definePlugin } from '../../core/plugin'
import '../games/types'
import '../ingest/types'
import { behaviorAnalytics } from './behavior/behavior'
import { BehaviorRollup } from './behavior/behavior-rollup'
import { behaviorRoutes } from './behavior/behavior-routes'
import { levelAnalytics } from './behavior/levels'
import { gameAnalytics } from './game/game'
import { gameRoutes } from './game/game-routes'
import { migrations } from './migrations'
import { RealtimeHub, realtimeStore } from './realtime/realtime'
import { MinuteRollup } from './realtime/realtime-rollup'
import { realtimeRoutes } from './realtime/realtime-routes'
import { AnalyticsConfig } from './schema'
import { filterRoutes } from './server/filters'
import { serverAnalytics } from './server/server'
import { serverRoutes } from './server/server-routes'
import { AnalyticsRollup } from './store/rollup'
import { warehouseStore } from './warehouse/warehouse'
import { warehouseRoutes } from './warehouse/warehouse-routes'

/**
 * Game and server analytics (spec 1) over the event store: it owns the rollups registered into
 * ingest's commit (user-days, first sight, day counters, online sketches, invocation hours) and
 * every `/api/v1/analytics/*` route, the warehouse endpoints included. Without it, ingest still
 * stores events and those routes answer 404.
 */
export default definePlugin({
  name: 'analytics',
  dependsOn: ['ingest', 'games'],
  config: AnalyticsConfig,
  env: { WAREHOUSE_DSN: 'warehouse.dsn' },
  migrations,
  // Spec 1: the server-side writes add analytics data; admins only by default. Reads: every role.
  permissions: { analytics: { write: [] } },
  errors: [{ prefix: '/api/v1/analytics', body: 'analytics' }],
  setup(ctx) {
    const ingest = ctx.service('ingest')
    const dsn = ctx.config.warehouse.dsn.trim()
    // Raw rows and rollups share a transaction, so the warehouse store is ingest's event store.
    ingest.useStore(dsn)
    const games = ctx.service('games')
    const timezone = (gameId: string) => games.timezone(gameId)
    const rollup = new AnalyticsRollup({ plugin: 'analytics', migrations }, timezone)
    ingest.registerRollup(rollup)
    // After the analytics rollup: its migrations create the realtime minute table in a separate event store.
    ingest.registerRollup(new MinuteRollup())
    // Its tables come with the analytics migrations, which the rollup above carries to a separate store.
    const behaviorRollup = new BehaviorRollup(undefined, timezone)
    ingest.registerRollup(behaviorRollup)
    // A game's days follow its time zone from its next event on.
    games.onChange((c) => {
      if (!c.environment) {
        rollup.forget(c.gameId)
        behaviorRollup.forget(c.gameId)
      }
    })
    const none = dsn === 'none' || dsn === ''
    // Built at start, when the event store is open (ingest starts first).
    let warehouse: ReturnType<typeof warehouseStore> | undefined
    let game: ReturnType<typeof gameAnalytics> | undefined
    let server: ReturnType<typeof serverAnalytics> | undefined
    let realtime: ReturnType<typeof realtimeStore> | undefined
    const hub = new RealtimeHub(
      ctx.config.realtime,
      async (s, now) => {
        const tz = await games.timezone(s.gameId)
        return tz === undefined ? undefined : started(realtime).snapshot(s, tz, now)
      },
      ctx.log,
    )
    ctx.provide('realtime', hub)
    const clients = ctx.metrics.gauge('svc_analytics_realtime_clients', 'Connected realtime (SSE) clients')
    ctx.metrics.collect(() => clients.set(hub.clients()))
    ctx.onStop(() => hub.stop())
    // Streams never end by themselves: a stopping server ends them first (graceful drain).
    ctx.bus.on('server.draining', () => hub.stop())
    let behavior: ReturnType<typeof behaviorAnalytics> | undefined
    let levels: ReturnType<typeof levelAnalytics> | undefined
    const filters = filterRoutes(ctx.guard, ctx.db, games, ingest, ctx.changes)
    ctx.onStart(async () => {
      await filters.load()
      if (!none) warehouse = warehouseStore(ingest.db, timezone)
      game = gameAnalytics(ingest.db)
      server = serverAnalytics(ingest.db)
      realtime = realtimeStore(ingest.db)
      hub.start()
      behavior = behaviorAnalytics(ingest.db, ingest)
      levels = levelAnalytics(ingest.db)
    })
    const started = <T>(x: T | undefined): T => {
      if (!x) throw new Error('analytics used before start')
      return x
    }
    return new Elysia({ name: 'analytics' })
      .use(warehouseRoutes(ctx.guard, games, ingest, () => warehouse))
      .use(gameRoutes(ctx.guard, games, () => started(game)))
      .use(serverRoutes(ctx.guard, games, () => started(server)))
      .use(filters.routes)
      .use(realtimeRoutes(ctx, games, hub, () => started(realtime)))
      .use(
        behaviorRoutes(
          ctx.guard,
          games,
          () => started(behavior),
          () => started(levels),
        ),
      )
  },
})
