import { Elysia } from 'elysia'
import { derivedConsumer } from '../../core/derive'
import { definePlugin } from '../../core/plugin'
import '../games/types'
import '../ingest/types'
import { behaviorAnalytics } from './behavior/behavior'
import { BehaviorRollup } from './behavior/behavior-rollup'
import { behaviorRoutes } from './behavior/behavior-routes'
import { levelAnalytics } from './behavior/levels'
import { gameAnalytics } from './game/game'
import { gameRoutes } from './game/game-routes'
import { DATED_TABLES, RESULT_TABLES, migrations } from './migrations'
import { RealtimeHub, realtimeStore } from './realtime/realtime'
import { MinuteRollup } from './realtime/realtime-rollup'
import { realtimeRoutes } from './realtime/realtime-routes'
import { AnalyticsConfig } from './schema'
import { consumerRoutes } from './server/consumer-routes'
import { filterRoutes } from './server/filters'
import { serverAnalytics } from './server/server'
import { serverRoutes } from './server/server-routes'
import { AnalyticsRollup } from './store/rollup'
import { warehouseStore } from './warehouse/warehouse'
import { warehouseRoutes } from './warehouse/warehouse-routes'

/**
 * Game and server analytics (spec 1) over the event store: three consumers of the event log
 * (`analytics`: user-days, first sight, day counters, cohorts, sketches, invocation hours;
 * `behavior`: event, feature and level counters, raw-id spans; `realtime`: events per minute)
 * and every `/api/v1/analytics/*` route, the warehouse endpoints included. Without it, ingest
 * still stores events and those routes answer 404.
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
    // The consumers write beside the log they read, so the warehouse store is ingest's event store.
    ingest.useStore(dsn)
    ingest.storeTables({ plugin: 'analytics', migrations })
    const games = ctx.service('games')
    const timezone = (gameId: string) => games.timezone(gameId)
    const rollup = new AnalyticsRollup(timezone)
    const behaviorRollup = new BehaviorRollup(timezone)
    const minutes = new MinuteRollup()
    ctx.events.consume(derivedConsumer(rollup))
    ctx.events.consume(derivedConsumer(behaviorRollup))
    ctx.events.consume(derivedConsumer(minutes))
    // Per-user, per-minute and raw-id detail goes with the raw events; day counters stay.
    ingest.onPurge(async (db, env, cutoff) => {
      let n = 0
      for (const d of [rollup, behaviorRollup, minutes]) n += await d.purge(db, env, cutoff)
      return n
    })
    // A deleted environment or game: every result kept of it (its day counters too), and the caches.
    ingest.onForget(RESULT_TABLES, (s) => {
      rollup.forgetGame(s.gameId)
      behaviorRollup.forgetGame(s.gameId)
    })
    // Rows of event times the window now refuses, stored before it (ingest's one-time clean-up).
    ingest.onFarDated(DATED_TABLES, () => {
      for (const d of [rollup, behaviorRollup, minutes]) d.forget()
    })
    // A game's days follow its time zone from its next event on.
    games.onChange((c) => {
      if (!c.environment) {
        rollup.forgetGame(c.gameId)
        behaviorRollup.forgetGame(c.gameId)
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
    // The safety net of the change notices: filters and game time zones changed elsewhere.
    ctx.schedule(
      'analytics.sync',
      ctx.config.sync_ms,
      async () => {
        await filters.load()
        for (const d of [rollup, behaviorRollup]) await d.recheckZones()
      },
      { perInstance: true },
    )
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
    // Reads wait (bounded) for the consumers to take in what was acknowledged before them.
    const settledStores = new WeakMap<object, object>()
    const started = <T>(x: T | undefined): T => {
      if (!x) throw new Error('analytics used before start')
      let s = settledStores.get(x as object)
      if (!s) {
        s = settled(x as object, () => ctx.events.settle(ctx.config.read_wait_ms))
        settledStores.set(x as object, s)
      }
      return s as T
    }
    return new Elysia({ name: 'analytics' })
      .onAfterHandle({ as: 'global' }, async ({ path, set }) => {
        if (path.startsWith('/api/v1/analytics/'))
          set.headers['x-as-of'] = new Date(await ctx.events.asOf()).toISOString()
      })
      .use(warehouseRoutes(ctx.guard, games, ingest, () => warehouse && started(warehouse)))
      .use(gameRoutes(ctx.guard, games, () => started(game)))
      .use(serverRoutes(ctx.guard, games, () => started(server)))
      .use(filters.routes)
      .use(consumerRoutes(ctx.guard, ctx.events))
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

/** A store whose every method first waits for `settle` (the event log's consumers). */
function settled<T extends object>(store: T, settle: () => Promise<unknown>): T {
  return new Proxy(store, {
    get(target, key, receiver) {
      const v = Reflect.get(target, key, receiver)
      if (typeof v !== 'function') return v
      return async (...args: unknown[]) => {
        await settle()
        return v.apply(target, args)
      }
    },
  })
}
