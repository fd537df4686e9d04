import { type Db, migrate, openDb } from '../../core/db'
import { Invalid } from '../../core/http'
import { definePlugin } from '../../core/plugin'
import { ingestMigrations } from './migrations'
import { PersistThread } from './persist-thread'
import { ingestRoutes } from './routes'
import { IngestConfig } from './schema'
import { Ingestor } from './service'
import { experimentCounts, purge, scanEvents, warehouseStore } from './store'
import type { EventsService } from './types'
import { validateEvents } from './validate'
import { COMMITS_IN_FLIGHT, GroupWriter } from './writer'

/**
 * Signed event and payment ingestion, the event store with its write-time rollups, and the
 * warehouse analytics. The event store lives in the main store (`warehouse.dsn: embedded` or
 * `none`) or in the store a SQLite path or PostgreSQL URL names; with `none` events are still
 * stored (experiments need them) but the warehouse endpoints answer 503.
 */
export default definePlugin({
  name: 'ingest',
  dependsOn: ['games'],
  // Game clients post from their own pages: signed ingestion, and API-key batches and logs.
  anyOrigin: ['/api/ingest/*', '/v1/batch', '/v1/logs'],
  config: IngestConfig,
  env: { WAREHOUSE_DSN: 'warehouse.dsn', INGEST_SIGNING_SECRET: 'signing_secret' },
  migrations: ingestMigrations,
  // Spec 1: ingesting through the authenticated routes writes analytics data; admins only by default.
  permissions: { analytics: { write: [] } },
  errors: [{ prefix: '/api/v1/analytics', body: 'analytics' }],
  async setup(ctx) {
    const dsn = ctx.config.warehouse.dsn.trim()
    let db: Db = ctx.db
    if (dsn !== 'embedded' && dsn !== 'none' && dsn !== '') {
      db = openDb(dsn, ctx.core.data_dir, { max: ctx.core.database.pool })
      await migrate(db, [{ plugin: 'ingest', migrations: ingestMigrations }])
      ctx.onStop(() => db.close())
    }
    const warehouse = dsn === 'none' || dsn === '' ? undefined : warehouseStore(db)
    const games = ctx.service('games')
    // The transactions run on a thread of their own (persist-thread.ts), so the event loop keeps
    // answering while a commit runs: SQLite's statements and fsyncs, PostgreSQL's encoding.
    const thread =
      db.location &&
      new PersistThread(db.location, COMMITS_IN_FLIGHT[db.dialect], ctx.config.sqlite_synchronous)
    // SQLite: the persist thread and its checkpointer keep the WAL short. This process's own
    // writes on the event loop (other plugins sharing the file) then never run a checkpoint
    // there, which with a WAL of up to 32 MB could stall every request for its copy and fsync.
    if (thread && db.dialect === 'sqlite') await db.exec('PRAGMA wal_autocheckpoint = 0')
    const committed = ctx.metrics.counter(
      'svc_ingest_events_total',
      'Events of finished commits (sampled events are not counted), by outcome',
      ['outcome'],
    )
    const commitTime = ctx.metrics.histogram(
      'svc_ingest_commit_duration_seconds',
      'Group commits: from preparing the rows to the store answering, by outcome',
      ['outcome'],
      [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1],
    )
    const writer = new GroupWriter(
      db,
      ctx.log,
      thread && ((rows) => thread.persist(rows)),
      (events, seconds, ok) => {
        const outcome = ok ? 'committed' : 'failed'
        committed.inc({ outcome }, events)
        commitTime.observe({ outcome }, seconds)
      },
    )
    if (thread) {
      const restarts = ctx.metrics.counter(
        'svc_ingest_persist_thread_restarts_total',
        'Times the persist thread died and was replaced',
      )
      let counted = 0
      ctx.metrics.collect(() => {
        restarts.inc(thread.restarts - counted)
        counted = thread.restarts
      })
    }
    const ingestor = new Ingestor(ctx.config, ctx.config.signing_secret, games, writer, ctx.log, ctx.shared)

    const events: EventsService = {
      experimentCounts: (q) => experimentCounts(db, q),
      scan: (q) => scanEvents(db, q),
      async ingest(list) {
        const { events, errors } = validateEvents(list, { payments: false })
        if (errors.length) throw new Invalid(`${errors.length} invalid events`, { errors })
        await writer.write(events)
        return { accepted: events.length }
      },
    }
    ctx.provide('events', events)

    let timer: ReturnType<typeof setInterval> | undefined
    const runPurge = async () => {
      const envs = await games.environments()
      const n = await purge(
        db,
        envs.map((e) => ({ gameId: e.gameId, name: e.name, retentionDays: e.settings.retentionDays })),
      )
      if (n) ctx.log.info('retention purge', { deleted: n })
    }
    ctx.onStart(() => {
      if (ctx.config.purge_interval_minutes > 0) {
        timer = setInterval(
          () => runPurge().catch((e) => ctx.log.error('retention purge failed', { error: String(e) })),
          ctx.config.purge_interval_minutes * 60_000,
        )
        timer.unref?.()
      }
    })
    ctx.onStop(async () => {
      if (timer) clearInterval(timer)
      await writer.idle()
      await thread?.close()
    })
    return ingestRoutes(ingestor, ctx.auth, ctx.guard, ctx.fastRoute, warehouse)
  },
})
