import { type Db, type MigrationSet, migrate, openDb } from '../../core/db'
import { Invalid } from '../../core/http'
import { definePlugin } from '../../core/plugin'
import { type Forgetter, Forgetting } from './forgetting'
import { ingestMigrations } from './migrations'
import { startOtlpGrpc } from './otlp/grpc'
import { PersistThread } from './persist/persist-thread'
import { COMMITS_IN_FLIGHT, GroupWriter } from './persist/writer'
import { IngestConfig } from './schema'
import { secretRoutes, signingSecret } from './secret'
import { serverWrite } from './signed/collect'
import { ingestRoutes } from './signed/routes'
import { Ingestor } from './signed/service'
import { eventWindow, outsideWindow, validateEvents } from './signed/validate'
import { forgetFarDated } from './store/far-dated'
import { eventLog } from './store/log'
import { RecentRows } from './store/recent'
import { DAY } from './store/sql'
import { invocations, purge, purgeEventIds, scanEvents } from './store/store'
import { walkTimeline, walkTimelineText } from './store/timeline'
import { WalkThreads } from './store/walk-threads'
import type { IngestService } from './types'

/**
 * Signed event and payment ingestion: it verifies, validates and stores raw events, payments
 * and invocations, and acknowledges once they are committed. It provides the event log
 * (`ctx.events`, store/log.ts): what is derived from events (analytics, experiment exposures)
 * is computed by the consumers of the log, off the request's path. The event store is the main
 * store unless the analytics plugin's warehouse setting names another (`useStore`): the log's
 * consumers write their results beside it, in the transaction that reads it.
 */
export default definePlugin({
  name: 'ingest',
  dependsOn: ['games'],
  // Game clients post from their own pages: signed ingestion, and API-key batches and logs.
  anyOrigin: ['/api/ingest/*', '/v1/batch', '/v1/logs', '/v1/traces'],
  config: IngestConfig,
  env: { INGEST_SIGNING_SECRET: 'signing_secret' },
  migrations: ingestMigrations,
  async setup(ctx) {
    const games = ctx.service('games')
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
    const grpcCalls = ctx.metrics.counter(
      'svc_ingest_otlp_grpc_calls_total',
      'OTLP/gRPC Export calls answered by the handler, by service (logs, traces) and status code',
      ['service', 'code'],
    )
    const restarts = ctx.metrics.counter(
      'svc_ingest_persist_thread_restarts_total',
      'Times the persist thread died and was replaced',
    )
    // The store is attached at start (`open` below), once the analytics plugin may have named another.
    const writer = new GroupWriter(ctx.db, ctx.log, undefined, (events, seconds, ok) => {
      const outcome = ok ? 'committed' : 'failed'
      committed.inc({ outcome }, events)
      commitTime.observe({ outcome }, seconds)
    })
    let db: Db = ctx.db
    let dsn = 'embedded'
    let started = false
    let thread: PersistThread | undefined
    let walkThreads: WalkThreads | undefined
    /** The SQLite file funnels' and paths' walks read on threads of their own (walk-threads.ts). */
    let walkFile: string | undefined
    let stopping = false
    // Started by the first walk: a server whose funnels and paths are never read runs no such thread.
    const threadsForWalks = () => {
      if (!walkThreads && walkFile && !stopping)
        walkThreads = new WalkThreads(walkFile, () =>
          ctx.log.warn('walk threads lost: funnels and paths read on the event loop'),
        )
      return walkThreads
    }
    let counted = 0
    ctx.metrics.collect(() => {
      const now = thread?.restarts ?? 0
      if (now > counted) restarts.inc(now - counted)
      counted = now
    })

    /** Opens the event store (migrating it when it is not the main store) and its persist thread. */
    const open = async () => {
      started = true
      if (dsn !== 'embedded' && dsn !== 'none' && dsn !== '') {
        db = openDb(dsn, ctx.core.data_dir, { max: ctx.core.database.pool })
        // The log's consumers' tables too, under their owners' ledgers.
        await migrate(db, [{ plugin: 'ingest', migrations: ingestMigrations }, ...storeSets])
      }
      // The transactions run on a thread of their own (persist-thread.ts). PostgreSQL: it encodes
      // the rows and waits on the round trips while the event loop answers. A SQLite file: its
      // statements run there, taking turns with the event loop's writes (the event log's
      // consumers among them) through the store's write gate (core/db/write-gate.ts), so the
      // file still has one writer at a time and neither waits in SQLite's busy handler; the
      // event loop's share of a commit falls to encoding its rows (docs/performance.md, wave 3
      // seventh session). MySQL, and SQLite in memory, commit on the event loop.
      const t =
        db.location &&
        db.dialect !== 'mysql' &&
        new PersistThread(
          db.location,
          COMMITS_IN_FLIGHT[db.dialect],
          ctx.config.sqlite_synchronous,
          (message, error) => ctx.log.warn(message, { error }),
        )
      thread = t || undefined
      // `full`: the store's WAL is synced before every answer (every write of the store's one writer).
      if (db.dialect === 'sqlite' && ctx.config.sqlite_synchronous === 'full')
        await db.exec('PRAGMA synchronous = FULL')
      if (db.dialect === 'sqlite' && db.location) walkFile = db.location.url
      writer.attach(
        db,
        t ? (rows) => t.persist(rows) : undefined,
        (appended) => ctx.events.notify(appended),
        recent,
      )
      await ingestor.keepNoncesIn(db, db.dialect === 'sqlite' && !ctx.core.redis.url)
    }
    const storeSets: MigrationSet[] = []
    const purgers: Parameters<IngestService['onPurge']>[0][] = []
    const forgetters: Forgetter[] = []
    const dated: Record<string, readonly string[]> = {}
    const datedAfter: Array<() => void> = []
    // A deleted environment or game takes what is stored of it along, in slices (forgetting.ts).
    const forgetting = new Forgetting({
      db: () => db,
      forgetters,
      idle: () => writer.idle(),
      drain: () => ctx.events.drain(undefined, 30_000),
      exists: async (gameId, env) => !!(await games.environment(gameId, env)),
      log: ctx.log,
    })
    // The committed events, in commit order, for the consumers of `ctx.events`.
    // PostgreSQL and MySQL: this process's last commits, which the log's reads take instead of
    // reading back rows they only need the positions of (store/recent.ts).
    const recent = new RecentRows()
    const source = eventLog(() => db, recent)
    source.withheld = (row) => forgetting.withheld(row)
    ctx.events.provide(source)
    const secret = signingSecret(ctx.config, ctx.core.data_dir)
    const ingestor = new Ingestor(ctx.config, secret.secret, games, writer, ctx.log, ctx.shared)

    const service: IngestService = {
      get db() {
        return db
      },
      useStore(name) {
        if (started) throw new Error('the event store is chosen before start')
        dsn = name.trim()
      },
      storeTables(set) {
        if (started) throw new Error('the event store is chosen before start')
        storeSets.push(set)
      },
      onPurge(p) {
        purgers.push(p)
      },
      onForget(tables, after) {
        forgetters.push({ tables, after })
      },
      onFarDated(tables, after) {
        Object.assign(dated, tables)
        if (after) datedAfter.push(after)
      },
      write: (list, o) => serverWrite(ingestor, list, o.payments),
      invocations: (q) => invocations(db, q),
      scan: (q) => scanEvents(db, q),
      timeline: (q, each) => walkTimeline(db, q, each),
      timelineText: (q, each) => walkTimelineText(db, q, each, threadsForWalks()),
      idle: () => writer.idle(),
      setFilter: (gameId, env, f) => ingestor.setFilter(gameId, env, f),
      async ingest(list) {
        const window = eventWindow(ctx.config, Date.now())
        const { events, errors } = validateEvents(list, { payments: false, window })
        if (errors.length) throw new Invalid(`${errors.length} invalid events`, { errors })
        await writer.write(events)
        return { accepted: events.length }
      },
      eventTimeProblem(ts, now) {
        const w = eventWindow(ctx.config, now)
        return ts < w.min || ts > w.max ? outsideWindow(w) : undefined
      },
    }
    ctx.provide('ingest', service)

    let timer: ReturnType<typeof setInterval> | undefined
    let grpc: Awaited<ReturnType<typeof startOtlpGrpc>> | undefined
    const runPurge = async () => {
      const envs = await games.environments()
      const n = await purge(
        db,
        envs.map((e) => ({ gameId: e.gameId, name: e.name, retentionDays: e.settings.retentionDays })),
        Date.now(),
        purgers,
      )
      if (n) ctx.log.info('retention purge', { deleted: n })
      await db.run('DELETE FROM ingest_nonces WHERE expires_at <= ?', [Date.now()])
      await purgeEventIds(db, Date.now() - ctx.config.dedup_window_days * DAY)
    }
    // A deleted environment or game: recorded before the answer on the instance that deleted it,
    // its rows deleted in the background there; every instance's consumers leave its rows.
    games.onChange((c) => {
      if (!c.deleted) return
      const s = { gameId: c.gameId, env: c.environment }
      if (!c.local || !started) return forgetting.heard(s, Date.now())
      return forgetting
        .deleted(s, Date.now())
        .catch((e) =>
          ctx.log.error('recording a deleted stream failed', { gameId: c.gameId, error: String(e) }),
        )
    })
    // Deletions a stop interrupted, environments gone without one, and the one-time clean-ups: in
    // the background from start (the consumers not yet running: no drain), then every 10 minutes
    // on one instance at a time.
    const sweep = async (drain: boolean, signal?: AbortSignal) => {
      await forgetting.sweep(drain, signal)
      await forgetting.once('far_dated', signal, async (pause) => {
        const w = {
          ageMs: ctx.config.max_event_age_days * DAY,
          futureMs: ctx.config.max_event_future_s * 1000,
        }
        const n = await forgetFarDated(db, w, dated, Date.now(), pause)
        for (const f of datedAfter) f()
        if (n) ctx.log.info('far-dated rows deleted', { rows: n })
      })
    }
    let startSweep: Promise<void> | undefined
    ctx.schedule('ingest.forget', 10 * 60_000, (signal) => sweep(true, signal))
    ctx.onStart(async () => {
      await open()
      await forgetting.load()
      startSweep = sweep(false).catch((e) => ctx.log.error('forgetting sweep failed', { error: String(e) }))
      const g = ctx.config.otlp.grpc
      if (g.enabled)
        grpc = await startOtlpGrpc(ingestor, ctx.auth, ctx.log, {
          ...g,
          host: g.host ?? ctx.core.server.host,
          onCall: (signal, code) => grpcCalls.inc({ service: signal, code }),
        })
      if (ctx.config.purge_interval_minutes > 0) {
        timer = setInterval(
          () => runPurge().catch((e) => ctx.log.error('retention purge failed', { error: String(e) })),
          ctx.config.purge_interval_minutes * 60_000,
        )
        timer.unref?.()
      }
    })
    ctx.onStop(async () => {
      stopping = true
      if (timer) clearInterval(timer)
      await forgetting.stop()
      await startSweep
      await grpc?.stop()
      await writer.idle()
      await thread?.close()
      await walkThreads?.close()
      if (db !== ctx.db) await db.close()
    })
    return ingestRoutes(ingestor, ctx.auth, ctx.guard, ctx.fastRoute).use(secretRoutes(ctx.guard, secret))
  },
})
