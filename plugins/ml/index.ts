import { Type as T } from '@sinclair/typebox'
import { definePlugin } from '../../core/plugin'
import '../games/types'
import '../ingest/types'
import { Trainer } from './jobs'
import { PredictionLog, purgePredictions, writeRows } from './log'
import { LogThread } from './log-thread'
import m001 from './migrations/001_ml.sql' with { type: 'text' }
import { monitoring } from './monitoring'
import { mlRoutes } from './routes'
import { Serving } from './serving'
import { modelsStore } from './store'

/**
 * ML models (spec 1): the registry with versions, training jobs on the event store or uploaded
 * CSV in worker threads, deployment (in process, forwarded, canary), predictions, A/B tests
 * between models, feedback and drift monitoring (`model_drift` on the bus).
 */
export default definePlugin({
  name: 'ml',
  dependsOn: ['games', 'ingest'],
  config: T.Object(
    {
      /** Training jobs run at once per instance; more wait as pending. */
      max_concurrent_jobs: T.Integer({ minimum: 1, maximum: 16, default: 1 }),
      /** Rows read into one training set at most; a CSV upload of more is refused (400). */
      max_rows: T.Integer({ minimum: 1, default: 2_000_000 }),
      /** Size limit of an uploaded CSV training set (server.body_limit_mb caps every request too). */
      max_csv_mb: T.Number({ minimum: 0.001, default: 10 }),
      /** Stored predictions (for feedback and drift) are deleted after this many days; the daily counts stay. */
      prediction_retention_days: T.Integer({ minimum: 1, default: 30 }),
      /**
       * A cached deployment older than this is refreshed, served meanwhile (up to twice this
       * old): bounds how late another instance's change shows when its change notice is lost.
       */
      cache_ttl_ms: T.Integer({ minimum: 0, default: 1000 }),
      /** Share of entities a canary deploy sends to the new version when the deploy names none. */
      canary_percent: T.Integer({ minimum: 1, maximum: 99, default: 10 }),
      /** Time a forwarding servingEndpoint has to answer. */
      forward_timeout_ms: T.Integer({ minimum: 1, default: 2000 }),
      /** Predictions are stored in batches this often (ms). */
      flush_ms: T.Integer({ minimum: 1, default: 100 }),
      /** Deployed models are checked for drift this often (0: only on request). */
      drift_check_minutes: T.Number({ minimum: 0, default: 60 }),
      /** Feedback answers needed before an accuracy drop counts. */
      min_feedback: T.Integer({ minimum: 1, default: 20 }),
      /** Latest predictions compared with the training distribution (PSI). */
      psi_sample: T.Integer({ minimum: 10, default: 2000 }),
      /** Predictions needed before a feature shift counts. */
      min_predictions: T.Integer({ minimum: 1, default: 100 }),
      /** A drift alert of one kind and severity is raised again only after this long. */
      alert_cooldown_minutes: T.Number({ minimum: 0, default: 360 }),
      /** A job whose instance has not reported for this long is failed as interrupted. */
      stale_job_s: T.Integer({ minimum: 5, default: 60 }),
    },
    { additionalProperties: false, default: {} },
  ),
  migrations: [{ id: 1, name: 'ml', sql: m001 }],
  permissions: {
    ml: { write: ['operator'] },
    // Game servers and SDK integrations call predict and feedback: developers and operators.
    'ml-serving': { write: ['operator', 'developer'] },
  },
  setup(ctx) {
    const c = ctx.config
    const games = ctx.service('games')
    const models = modelsStore(ctx.db, games)
    // Off the event loop when the store can be opened by another thread (not an in-memory SQLite).
    const thread = ctx.db.location && new LogThread(ctx.db.location)
    const log = new PredictionLog(
      thread ? (batch) => thread.write(batch) : (batch) => writeRows(ctx.db, batch),
      c.flush_ms,
      2000,
      (e) => ctx.log.error('storing predictions failed', { error: String(e) }),
    )
    const serving = new Serving(
      models,
      log,
      {
        cacheTtlMs: c.cache_ttl_ms,
        canaryPercent: c.canary_percent,
        forwardTimeoutMs: c.forward_timeout_ms,
        outbound: ctx.outbound,
      },
      (id) => void ctx.changes.publish('ml.models', { id }),
    )
    ctx.changes.on('ml.models', (d, origin) => {
      if (origin === 'remote') serving.forget(String(d.id))
    })
    const jobsDone = ctx.metrics.counter('svc_ml_training_jobs_total', 'Finished training jobs', ['outcome'])
    const trainer = new Trainer(
      ctx.db,
      models,
      () => ctx.service('ingest'),
      { maxConcurrentJobs: c.max_concurrent_jobs, maxRows: c.max_rows, staleMs: c.stale_job_s * 1000 },
      ctx.log,
      (modelId) => {
        serving.invalidate(modelId)
        jobsDone.inc({ outcome: 'finished' })
      },
    )
    const monitor = monitoring(ctx.db, models, log, ctx.bus, {
      minFeedback: c.min_feedback,
      psiSample: c.psi_sample,
      minPredictions: c.min_predictions,
      alertCooldownMs: c.alert_cooldown_minutes * 60_000,
    })

    ctx.health(
      'ml',
      async () => {
        const rows = await ctx.db.all<{ status: string; n: number }>(
          'SELECT status, COUNT(*) AS n FROM ml_models GROUP BY status',
        )
        const count = (s: string) => Number(rows.find((r) => r.status === s)?.n ?? 0)
        return { status: 'up', deployed: count('DEPLOYED'), training: count('TRAINING') }
      },
      { critical: false },
    )

    // A deleted game's models go with it, before its deletion answers: their jobs stop, the
    // predictions still buffered are written first so that none stays behind, and every
    // instance's cached deployment goes (the ml.models notices).
    const forgetGame = async (gameId: string) => {
      await trainer.forget(await models.idsOf(gameId))
      await log.flush()
      for (const id of await models.removeGame(gameId)) serving.invalidate(id)
    }
    games.onChange((change) => {
      if (!change.deleted || change.environment !== undefined || !change.local) return
      return forgetGame(change.gameId).catch((e) =>
        ctx.log.error('deleting the ML models of a deleted game failed', {
          gameId: change.gameId,
          error: String(e),
        }),
      )
    })

    ctx.onStart(async () => {
      // Models of a game that no longer exists (deleted before deletions took its models along,
      // or by a process that stopped before it did) would still serve and train: they go now.
      for (const gameId of await models.gameIds())
        if (!(await games.gameExists(gameId))) {
          ctx.log.warn('deleting the ML models of a game that no longer exists', { gameId })
          await forgetGame(gameId)
        }
      await trainer.sweep()
    })
    // This instance's jobs say they are alive on every instance; the rest runs once per tick
    // across the instances (core's schedule), so a drift alert is raised once.
    ctx.schedule(
      'ml.training-heartbeat',
      Math.max(1000, (c.stale_job_s * 1000) / 3),
      () => trainer.heartbeat(),
      {
        perInstance: true,
      },
    )
    ctx.schedule('ml.training-sweep', c.stale_job_s * 1000, async () => {
      await trainer.sweep()
    })
    ctx.schedule('ml.prediction-purge', 3_600_000, async () => {
      await purgePredictions(ctx.db, Date.now() - c.prediction_retention_days * 86_400_000)
    })
    if (c.drift_check_minutes > 0)
      ctx.schedule('ml.drift-check', c.drift_check_minutes * 60_000, async () => {
        const deployed = await ctx.db.all<{ id: string }>(
          "SELECT id FROM ml_models WHERE status = 'DEPLOYED'",
        )
        for (const m of deployed) await monitor.checkDrift(m.id)
      })
    ctx.onStop(async () => {
      await trainer.close()
      await log.close()
      await thread?.close()
    })
    return mlRoutes(ctx, models, trainer, serving, monitor)
  },
})
