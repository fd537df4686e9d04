import { Type as T } from '@sinclair/typebox'
import { derivedConsumer } from '../../core/derive'
import { definePlugin } from '../../core/plugin'
import '../games/types'
import '../ingest/types'
import { countedIn } from './exposed'
import { EXPOSED_USERS_KEPT, ExposureRollup } from './exposures'
import m001 from './migrations/001_experiments.sql' with { type: 'text' }
import m002 from './migrations/002_take_exposures.sql' with { type: 'text' }
import m003 from './migrations/003_exposed_users.sql' with { type: 'text' }
import { PublicConfig } from './public'
import { experimentsRoutes } from './routes'
import { experimentsStore } from './store'

const migrations = [
  { id: 1, name: 'experiments', sql: m001 },
  { id: 2, name: 'take_exposures', sql: m002 },
  { id: 3, name: 'exposed_users', sql: m003 },
]

const plain = /^[A-Za-z0-9._~-]+$/
const configPath = (gameId: string, environment: string) =>
  plain.test(gameId) && plain.test(environment) ? `/api/config/${gameId}/${environment}` : undefined

/**
 * A/B experiments (spec 1): lifecycle, the public configuration read for client-side
 * assignment, the assignment debugger and the results analysis over the exposure rollup it keeps
 * in ingest's commit.
 */
export default definePlugin({
  name: 'experiments',
  dependsOn: ['games', 'ingest'],
  // Game clients read their public config from their own pages.
  anyOrigin: ['/api/config/*'],
  permissions: { experiments: { write: ['operator'] } },
  config: T.Object(
    {
      /** Cache-Control of the public configuration read; `no-cache` makes clients revalidate with the ETag every time. */
      cache_control: T.String({ default: 'public, no-cache' }),
      /**
       * How often, in ms, to look for changes other instances sharing the database made (0: never):
       * the safety net for a change notice lost on the way (the notices carry them at once). One
       * process sees its own writes at once.
       */
      refresh_ms: T.Integer({ minimum: 0, default: 5000 }),
      /**
       * How long, in ms, a results read waits for the exposures consumer to take in the events
       * acknowledged before it (0: never); the answer's `X-As-Of` says how complete it is.
       */
      read_wait_ms: T.Integer({ minimum: 0, maximum: 60_000, default: 2000 }),
      /**
       * Exposed users the exposures consumer keeps in memory, all games and environments together:
       * each batch's events are matched against them on the event loop. Past it, the environments
       * with the most are looked up in the store instead, one read per batch (0: every one).
       */
      exposed_users_in_memory: T.Integer({ minimum: 0, default: EXPOSED_USERS_KEPT }),
    },
    { additionalProperties: false },
  ),
  migrations,
  setup(ctx) {
    const games = ctx.service('games')
    // Exposures and the conversions of exposed users: a consumer of the event log, whose tables
    // live beside the log (a separate event store gets them too).
    ctx.service('ingest').storeTables({ plugin: 'experiments', migrations })
    // Exposures count for the experiments of the main store (the consumer's tables may be elsewhere).
    const exposures = new ExposureRollup(countedIn(ctx.db), ctx.config.exposed_users_in_memory)
    ctx.events.consume(derivedConsumer(exposures))
    const held = ctx.metrics.gauge(
      'svc_experiments_exposed_users',
      'Exposed users the exposures consumer keeps in memory (at most exposed_users_in_memory)',
    )
    const inStore = ctx.metrics.gauge(
      'svc_experiments_exposed_envs_in_store',
      'Environments whose exposed users are too many to keep in memory, looked up in the store per batch',
    )
    ctx.metrics.collect(() => {
      const h = exposures.held()
      held.set(h.users)
      inStore.set(h.inStore)
    })
    // A deleted environment or game takes its exposures along; the exposed users are read again.
    ctx
      .service('ingest')
      .onForget(['experiments_exposures', 'experiments_user_events'], () => exposures.forget())
    ctx
      .service('ingest')
      .onFarDated({ experiments_exposures: ['ts'], experiments_user_events: ['last_ts'] }, () =>
        exposures.forget(),
      )
    // The cache reads through the store and the store refreshes the cache after each write;
    // both closures run only after setup, when both exist.
    const cache = new PublicConfig(
      { running: (g, e) => store.running(g, e), exists: async (g, e) => !!(await games.environment(g, e)) },
      ctx.config.cache_control,
      (gameId, environment, entry) => {
        // Served by Bun itself (ETag and 304 included) once known; the first read of an
        // environment, and any name that needs escaping, go through the fast route.
        const path = configPath(gameId, environment)
        if (path) ctx.staticRoute(path, entry && new Response(entry.bytes, { headers: entry.headers }))
      },
    )
    const store = experimentsStore(ctx.db, games, async (gameId, environment) => {
      await cache.refresh(gameId, environment)
      void ctx.changes.publish('experiments', { gameId, environment })
    })
    // Another instance changed an experiment: rebuild that environment's answer now (refresh_ms
    // polling, when set, stays as the safety net for a notice lost while disconnected).
    ctx.changes.on('experiments', (d, origin) => {
      if (origin === 'remote') return cache.refresh(String(d.gameId), String(d.environment))
    })
    games.onChange((change) => {
      if (!change.deleted) return
      cache.drop(change.gameId, change.environment)
      // The instance that deleted it deletes the experiments, before its answer; the others hear
      // of it through the experiments change notices.
      if (change.local)
        return store.forget(change.gameId, change.environment, Date.now()).catch((e) =>
          ctx.log.error('deleting the experiments of a deleted environment failed', {
            gameId: change.gameId,
            environment: change.environment ?? '(every one)',
            error: String(e),
          }),
        )
    })

    ctx.onStart(async () => {
      // Experiments whose environment is gone (deleted before deletions took their experiments
      // along, or by a process that stopped before it did) would come back, salt and variants, in
      // an environment created later under that name: they go now.
      for (const [gameId, environment] of await store.scopes())
        if (!(await games.environment(gameId, environment))) {
          ctx.log.warn('deleting the experiments of an environment that no longer exists', {
            gameId,
            environment,
          })
          await store.forget(gameId, environment, Date.now())
        }
      const fingerprints = await store.fingerprints()
      await cache.preload([...fingerprints.keys()].map((k) => k.split('\n') as [string, string]))
      if (ctx.config.refresh_ms > 0) {
        let known = fingerprints
        let busy = false
        const timer = setInterval(async () => {
          if (busy) return
          busy = true
          try {
            const now = await store.fingerprints()
            const stale = new Set<string>()
            for (const [k, f] of now) if (known.get(k) !== f) stale.add(k)
            for (const k of known.keys()) if (!now.has(k)) stale.add(k)
            known = now
            await Promise.all([...stale].map((k) => cache.refresh(...(k.split('\n') as [string, string]))))
          } catch (e) {
            ctx.log.warn('experiment config refresh failed', { error: String(e) })
          } finally {
            busy = false
          }
        }, ctx.config.refresh_ms)
        ctx.onStop(() => clearInterval(timer))
      }
    })
    return experimentsRoutes(ctx, store, cache, ctx.config.read_wait_ms)
  },
})
