import { fromJson, newId } from '../../core/db'
import { Conflict, HttpError, Invalid, NotFound, invalidField } from '../../core/http'
import { type Outbound, outboundFailure } from '../../core/outbound'
import { maskUrl, unmaskSecrets } from '../../core/secrets'
import { murmur3 } from '../../sdk/murmur3'
import { type Artifact, type ModelType, type Prediction, canonicalAlgorithm, predict } from './algorithms'
import { type CachedDeployment, DeploymentCache } from './deployments'
import type { PredictionLog, Served } from './log'
import { type DeployBody, type Model, type PredictResponse, ServingEndpoint } from './schema'
import { type AbTestState, type ModelRow, type ModelsStore, servingEndpoint, toModel } from './store'

export interface ServingConfig {
  /** How stale a cached deployment may be, in ms: bounds how late another instance's deploy shows. */
  cacheTtlMs: number
  canaryPercent: number
  forwardTimeoutMs: number
  /** Serving endpoints are given through the API: every forward goes through the policy. */
  outbound: Outbound
  /** The clock of the deployment cache (tests). */
  now?: () => number
}

type Compiled = { artifact: Artifact; features: string[]; vector: Float64Array }

const NO_FEATURES = new Float64Array(0)
/** A model registered with an algorithm liveops does not train: it is served by its endpoint only. */
export const registryModel = (row: ModelRow) => !canonicalAlgorithm(row.type as ModelType, row.algorithm)

const isTimeSeries = (a: Artifact) => a.type === 'TIME_SERIES'

/** One arm of a cached deployment: who answers, with its compiled version once loaded. */
type Arm = Served & { row: ModelRow; compiled?: Compiled }
type Deployment = CachedDeployment<Arm>

/**
 * Predictions: which model and version answers (A/B test by a stable hash of the entity, canary
 * share, or the deployed version), the feature check, and the answer, in process or forwarded.
 * Deployments are cached for `cacheTtlMs` with their arms, so a prediction served from the cache
 * allocates no routing state; versions never change once stored, so compiled artifacts are
 * cached until evicted.
 */
export class Serving {
  private readonly deployments: DeploymentCache<Arm>
  private compiled = new Map<string, Compiled>()

  /**
   * `publish` tells the other instances on the store that a model changed (ctx.changes), so
   * their cached deployments go too; `cacheTtlMs` stays as the safety net for a lost notice.
   */
  constructor(
    private models: ModelsStore,
    private log: PredictionLog,
    private config: ServingConfig,
    private publish: (modelId: string) => void = () => undefined,
  ) {
    this.deployments = new DeploymentCache((id) => models.row(id), config.cacheTtlMs, config.now ?? Date.now)
  }

  /** A model changed here: forget its cached deployment, here and on the other instances. */
  invalidate(modelId: string): void {
    this.deployments.forget(modelId)
    this.publish(modelId)
  }

  /** Another instance changed the model. */
  forget(modelId: string): void {
    this.deployments.forget(modelId)
  }

  private async compiledOf(modelId: string, version: number): Promise<Compiled> {
    const key = `${modelId}:${version}`
    let c = this.compiled.get(key)
    if (!c) {
      const v = await this.models.version(modelId, version)
      if (!v) throw new Conflict(`model '${modelId}' has no stored version ${version}`)
      const artifact = fromJson<Artifact | null>(v.artifact, null)
      if (!artifact) throw new Conflict(`model '${modelId}' version ${version} has an unreadable artifact`)
      const features = isTimeSeries(artifact) ? ['horizon'] : artifact.features
      c = { artifact, features, vector: new Float64Array(features.length) }
      if (this.compiled.size >= 200) this.compiled.delete(this.compiled.keys().next().value!)
      this.compiled.set(key, c)
    }
    return c
  }

  /** The arm `name` of deployment `d`, answered by `row` at `version`: built once per cached deployment. */
  private arm(d: Deployment, name: string, row: ModelRow, version: number): Arm {
    const a = d.arms[name]
    if (a && a.row === row && a.version === version) return a
    const made: Arm = { modelId: d.row.id, servedBy: row.id, version, arm: name, row }
    d.arms[name] = made
    return made
  }

  /** Which model, version and arm answer for this entity (no promise unless the A/B baseline is read). */
  private route(d: Deployment, entityId: string | undefined): Arm | Promise<Arm> {
    const row = d.row
    const bucket = entityId === undefined ? Math.floor(Math.random() * 100) : murmur3(entityId) % 100
    if (d.ab) return bucket >= d.ab.trafficSplit ? this.baseline(d) : this.challenger(d)
    if (row.canary_version !== null) {
      return bucket < Number(row.canary_percent)
        ? this.arm(d, 'canary', row, Number(row.canary_version))
        : this.arm(d, 'stable', row, Number(row.deployed_version))
    }
    return this.arm(d, 'default', row, Number(row.deployed_version))
  }

  private challenger(d: Deployment): Arm {
    return this.arm(d, 'challenger', d.row, Number(d.row.deployed_version))
  }

  /** The A/B baseline's arm; the challenger answers while the baseline is gone or not deployed. */
  private async baseline(d: Deployment): Promise<Arm> {
    let base: ModelRow | undefined
    try {
      base = (await this.deployments.get(d.ab!.baselineModelId)).row
    } catch {
      base = undefined
    }
    if (base && base.deployed_version !== null && base.status !== 'ARCHIVED')
      return this.arm(d, 'baseline', base, Number(base.deployed_version))
    return this.challenger(d)
  }

  /** The features in the artifact's order; 400 naming every missing or non-numeric one. */
  private vector(c: Compiled, features: Record<string, unknown>): Float64Array {
    const problems: Array<{ field: string; reason: string }> = []
    const v = c.vector
    for (let j = 0; j < c.features.length; j++) {
      const name = c.features[j]
      const x = features[name]
      if (x === undefined || x === null) problems.push({ field: `body.features.${name}`, reason: 'missing' })
      else if (typeof x !== 'number' || !Number.isFinite(x))
        problems.push({ field: `body.features.${name}`, reason: 'must be a finite number' })
      else v[j] = x
    }
    if (
      !problems.length &&
      isTimeSeries(c.artifact) &&
      !(Number.isInteger(v[0]) && v[0] >= 1 && v[0] <= 10_000)
    )
      problems.push({
        field: 'body.features.horizon',
        reason: 'must be an integer from 1 to 10000 (steps after the last observation)',
      })
    if (problems.length)
      throw new Invalid(problems.map((p) => `${p.field}: ${p.reason}`).join('; '), {
        field: problems[0].field,
        errors: problems,
      })
    return v
  }

  private async forward(
    url: string,
    row: ModelRow,
    version: number,
    features: Record<string, unknown>,
    entityId?: string,
  ): Promise<Prediction> {
    let res: Response
    // Named with its credentials and query values masked: the URL may carry a token.
    const shown = maskUrl(url)
    try {
      res = await this.config.outbound.fetch(url, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ modelId: row.id, version, features, entityId }),
        signal: AbortSignal.timeout(this.config.forwardTimeoutMs),
      })
    } catch (e) {
      throw new HttpError(502, 'bad_gateway', `serving endpoint ${shown}: ${outboundFailure(e)}`)
    }
    const body = (await res.json().catch(() => undefined)) as Partial<Prediction> | undefined
    if (!res.ok || !body || body.prediction === undefined)
      throw new HttpError(
        502,
        'bad_gateway',
        `serving endpoint ${shown} answered ${res.status} without a prediction`,
      )
    const probability = Number(body.probability ?? 0)
    return {
      prediction: String(body.prediction),
      probability,
      confidence: Number(body.confidence ?? probability),
    }
  }

  async predict(
    modelId: string,
    features: Record<string, unknown>,
    entityId?: string,
  ): Promise<PredictResponse> {
    const started = performance.now()
    // Awaited only when not cached: a prediction from the caches waits on nothing.
    let d = this.deployments.get(modelId)
    if (d instanceof Promise) d = await d
    const row = d.row
    if (row.status === 'ARCHIVED')
      throw new Conflict(`model '${modelId}' is ARCHIVED and serves no predictions`)
    if (row.deployed_version === null)
      throw new Conflict(
        `model '${modelId}' is ${row.status} and not deployed; deploy a trained version first`,
      )
    let r = this.route(d, entityId)
    if (r instanceof Promise) r = await r
    const endpoint = r.row.serving_endpoint ?? 'builtin'
    let v: Float64Array
    let p: Prediction
    if (endpoint !== 'builtin' && registryModel(r.row)) {
      // Trained elsewhere: no artifact here; its endpoint gets the features as sent.
      v = NO_FEATURES
      p = await this.forward(endpoint, r.row, r.version, features, entityId)
    } else {
      r.compiled ??= await this.compiledOf(r.servedBy, r.version)
      const c = r.compiled
      // The compiled vector is shared: a forwarded prediction, which waits, keeps a copy of its own.
      v = endpoint === 'builtin' ? this.vector(c, features) : this.vector(c, features).slice()
      p =
        endpoint === 'builtin'
          ? predict(c.artifact, v)
          : await this.forward(endpoint, r.row, r.version, features, entityId)
    }
    const latencyMs = performance.now() - started
    const id = newId()
    const createdAt = Date.now()
    this.log.add(r, id, entityId ?? null, p.prediction, p.probability, v, latencyMs * 1000, createdAt)
    const out: PredictResponse = {
      prediction: p.prediction,
      probability: p.probability,
      confidence: p.confidence,
      latencyMs: Math.round(latencyMs * 1000) / 1000,
      predictionId: id,
      modelId: r.servedBy,
      version: r.version,
      arm: r.arm,
    }
    if (p.value !== undefined) out.value = p.value
    return out
  }

  /**
   * EVALUATING, DEPLOYED or FAILED (with a trained version) -> DEPLOYED. Without `version` the
   * newest trained version; an older one rolls back. A canary deploy next to a serving version
   * gives the new one `canaryPercent` of the traffic; deploying the same version without canary
   * promotes it.
   */
  async deploy(id: string, body: DeployBody): Promise<Model> {
    const before = await this.models.row(id)
    // The endpoint as read (masked) keeps the stored one; a changed URL must carry its secrets.
    const given =
      body.servingEndpoint === undefined
        ? undefined
        : (unmaskSecrets(
            ServingEndpoint,
            body.servingEndpoint,
            before.serving_endpoint ?? undefined,
            'body.servingEndpoint',
          ) as string)
    const endpoint = servingEndpoint(given ?? before.serving_endpoint ?? undefined)
    if (endpoint !== 'builtin') await this.config.outbound.refuseEarly(new URL(endpoint).hostname)
    if (registryModel(before)) return this.deployRegistry(before, endpoint, body)
    const reason: Record<string, string> = {
      DRAFT: 'it has never been trained; train it first',
      TRAINING: 'a training job is running; wait for it or cancel it',
      ARCHIVED: 'it is archived; restore it (PUT status) first',
    }
    if (reason[before.status])
      throw new Conflict(`model '${id}' cannot be deployed from ${before.status}: ${reason[before.status]}`)
    if (before.trained_version === null) throw new Conflict(`model '${id}' has no trained version to deploy`)
    const version = body.version ?? Number(before.trained_version)
    if (!(await this.models.version(id, version)))
      throw invalidField('body.version', `model '${id}' has no trained version ${version}`)
    const canary = body.canaryDeployment === true
    const serving = before.deployed_version === null ? null : Number(before.deployed_version)
    const now = Date.now()
    let r: ModelRow
    if (canary && serving !== null && serving !== version)
      r = await this.models.write(
        before,
        "status = 'DEPLOYED', canary_version = ?, canary_percent = ?, serving_endpoint = ?, canary_deployment = 1, deployed_at = ?",
        [version, body.canaryPercent ?? this.config.canaryPercent, endpoint, now],
      )
    else
      r = await this.models.write(
        before,
        "status = 'DEPLOYED', deployed_version = ?, canary_version = NULL, canary_percent = NULL, serving_endpoint = ?, canary_deployment = ?, deployed_at = ?",
        [version, endpoint, canary ? 1 : 0, now],
      )
    this.invalidate(id)
    return toModel(r)
  }

  /**
   * A model trained elsewhere (its algorithm is not built in): DRAFT, EVALUATING, FAILED or
   * DEPLOYED -> DEPLOYED at its current version (or `version`), served by `servingEndpoint`, which
   * it needs. No canary: there is one version here, the one its endpoint serves.
   */
  private async deployRegistry(before: ModelRow, endpoint: string, body: DeployBody): Promise<Model> {
    const id = before.id
    if (before.status === 'ARCHIVED' || before.status === 'TRAINING')
      throw new Conflict(`model '${id}' cannot be deployed from ${before.status}`)
    if (endpoint === 'builtin')
      throw invalidField(
        'body.servingEndpoint',
        `required: the http(s) URL serving model '${id}' (${before.framework} ${before.algorithm} is trained and served elsewhere)`,
      )
    const version = body.version ?? Number(before.version)
    const r = await this.models.write(
      before,
      "status = 'DEPLOYED', deployed_version = ?, canary_version = NULL, canary_percent = NULL, serving_endpoint = ?, canary_deployment = 0, deployed_at = ?",
      [version, endpoint, Date.now()],
    )
    this.invalidate(id)
    return toModel(r)
  }

  /** Starts (or changes) an A/B test with this deployed model as the challenger. */
  async abTest(id: string, body: { baselineModelId: string; trafficSplit: number }): Promise<Model> {
    const before = await this.models.row(id)
    if (body.baselineModelId === id) throw invalidField('body.baselineModelId', 'must be another model')
    const base = await this.models.row(body.baselineModelId).catch((e) => {
      if (e instanceof NotFound)
        throw invalidField('body.baselineModelId', `model '${body.baselineModelId}' not found`)
      throw e
    })
    if (before.status !== 'DEPLOYED')
      throw new Conflict(`model '${id}' is ${before.status}; an A/B test needs it DEPLOYED`)
    if (base.status !== 'DEPLOYED')
      throw new Conflict(`baseline model '${base.id}' is ${base.status}; an A/B test needs it DEPLOYED`)
    if (base.game_id !== before.game_id)
      throw invalidField('body.baselineModelId', `model '${base.id}' belongs to another game`)
    if (base.type !== before.type)
      throw invalidField(
        'body.baselineModelId',
        `model '${base.id}' is ${base.type}, this one ${before.type}`,
      )
    if (base.ab_test)
      throw new Conflict(`baseline model '${base.id}' runs an A/B test of its own; stop it first`)
    const state: AbTestState = {
      baselineModelId: base.id,
      trafficSplit: body.trafficSplit,
      startedAt: Date.now(),
    }
    const r = await this.models.write(before, 'ab_test = ?', [JSON.stringify(state)])
    this.invalidate(id)
    return toModel(r)
  }

  async stopAbTest(id: string): Promise<Model> {
    const before = await this.models.row(id)
    if (!before.ab_test) throw new Conflict(`model '${id}' runs no A/B test`)
    const r = await this.models.write(before, 'ab_test = NULL', [])
    this.invalidate(id)
    return toModel(r)
  }
}
