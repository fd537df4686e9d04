import { fromJson, iso } from '../../core/db'
import { invalidField } from '../../core/http'
import { maskSecrets } from '../../core/secrets'
import type { Metrics, ModelType } from './algorithms'
import { type Model, type ModelStatus, ServingEndpoint } from './schema'

/*
 * ML models as stored: the model and version rows, how a row becomes the API's model (the serving
 * endpoint masked), and the check of a serving endpoint. plugins/ml/store.ts reads and writes them.
 */

export type ModelRow = {
  id: string
  game_id: string
  name: string
  type: string
  algorithm: string
  framework: string
  description: string
  status: string
  version: number
  trained_version: number | null
  deployed_version: number | null
  canary_version: number | null
  canary_percent: number | null
  serving_endpoint: string | null
  canary_deployment: number | null
  deployed_at: number | null
  ab_test: string | null
  created_at: number
  updated_at: number
}

export const COLS =
  'id, game_id, name, type, algorithm, framework, description, status, version, trained_version, deployed_version, canary_version, canary_percent, serving_endpoint, canary_deployment, deployed_at, ab_test, created_at, updated_at'
export const SORTABLE = {
  name: 'name',
  status: 'status',
  type: 'type',
  createdAt: 'created_at',
  updatedAt: 'updated_at',
}

export interface AbTestState {
  baselineModelId: string
  trafficSplit: number
  startedAt: number
}

export function toModel(r: ModelRow, metrics?: Metrics): Model {
  const m: Model = {
    id: r.id,
    gameId: r.game_id,
    name: r.name,
    type: r.type as ModelType,
    algorithm: r.algorithm,
    framework: r.framework,
    description: r.description,
    status: r.status as ModelStatus,
    version: Number(r.version),
    createdAt: iso(r.created_at)!,
    updatedAt: iso(r.updated_at)!,
  }
  if (r.trained_version !== null) m.trainedVersion = Number(r.trained_version)
  if (r.deployed_version !== null) {
    m.deployedVersion = Number(r.deployed_version)
    const ep = r.serving_endpoint ?? 'builtin'
    m.servingEndpoint = ep === 'builtin' ? ep : (maskSecrets(ServingEndpoint, ep) as string)
    m.canaryDeployment = !!Number(r.canary_deployment)
    m.deployedAt = iso(r.deployed_at)
  }
  if (r.canary_version !== null) {
    m.canaryVersion = Number(r.canary_version)
    m.canaryPercent = Number(r.canary_percent)
  }
  const ab = fromJson<AbTestState | null>(r.ab_test, null)
  if (ab) m.abTest = { ...ab, startedAt: iso(ab.startedAt)! }
  if (metrics) m.metrics = metrics
  return m
}

/**
 * Stored metrics as the API answers them: numbers only. A NaN or an Infinity a release before
 * fits were checked stored became null in the JSON, and failed every read of its model.
 */
export function readMetrics(json: string | null): Metrics {
  const m = fromJson<Record<string, unknown>>(json, {})
  const out: Metrics = {}
  for (const [k, v] of Object.entries(m ?? {})) if (typeof v === 'number') out[k] = v
  return out
}

export interface VersionRow {
  model_id: string
  version: number
  job_id: string
  algorithm: string
  artifact: string
  metrics: string
  hyperparameters: string
  dataset_config: string
  created_at: number
}

const ENDPOINT = /^https?:\/\/[^\s/]+/

/** `builtin` (or absent) serves in process; an http(s) URL forwards. */
export function servingEndpoint(v: string | undefined): string {
  if (v === undefined || v === '' || v === 'builtin') return 'builtin'
  if (!ENDPOINT.test(v) || !URL.canParse(v))
    throw invalidField('body.servingEndpoint', "must be 'builtin' or an http(s) URL")
  return v
}
