import { type Db, type Param, fromJson, iso, newId, selectPage } from '../../core/db'
import { Conflict, NotFound, invalidField, parseSort } from '../../core/http'
import type { GamesService } from '../games/types'
import {
  ALGORITHMS,
  type Artifact,
  type Metrics,
  type ModelType,
  builtinAlgorithm,
  canonicalAlgorithm,
} from './algorithms'
import {
  type AbTestState,
  COLS,
  type ModelRow,
  SORTABLE,
  type VersionRow,
  readMetrics,
  toModel,
} from './model-rows'
import type { DatasetConfig, ListQuery, Model, ModelCreate, ModelUpdate } from './schema'

export { type AbTestState, type ModelRow, type VersionRow, servingEndpoint, toModel } from './model-rows'

/** What a model has besides its row, each by `model_id`: deleted with it. */
const MODEL_TABLES = [
  'ml_model_versions',
  'ml_training_jobs',
  'ml_datasets',
  'ml_predictions',
  'ml_daily',
  'ml_latency',
  'ml_drift_alerts',
]

const num = (v: unknown) => (v === null || v === undefined ? undefined : Number(v))

/**
 * The registry and its lifecycle: DRAFT -> TRAINING (train) -> EVALUATING (job completed) or
 * FAILED (job failed) -> DEPLOYED (deploy); ARCHIVED by archive. Every status change is a
 * compare-and-set on the status read, so two concurrent moves cannot both win.
 */
export function modelsStore(db: Db, games: GamesService) {
  async function row(id: string): Promise<ModelRow> {
    const r = await db.get<ModelRow>(`SELECT ${COLS} FROM ml_models WHERE id = ?`, [id])
    if (!r) throw new NotFound(`model '${id}' not found`)
    return r
  }

  async function metricsOf(r: ModelRow): Promise<Metrics | undefined> {
    const v = r.deployed_version ?? r.trained_version
    if (v === null) return undefined
    const m = await db.get<{ metrics: string }>(
      'SELECT metrics FROM ml_model_versions WHERE model_id = ? AND version = ?',
      [r.id, v],
    )
    return m ? readMetrics(m.metrics) : undefined
  }

  async function find(id: string): Promise<Model> {
    const r = await row(id)
    return toModel(r, await metricsOf(r))
  }

  /** Writes `sets` when the status is still `before.status`; 409 otherwise. */
  async function write(before: ModelRow, sets: string, args: Param[], tx: Db = db): Promise<ModelRow> {
    const r = await tx.get<ModelRow>(
      `UPDATE ml_models SET ${sets}, updated_at = ? WHERE id = ? AND status = ? AND updated_at = ? RETURNING ${COLS}`,
      [
        ...args,
        Math.max(Date.now(), Number(before.updated_at) + 1),
        before.id,
        before.status,
        before.updated_at,
      ],
    )
    if (!r) throw new Conflict(`model '${before.id}' changed concurrently; read it again and retry`)
    return r
  }

  /** A built-in algorithm by its canonical name; any other is kept as given (a model trained elsewhere). */
  function algorithmFor(type: ModelType, name: string | undefined, field: string): string {
    if (name === undefined) return ALGORITHMS[type][0]
    const given = name.trim()
    if (!given) throw invalidField(field, 'must not be blank')
    const c = canonicalAlgorithm(type, given)
    if (c) return c
    // A built-in name of another type is a mistake, not a model trained elsewhere.
    const other = builtinAlgorithm(given)
    if (other) {
      const of = (Object.keys(ALGORITHMS) as ModelType[]).find((t) => ALGORITHMS[t].includes(other))
      throw invalidField(
        field,
        `'${given}' is a built-in ${of} algorithm; a ${type} model trains with ${ALGORITHMS[type].join(', ')} (or names one trained elsewhere)`,
      )
    }
    return given
  }

  /** Another model's running A/B test using this one as its baseline, if any. */
  async function baselineOf(id: string): Promise<string | undefined> {
    const rows = await db.all<{ id: string; ab_test: string }>(
      'SELECT id, ab_test FROM ml_models WHERE ab_test IS NOT NULL',
    )
    return rows.find((r) => fromJson<AbTestState | null>(r.ab_test, null)?.baselineModelId === id)?.id
  }

  async function archive(before: ModelRow): Promise<ModelRow> {
    if (before.status === 'ARCHIVED') throw new Conflict(`model '${before.id}' is already ARCHIVED`)
    if (before.status === 'TRAINING')
      throw new Conflict(`model '${before.id}' is TRAINING; cancel the job or wait for it before archiving`)
    const user = await baselineOf(before.id)
    if (user)
      throw new Conflict(
        `model '${before.id}' is the baseline of model '${user}''s A/B test; stop that test first`,
      )
    return write(before, "status = 'ARCHIVED', ab_test = NULL", [])
  }

  return {
    row,
    get: find,
    write,
    baselineOf,

    async create(input: ModelCreate): Promise<Model> {
      const algorithm = algorithmFor(input.type, input.algorithm, 'body.algorithm')
      if (!(await games.gameExists(input.gameId)))
        throw invalidField('body.gameId', `game '${input.gameId}' not found`)
      const now = Date.now()
      const r = await db.get<ModelRow>(
        `INSERT INTO ml_models (id, game_id, name, type, algorithm, framework, description, status, version, created_at, updated_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, 'DRAFT', 1, ?, ?) ON CONFLICT DO NOTHING RETURNING ${COLS}`,
        [
          newId(),
          input.gameId,
          input.name.trim(),
          input.type,
          algorithm,
          input.framework ?? 'liveops',
          input.description ?? '',
          now,
          now,
        ],
      )
      if (!r)
        throw new Conflict(`a model named '${input.name.trim()}' exists in game '${input.gameId}'`, {
          field: 'body.name',
        })
      return toModel(r)
    },

    async list(q: ListQuery) {
      const page = q.page ?? 0
      const size = q.size ?? 20
      const { rows, total } = await selectPage<ModelRow>(db, {
        table: 'ml_models',
        cols: COLS,
        filters: [
          ['game_id', q.gameId],
          ['type', q.type],
          ['status', q.status],
        ],
        order: parseSort(q.sort, SORTABLE, 'created_at DESC'),
        page,
        size,
      })
      return { items: rows.map((r) => toModel(r)), total, page, size }
    },

    /**
     * Name, description, framework and algorithm change freely (the algorithm is used by the next
     * training, not while one runs); the type only while DRAFT; the game never. A status named
     * here may only archive or restore: the other moves have their own actions.
     */
    async update(id: string, patch: ModelUpdate): Promise<Model> {
      let before = await row(id)
      if (patch.gameId !== undefined && patch.gameId !== before.game_id)
        throw invalidField('body.gameId', 'is fixed after create')
      const type = (patch.type ?? before.type) as ModelType
      if (type !== before.type && before.status !== 'DRAFT')
        throw new Conflict(`model '${id}' is ${before.status}: its type can change only while DRAFT`, {
          field: 'body.type',
        })
      let algorithm = before.algorithm
      if (patch.algorithm !== undefined) algorithm = algorithmFor(type, patch.algorithm, 'body.algorithm')
      else if (type !== before.type && canonicalAlgorithm(before.type as ModelType, before.algorithm))
        algorithm = ALGORITHMS[type][0]
      if (algorithm !== before.algorithm && before.status === 'TRAINING')
        throw new Conflict(`model '${id}' is TRAINING; change its algorithm after the job ends`, {
          field: 'body.algorithm',
        })
      const name = patch.name?.trim() ?? before.name
      if (name !== before.name) {
        const dup = await db.get('SELECT id FROM ml_models WHERE game_id = ? AND name = ? AND id <> ?', [
          before.game_id,
          name,
          id,
        ])
        if (dup)
          throw new Conflict(`a model named '${name}' exists in game '${before.game_id}'`, {
            field: 'body.name',
          })
      }
      if (patch.status !== undefined && patch.status !== before.status) {
        if (patch.status === 'ARCHIVED') before = await archive(before)
        else if (
          before.status === 'ARCHIVED' &&
          (patch.status === 'DRAFT' || patch.status === 'EVALUATING')
        ) {
          const trained = before.trained_version !== null
          if (trained !== (patch.status === 'EVALUATING'))
            throw new Conflict(
              `an archived model is restored to ${trained ? 'EVALUATING (it has trained versions)' : 'DRAFT (it was never trained)'}`,
              { field: 'body.status' },
            )
          before = await write(
            before,
            'status = ?, deployed_version = NULL, canary_version = NULL, canary_percent = NULL',
            [patch.status],
          )
        } else
          throw new Conflict(
            `model '${id}' is ${before.status}: a move to ${patch.status} is made by ${
              {
                TRAINING: 'POST /train',
                DEPLOYED: 'POST /deploy',
                EVALUATING: 'a completed training job',
                FAILED: 'a failed training job',
                DRAFT: 'restoring an archived, never trained model',
              }[patch.status]
            }`,
            { field: 'body.status' },
          )
      }
      const r = await write(before, 'name = ?, type = ?, algorithm = ?, framework = ?, description = ?', [
        name,
        type,
        algorithm,
        patch.framework ?? before.framework,
        patch.description ?? before.description,
      ])
      return toModel(r, await metricsOf(r))
    },

    async archive(id: string): Promise<Model> {
      return toModel(await archive(await row(id)))
    },

    /** Its versions, jobs, data sets, predictions and rollups go with it. */
    async remove(id: string): Promise<void> {
      const r = await row(id)
      if (r.status === 'DEPLOYED')
        throw new Conflict(`model '${id}' is DEPLOYED; archive it before deleting it`)
      if (r.status === 'TRAINING')
        throw new Conflict(`model '${id}' is TRAINING; cancel the job before deleting it`)
      const user = await baselineOf(id)
      if (user)
        throw new Conflict(
          `model '${id}' is the baseline of model '${user}''s A/B test; stop that test first`,
        )
      await db.tx(async (tx) => {
        const n = await tx.run(
          "DELETE FROM ml_models WHERE id = ? AND status NOT IN ('DEPLOYED', 'TRAINING')",
          [id],
        )
        if (!n) throw new Conflict(`model '${id}' changed concurrently; read it again and retry`)
        for (const table of MODEL_TABLES) await tx.run(`DELETE FROM ${table} WHERE model_id = ?`, [id])
      })
    },

    /**
     * A deleted game's models go with it, whatever their status, with everything `remove` takes;
     * the ids of the models deleted. (The caller stops their jobs and drops their cached deployments.)
     */
    async removeGame(gameId: string): Promise<string[]> {
      return db.tx(async (tx) => {
        const ids = await tx.all<{ id: string }>('SELECT id FROM ml_models WHERE game_id = ?', [gameId])
        if (!ids.length) return []
        for (const table of MODEL_TABLES)
          await tx.run(
            `DELETE FROM ${table} WHERE model_id IN (SELECT id FROM ml_models WHERE game_id = ?)`,
            [gameId],
          )
        await tx.run('DELETE FROM ml_models WHERE game_id = ?', [gameId])
        return ids.map((r) => r.id)
      })
    },

    /** Every game that has models. */
    async gameIds(): Promise<string[]> {
      const rows = await db.all<{ game_id: string }>('SELECT DISTINCT game_id FROM ml_models')
      return rows.map((r) => r.game_id)
    },

    /** The ids of a game's models. */
    async idsOf(gameId: string): Promise<string[]> {
      const rows = await db.all<{ id: string }>('SELECT id FROM ml_models WHERE game_id = ?', [gameId])
      return rows.map((r) => r.id)
    },

    async version(id: string, version: number): Promise<VersionRow | undefined> {
      return db.get<VersionRow>('SELECT * FROM ml_model_versions WHERE model_id = ? AND version = ?', [
        id,
        version,
      ])
    },

    async versions(id: string) {
      const r = await row(id)
      const rows = await db.all<VersionRow>(
        'SELECT model_id, version, job_id, algorithm, metrics, hyperparameters, dataset_config, created_at, artifact FROM ml_model_versions WHERE model_id = ? ORDER BY version DESC',
        [id],
      )
      const deployed = r.status === 'ARCHIVED' ? null : num(r.deployed_version)
      const canary = num(r.canary_version)
      return rows.map((v) => {
        const n = Number(v.version)
        return {
          version: n,
          status:
            n === deployed
              ? ('serving' as const)
              : n === canary
                ? ('canary' as const)
                : n > (deployed ?? 0)
                  ? ('candidate' as const)
                  : ('retired' as const),
          jobId: v.job_id,
          algorithm: v.algorithm,
          metrics: readMetrics(v.metrics),
          hyperparameters: fromJson<Record<string, number>>(v.hyperparameters, {}),
          datasetConfig: fromJson<DatasetConfig>(v.dataset_config, {
            source: 'events',
            query: '',
            features: [],
          }),
          createdAt: iso(v.created_at)!,
        }
      })
    },

    /** Stores a trained version and moves the model on to EVALUATING, in one transaction. */
    async addVersion(
      tx: Db,
      modelId: string,
      job: { id: string; hyperparameters: Record<string, number>; datasetConfig: DatasetConfig },
      artifact: Artifact,
      metrics: Metrics,
    ): Promise<number> {
      const before = await tx.get<ModelRow>(`SELECT ${COLS} FROM ml_models WHERE id = ?`, [modelId])
      if (!before) throw new NotFound(`model '${modelId}' not found`)
      if (before.status !== 'TRAINING')
        throw new Conflict(`model '${modelId}' is ${before.status}, not TRAINING`)
      // A model is created at version 1; each completed training adds one (upstream's rule), so the
      // first training yields version 2.
      const version = Number(before.version) + 1
      await tx.run(
        'INSERT INTO ml_model_versions (model_id, version, job_id, algorithm, artifact, metrics, hyperparameters, dataset_config, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)',
        [
          modelId,
          version,
          job.id,
          artifact.algorithm,
          JSON.stringify(artifact),
          JSON.stringify(metrics),
          JSON.stringify(job.hyperparameters),
          JSON.stringify(job.datasetConfig),
          Date.now(),
        ],
      )
      await write(before, "status = 'EVALUATING', version = ?, trained_version = ?", [version, version], tx)
      return version
    },
  }
}

export type ModelsStore = ReturnType<typeof modelsStore>
