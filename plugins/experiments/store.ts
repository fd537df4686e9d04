import { type Db, type Param, fromJson, iso, newId, selectPage } from '../../core/db'
import { Conflict, NotFound, invalidField, parseSort } from '../../core/http'
import type { GamesService } from '../games/types'
import type {
  Experiment,
  ExperimentConfig,
  ExperimentCreate,
  ExperimentStatus,
  ExperimentUpdate,
  ListQuery,
  PublicExperiment,
} from './schema'

type Row = {
  id: string
  game_id: string
  environment: string
  name: string
  description: string
  status: string
  salt: string
  config: string
  created_at: number
  updated_at: number
  published_at: number | null
}

const COLS =
  'id, game_id, environment, name, description, status, salt, config, created_at, updated_at, published_at'
const SORTABLE = { name: 'name', status: 'status', createdAt: 'created_at', updatedAt: 'updated_at' }

const toExperiment = (r: Row): Experiment => {
  const e: Experiment = {
    id: r.id,
    gameId: r.game_id,
    environment: r.environment,
    name: r.name,
    description: r.description,
    status: r.status as ExperimentStatus,
    salt: r.salt,
    config: fromJson<ExperimentConfig>(r.config, { variants: [] }),
    createdAt: iso(r.created_at)!,
    updatedAt: iso(r.updated_at)!,
  }
  if (r.published_at !== null) e.publishedAt = iso(r.published_at)
  return e
}

/** Weights are percentages; sums like 33.3 + 33.3 + 33.4 must pass despite binary fractions. */
const WEIGHT_EPSILON = 1e-9

/**
 * Checks what the schema cannot express and returns the config as stored: targeting codes upper
 * case and de-duplicated, so the SDK compares without work. A draft may lack variants; when
 * there are any, their names are unique and their weights sum to 100.
 */
export function normalizeConfig(config: ExperimentConfig, field = 'body.config'): ExperimentConfig {
  const seen = new Set<string>()
  config.variants.forEach((v, i) => {
    if (seen.has(v.name))
      throw invalidField(`${field}.variants[${i}].name`, `duplicate variant name '${v.name}'`)
    seen.add(v.name)
  })
  if (config.variants.length) {
    const sum = config.variants.reduce((a, v) => a + v.weight, 0)
    if (Math.abs(sum - 100) > WEIGHT_EPSILON)
      throw invalidField(`${field}.variants`, `weights must sum to 100, got ${+sum.toFixed(6)}`)
  }
  const upper = (list: readonly string[] | undefined) =>
    list ? [...new Set(list.map((s) => s.toUpperCase()))] : undefined
  const out: ExperimentConfig = { variants: config.variants.map((v) => ({ name: v.name, weight: v.weight })) }
  if (config.targeting) {
    const targeting: NonNullable<ExperimentConfig['targeting']> = {}
    const platform = upper(config.targeting.platform)
    const countries = upper(config.targeting.countries)
    if (platform) targeting.platform = platform
    if (countries) targeting.countries = countries
    out.targeting = targeting
  }
  if (config.metrics) out.metrics = { ...config.metrics }
  return out
}

/** Why the config cannot run, or an empty list (upstream's publish check). */
export function runProblems(config: ExperimentConfig): string[] {
  const problems: string[] = []
  if (config.variants.length < 2)
    problems.push(`config.variants: at least two variants are needed to run, found ${config.variants.length}`)
  config.variants.forEach((v, i) => {
    if (!(v.weight > 0))
      problems.push(`config.variants[${i}].weight: variant '${v.name}' needs a positive weight to run`)
  })
  return problems
}

const sameVariants = (a: ExperimentConfig, b: ExperimentConfig) =>
  a.variants.length === b.variants.length &&
  a.variants.every((v, i) => v.name === b.variants[i].name && v.weight === b.variants[i].weight)

function randomSalt(): string {
  return Buffer.from(crypto.getRandomValues(new Uint8Array(8))).toString('hex')
}

/**
 * Experiments and their lifecycle: draft -> running (publish) -> paused (pause) -> running
 * (publish again). `changed` runs after every committed write and before the answer, so the
 * public configuration read never lags a write this process acknowledged.
 */
export function experimentsStore(
  db: Db,
  games: GamesService,
  changed: (gameId: string, environment: string) => Promise<void>,
) {
  async function find(id: string): Promise<Experiment> {
    const row = await db.get<Row>(`SELECT ${COLS} FROM experiments WHERE id = ?`, [id])
    if (!row) throw new NotFound(`experiment '${id}' not found`)
    return toExperiment(row)
  }

  async function cannotRun(
    e: Pick<Experiment, 'id' | 'gameId' | 'environment' | 'config'>,
  ): Promise<string[]> {
    const problems = runProblems(e.config)
    if (!(await games.environment(e.gameId, e.environment)))
      problems.push(`environment '${e.environment}' of game '${e.gameId}' no longer exists`)
    return problems
  }

  /** Compare-and-set on status and update time, so two concurrent writes cannot both win. */
  async function write(before: Experiment, sets: string, args: Param[]): Promise<Experiment> {
    const row = await db.get<Row>(
      `UPDATE experiments SET ${sets}, updated_at = ? WHERE id = ? AND status = ? AND updated_at = ? RETURNING ${COLS}`,
      [
        ...args,
        Math.max(Date.now(), Date.parse(before.updatedAt) + 1),
        before.id,
        before.status,
        Date.parse(before.updatedAt),
      ],
    )
    if (!row) {
      await find(before.id)
      throw new Conflict(`experiment '${before.id}' changed concurrently; read it again and retry`)
    }
    await changed(row.game_id, row.environment)
    return toExperiment(row)
  }

  return {
    get: find,

    async create(input: ExperimentCreate): Promise<Experiment> {
      const config = normalizeConfig(input.config)
      if (!(await games.gameExists(input.gameId)))
        throw invalidField('body.gameId', `game '${input.gameId}' not found`)
      if (!(await games.environment(input.gameId, input.environment)))
        throw invalidField(
          'body.environment',
          `environment '${input.environment}' not found in game '${input.gameId}'`,
        )
      const now = Date.now()
      const row = await db.get<Row>(
        `INSERT INTO experiments (${COLS}) VALUES (?, ?, ?, ?, ?, 'draft', ?, ?, ?, ?, NULL) ON CONFLICT DO NOTHING RETURNING ${COLS}`,
        [
          newId(),
          input.gameId,
          input.environment,
          input.name.trim(),
          input.description ?? '',
          input.salt ?? randomSalt(),
          JSON.stringify(config),
          now,
          now,
        ],
      )
      if (!row)
        throw new Conflict(
          `an experiment named '${input.name.trim()}' exists in ${input.gameId}/${input.environment}`,
          { field: 'body.name' },
        )
      return toExperiment(row)
    },

    async list(q: ListQuery) {
      const page = q.page ?? 0
      const size = q.size ?? 20
      const { rows, total } = await selectPage<Row>(db, {
        table: 'experiments',
        cols: COLS,
        filters: [
          ['game_id', q.gameId],
          ['environment', q.environment],
          ['status', q.status],
        ],
        order: parseSort(q.sort, SORTABLE, 'created_at DESC'),
        page,
        size,
      })
      return { items: rows.map(toExperiment), total, page, size }
    },

    /**
     * Game and environment are fixed: repeating them unchanged is fine (clients PUT what they
     * read), changing them is a 400. New variants or a new salt re-bucket users, so once an
     * experiment has run they need `force`.
     */
    async update(id: string, patch: ExperimentUpdate, force = false): Promise<Experiment> {
      const before = await find(id)
      if (patch.gameId !== undefined && patch.gameId !== before.gameId)
        throw invalidField('body.gameId', 'is fixed after create')
      if (patch.environment !== undefined && patch.environment !== before.environment)
        throw invalidField('body.environment', 'is fixed after create')
      const config = patch.config ? normalizeConfig(patch.config) : before.config
      const salt = patch.salt ?? before.salt
      if (before.status !== 'draft' && !force) {
        if (!sameVariants(config, before.config))
          throw new Conflict(
            `experiment '${id}' is ${before.status}: changing its variants re-buckets users; send force=true to do it anyway`,
            { field: 'body.config.variants' },
          )
        if (salt !== before.salt)
          throw new Conflict(
            `experiment '${id}' is ${before.status}: changing its salt re-buckets every user; send force=true to do it anyway`,
            {
              field: 'body.salt',
            },
          )
      }
      if (before.status === 'running') {
        const problems = runProblems(config)
        if (problems.length)
          throw new Conflict(
            `experiment '${id}' is running and the new config cannot run: ${problems.join('; ')}`,
            { reasons: problems },
          )
      }
      const name = patch.name?.trim() ?? before.name
      if (name !== before.name) {
        const dup = await db.get(
          'SELECT id FROM experiments WHERE game_id = ? AND environment = ? AND name = ? AND id <> ?',
          [before.gameId, before.environment, name, id],
        )
        if (dup)
          throw new Conflict(
            `an experiment named '${name}' exists in ${before.gameId}/${before.environment}`,
            { field: 'body.name' },
          )
      }
      return write(before, 'name = ?, description = ?, salt = ?, config = ?', [
        name,
        patch.description ?? before.description,
        salt,
        JSON.stringify(config),
      ])
    },

    /** A running experiment is still bucketing users: pause it first. */
    async remove(id: string): Promise<void> {
      const e = await find(id)
      if (e.status === 'running')
        throw new Conflict(`experiment '${id}' is running; pause it before deleting it`)
      const n = await db.run(`DELETE FROM experiments WHERE id = ? AND status <> 'running'`, [id])
      if (!n) throw new Conflict(`experiment '${id}' changed concurrently; read it again and retry`)
      await changed(e.gameId, e.environment)
    },

    async publish(id: string): Promise<Experiment> {
      const e = await find(id)
      if (e.status === 'running') throw new Conflict(`experiment '${id}' is already running`)
      const problems = await cannotRun(e)
      if (problems.length)
        throw new Conflict(`experiment '${id}' cannot run: ${problems.join('; ')}`, { reasons: problems })
      return write(e, "status = 'running', published_at = ?", [Date.now()])
    },

    async pause(id: string): Promise<Experiment> {
      const e = await find(id)
      if (e.status !== 'running')
        throw new Conflict(
          `experiment '${id}' is ${e.status}, not running; only a running experiment can be paused`,
        )
      return write(e, "status = 'paused'", [])
    },

    /**
     * A deleted environment (or every one of a deleted game) takes its experiments along: they are
     * found by name, so a running one would come back, with its salt and variants, in an
     * environment created later under the same name. Only those created by `before` (the deletion)
     * go, so an experiment of a name already created again stays.
     */
    async forget(gameId: string, environment: string | undefined, before: number): Promise<void> {
      const envs =
        environment !== undefined
          ? [environment]
          : (
              await db.all<{ environment: string }>(
                'SELECT DISTINCT environment FROM experiments WHERE game_id = ?',
                [gameId],
              )
            ).map((r) => r.environment)
      for (const env of envs) {
        const n = await db.run(
          'DELETE FROM experiments WHERE game_id = ? AND environment = ? AND created_at <= ?',
          [gameId, env, before],
        )
        if (n) await changed(gameId, env)
      }
    },

    /** Every game and environment that has experiments of any status. */
    async scopes(): Promise<[string, string][]> {
      const rows = await db.all<{ game_id: string; environment: string }>(
        'SELECT DISTINCT game_id, environment FROM experiments',
      )
      return rows.map((r) => [r.game_id, r.environment])
    },

    /** The public read of one environment, oldest first so the order is stable. */
    async running(gameId: string, environment: string): Promise<PublicExperiment[]> {
      const rows = await db.all<Pick<Row, 'id' | 'salt' | 'config'>>(
        `SELECT id, salt, config FROM experiments WHERE game_id = ? AND environment = ? AND status = 'running' ORDER BY created_at, id`,
        [gameId, environment],
      )
      return rows.map((r) => ({
        id: r.id,
        salt: r.salt,
        config: fromJson<ExperimentConfig>(r.config, { variants: [] }),
      }))
    },

    /** Per environment with running experiments: a fingerprint that moves on any change to them. */
    async fingerprints(): Promise<Map<string, string>> {
      const rows = await db.all<{ game_id: string; environment: string; n: number; m: number }>(
        `SELECT game_id, environment, COUNT(*) AS n, MAX(updated_at) AS m FROM experiments WHERE status = 'running' GROUP BY game_id, environment`,
      )
      return new Map(rows.map((r) => [`${r.game_id}\n${r.environment}`, `${r.n}:${r.m}`]))
    },
  }
}

export type ExperimentsStore = ReturnType<typeof experimentsStore>
