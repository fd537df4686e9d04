import { type Db, fromJson, newId } from '../../core/db'
import { Conflict, Invalid, NotFound, invalidField } from '../../core/http'
import type { Logger } from '../../core/log'
import type { EventsService } from '../ingest/types'
import {
  type Artifact,
  type Metrics,
  type ModelType,
  canonicalAlgorithm,
  notTrainedHere,
  resolveHyperparameters,
} from './algorithms'
import { buildCsv } from './csv-thread'
import { type Built, checkDatasetConfig, fromEvents } from './dataset'
import { COLS, type JobRow, toJob } from './job-rows'
import type { DatasetConfig, TrainBody, TrainingJob } from './schema'
import type { ModelsStore } from './store'
import type { TrainReply, TrainRequest } from './training.worker'

/** The worker's module: next to this file from source; in the compiled binary by its path from the repository root. */
function workerEntry(): string {
  if (import.meta.url.startsWith('file:///$bunfs/')) return './plugins/ml/training.worker.ts'
  return new URL('./training.worker.ts', import.meta.url).href
}

class Cancelled extends Error {}

export interface TrainerConfig {
  maxConcurrentJobs: number
  maxRows: number
  /** A running job not heard of for this long (its instance died) is failed by the next sweep. */
  staleMs: number
}

interface Running {
  cancelled: boolean
  worker?: Worker
}

/** Stops a job's training on this instance: its thread ends, and what it made is dropped. */
const stop = (run: Running) => {
  run.cancelled = true
  run.worker?.terminate()
}

/**
 * Training jobs: created pending with the model moved to TRAINING, run at most `maxConcurrentJobs`
 * at a time (events read page by page, a CSV built on a thread, fitting in a Worker), progress
 * written at most every 500 ms. Completed: a new model version. Failed: the model goes to FAILED.
 */
export class Trainer {
  private queue: string[] = []
  private running = new Map<string, Running>()
  private closed = false

  constructor(
    private db: Db,
    private models: ModelsStore,
    private events: () => EventsService,
    private config: TrainerConfig,
    private log: Logger,
    private onFinished: (modelId: string) => void = () => undefined,
  ) {}

  async start(modelId: string, body: TrainBody): Promise<TrainingJob> {
    const model = await this.models.row(modelId)
    const type = model.type as ModelType
    if (model.status === 'TRAINING')
      throw new Conflict(`model '${modelId}' is already TRAINING; wait for its job or cancel it`)
    if (model.status === 'ARCHIVED')
      throw new Conflict(`model '${modelId}' is ARCHIVED; restore it (PUT status) before training`)
    // A registry entry (a model trained elsewhere) is deployed, not trained here.
    if (!canonicalAlgorithm(type, model.algorithm))
      throw new Conflict(notTrainedHere(modelId, type, model), { field: 'algorithm' })
    const { values, problems } = resolveHyperparameters(model.algorithm, body.hyperparameters ?? {})
    if (problems.length)
      throw new Invalid(problems.map((p) => `${p.field}: ${p.reason}`).join('; '), {
        field: problems[0].field,
        errors: problems,
      })
    const cfg = body.datasetConfig
    checkDatasetConfig(type, cfg)
    if (cfg.source === 'csv') {
      const ds = await this.db.get<{ columns: string }>(
        'SELECT columns FROM ml_datasets WHERE id = ? AND model_id = ?',
        [cfg.query, modelId],
      )
      if (!ds)
        throw invalidField(
          'body.datasetConfig.query',
          `no dataset '${cfg.query}' uploaded to model '${modelId}'`,
        )
      const columns = fromJson<string[]>(ds.columns, [])
      for (const [i, f] of cfg.features.entries())
        if (!columns.includes(f))
          throw invalidField(`body.datasetConfig.features[${i}]`, `no column '${f}' in the dataset`)
      if (cfg.label !== undefined && !columns.includes(cfg.label))
        throw invalidField('body.datasetConfig.label', `no column '${cfg.label}' in the dataset`)
    }
    const id = newId()
    const now = Date.now()
    await this.db.tx(async (tx) => {
      await this.models.write(model, "status = 'TRAINING'", [], tx)
      await tx.run(
        `INSERT INTO ml_training_jobs (id, model_id, status, progress, stage, dataset_config, hyperparameters, previous_status, created_at, heartbeat_at)
         VALUES (?, ?, 'pending', 0, 'queued', ?, ?, ?, ?, ?)`,
        [id, modelId, JSON.stringify(cfg), JSON.stringify(values), model.status, now, now],
      )
    })
    const job = await this.get(modelId, id)
    this.queue.push(id)
    this.pump()
    return job
  }

  async get(modelId: string, jobId: string): Promise<TrainingJob> {
    const r = await this.db.get<JobRow>(
      `SELECT ${COLS} FROM ml_training_jobs WHERE id = ? AND model_id = ?`,
      [jobId, modelId],
    )
    if (!r) throw new NotFound(`training job '${jobId}' of model '${modelId}' not found`)
    return toJob(r)
  }

  async list(modelId: string, page: number, size: number) {
    await this.models.row(modelId)
    const [rows, count] = await Promise.all([
      this.db.all<JobRow>(
        `SELECT ${COLS} FROM ml_training_jobs WHERE model_id = ? ORDER BY created_at DESC, id DESC LIMIT ? OFFSET ?`,
        [modelId, size, page * size],
      ),
      this.db.get<{ n: number }>('SELECT COUNT(*) AS n FROM ml_training_jobs WHERE model_id = ?', [modelId]),
    ])
    return { items: rows.map(toJob), total: Number(count?.n ?? 0), page, size }
  }

  /** Stops a pending or running job at once; the model returns to its status before training. */
  async cancel(modelId: string, jobId: string): Promise<TrainingJob> {
    const job = await this.get(modelId, jobId)
    if (job.status !== 'pending' && job.status !== 'running')
      throw new Conflict(
        `training job '${jobId}' is ${job.status}; only a pending or running job can be cancelled`,
      )
    const run = this.running.get(jobId)
    if (run) stop(run)
    this.queue = this.queue.filter((q) => q !== jobId)
    await this.end(jobId, 'cancelled', { error: 'cancelled by request' })
    return this.get(modelId, jobId)
  }

  /**
   * Fails jobs whose instance stopped hearing from them (a crash or restart mid-training):
   * their model moves to FAILED, so it can be trained again.
   */
  async sweep(now = Date.now()): Promise<number> {
    const stale = await this.db.all<{ id: string }>(
      "SELECT id FROM ml_training_jobs WHERE status IN ('pending', 'running') AND heartbeat_at < ?",
      [now - this.config.staleMs],
    )
    let n = 0
    for (const { id } of stale) {
      if (this.running.has(id) || this.queue.includes(id)) continue
      await this.end(id, 'failed', { error: 'interrupted: the instance running it stopped' })
      n++
    }
    return n
  }

  /** Tells other instances' sweeps that this instance's jobs are alive. */
  async heartbeat(now = Date.now()): Promise<void> {
    const ids = [...this.running.keys(), ...this.queue]
    if (ids.length)
      await this.db.run(
        `UPDATE ml_training_jobs SET heartbeat_at = ? WHERE id IN (${ids.map(() => '?').join(', ')})`,
        [now, ...ids],
      )
  }

  /**
   * Stops this instance's jobs of these models (their game is being deleted): nothing they make
   * is stored. Other instances' jobs stop at their next progress write, which finds no job.
   */
  async forget(modelIds: string[]): Promise<void> {
    if (!modelIds.length) return
    const jobs = await this.db.all<{ id: string }>(
      `SELECT id FROM ml_training_jobs WHERE status IN ('pending', 'running') AND model_id IN (${modelIds.map(() => '?').join(', ')})`,
      modelIds,
    )
    for (const { id } of jobs) {
      const run = this.running.get(id)
      if (run) stop(run)
      this.queue = this.queue.filter((q) => q !== id)
    }
  }

  /** Stops every job of this instance; they are failed as interrupted. */
  async close(): Promise<void> {
    this.closed = true
    const ids = [...this.running.keys(), ...this.queue]
    this.queue = []
    for (const [id, run] of this.running) {
      stop(run)
      this.running.delete(id)
    }
    for (const id of ids)
      await this.end(id, 'failed', { error: 'interrupted: the server stopped' }).catch(() => undefined)
  }

  private pump() {
    while (!this.closed && this.running.size < this.config.maxConcurrentJobs && this.queue.length) {
      const id = this.queue.shift()!
      const run: Running = { cancelled: false }
      this.running.set(id, run)
      this.run(id, run)
        .catch((e) => this.log.error('training job failed unexpectedly', { job: id, error: String(e) }))
        .finally(() => {
          this.running.delete(id)
          this.pump()
        })
    }
  }

  /** Settles a job and its model once: a job already settled (cancelled meanwhile) stays as it is. */
  private async end(
    jobId: string,
    status: 'completed' | 'failed' | 'cancelled',
    out: { error?: string; result?: { artifact: Artifact; metrics: Metrics; built: Built } },
  ): Promise<void> {
    const modelId = await this.db.tx(async (tx) => {
      const job = await tx.get<JobRow>(`SELECT ${COLS} FROM ml_training_jobs WHERE id = ?`, [jobId])
      if (!job || (job.status !== 'pending' && job.status !== 'running')) return undefined
      const now = Date.now()
      let version: number | null = null
      if (status === 'completed' && out.result) {
        version = await this.models.addVersion(
          tx,
          job.model_id,
          {
            id: jobId,
            hyperparameters: fromJson(job.hyperparameters, {}),
            datasetConfig: fromJson(job.dataset_config, { source: 'events', query: '', features: [] }),
          },
          out.result.artifact,
          out.result.metrics,
        )
      } else {
        const model = await tx.get<{ status: string }>('SELECT status FROM ml_models WHERE id = ?', [
          job.model_id,
        ])
        if (model?.status === 'TRAINING')
          await tx.run('UPDATE ml_models SET status = ?, updated_at = ? WHERE id = ?', [
            status === 'cancelled' ? job.previous_status : 'FAILED',
            now,
            job.model_id,
          ])
      }
      await tx.run(
        'UPDATE ml_training_jobs SET status = ?, progress = ?, stage = ?, metrics = ?, error = ?, version = ?, rows_used = ?, rows_skipped = ?, finished_at = ?, heartbeat_at = ? WHERE id = ?',
        [
          status,
          status === 'completed' ? 1 : Number(job.progress),
          status === 'completed' ? 'done' : status,
          out.result ? JSON.stringify(out.result.metrics) : null,
          out.error ?? null,
          version,
          out.result?.built.rowsUsed ?? job.rows_used,
          out.result?.built.rowsSkipped ?? job.rows_skipped,
          now,
          now,
          jobId,
        ],
      )
      return job.model_id
    })
    if (modelId) this.onFinished(modelId)
  }

  private async run(jobId: string, run: Running): Promise<void> {
    const job = await this.db.get<JobRow>(`SELECT ${COLS} FROM ml_training_jobs WHERE id = ?`, [jobId])
    if (!job || job.status !== 'pending') return
    const model = await this.models.row(job.model_id)
    const cfg = fromJson<DatasetConfig>(job.dataset_config, { source: 'events', query: '', features: [] })
    let lastWrite = 0
    const update = async (progress: number, stage: string, force = false) => {
      const now = Date.now()
      if (!force && now - lastWrite < 500) return
      lastWrite = now
      // Progress is advisory: a failed write must not fail the job (nor go unhandled).
      const n = await this.db
        .run(
          "UPDATE ml_training_jobs SET progress = ?, stage = ?, heartbeat_at = ? WHERE id = ? AND status IN ('pending', 'running')",
          [Math.round(progress * 1000) / 1000, stage, now, jobId],
        )
        .catch((e) => this.log.warn('training progress not stored', { job: jobId, error: String(e) }))
      // Settled elsewhere (cancelled through another instance): stop training here too.
      if (n === 0 && !run.cancelled) stop(run)
    }
    await this.db.run(
      "UPDATE ml_training_jobs SET status = 'running', stage = 'reading data', started_at = ?, heartbeat_at = ? WHERE id = ? AND status = 'pending'",
      [Date.now(), Date.now(), jobId],
    )
    try {
      const check = () => {
        if (run.cancelled) throw new Cancelled()
      }
      const type = model.type as ModelType
      let built: Built
      if (cfg.source === 'csv') {
        const ds = await this.db.get<{ content: string }>('SELECT content FROM ml_datasets WHERE id = ?', [
          cfg.query,
        ])
        if (!ds) throw new Error(`dataset '${cfg.query}' was deleted`)
        built = await buildCsv(type, cfg, ds.content, this.config.maxRows)
      } else
        built = await fromEvents(type, cfg, {
          events: this.events(),
          gameId: model.game_id,
          maxRows: this.config.maxRows,
          now: Date.now(),
          check,
          progress: (s) => void update(0.2 * s, 'reading data'),
        })
      check()
      if (built.rowsUsed === 0)
        throw new Error(`no usable rows: ${built.rowsSkipped} rows lacked a feature or the label`)
      await update(0.2, 'training', true)
      const result = await this.fit(
        run,
        {
          type,
          algorithm: model.algorithm,
          hyperparameters: fromJson(job.hyperparameters, {}),
          classes: built.classes,
          ...built.data,
        },
        (s) => void update(0.2 + 0.75 * s, 'training'),
      )
      check()
      await this.end(jobId, 'completed', { result: { ...result, built } })
    } catch (e) {
      if (e instanceof Cancelled || run.cancelled) return
      await this.end(jobId, 'failed', { error: String((e as Error)?.message ?? e) })
    }
  }

  private fit(
    run: Running,
    req: TrainRequest,
    progress: (s: number) => void,
  ): Promise<{ artifact: Artifact; metrics: Metrics }> {
    return new Promise((resolve, reject) => {
      const w = new Worker(workerEntry())
      run.worker = w
      let settled = false
      const done = (f: () => void) => {
        if (settled) return
        settled = true
        w.terminate()
        f()
      }
      w.onmessage = (m: MessageEvent<TrainReply>) => {
        const r = m.data
        if (r.kind === 'progress') progress(r.share)
        else if (r.kind === 'done')
          done(() => resolve({ artifact: r.artifact as Artifact, metrics: r.metrics }))
        else done(() => reject(new Error(r.message)))
      }
      w.onerror = (e) => done(() => reject(new Error(`training thread failed: ${e.message}`)))
      w.addEventListener('close', () =>
        done(() => reject(run.cancelled ? new Cancelled() : new Error('training thread exited'))),
      )
      w.postMessage(req, [req.x.buffer, req.y.buffer])
    })
  }
}
