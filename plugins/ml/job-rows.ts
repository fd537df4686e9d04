import { fromJson, iso } from '../../core/db'
import { readMetrics } from './model-rows'
import type { DatasetConfig, JobStatus, TrainingJob } from './schema'

/* Training jobs as stored, and how a row becomes the API's job. plugins/ml/jobs.ts runs them. */

export type JobRow = {
  id: string
  model_id: string
  status: string
  progress: number
  stage: string
  dataset_config: string
  hyperparameters: string
  metrics: string | null
  error: string | null
  version: number | null
  rows_used: number | null
  rows_skipped: number | null
  previous_status: string
  created_at: number
  started_at: number | null
  finished_at: number | null
}

export const COLS =
  'id, model_id, status, progress, stage, dataset_config, hyperparameters, metrics, error, version, rows_used, rows_skipped, previous_status, created_at, started_at, finished_at'

export function toJob(r: JobRow): TrainingJob {
  const j: TrainingJob = {
    id: r.id,
    modelId: r.model_id,
    status: r.status as JobStatus,
    progress: Number(r.progress),
    stage: r.stage,
    datasetConfig: fromJson<DatasetConfig>(r.dataset_config, { source: 'events', query: '', features: [] }),
    hyperparameters: fromJson<Record<string, number>>(r.hyperparameters, {}),
    createdAt: iso(r.created_at)!,
  }
  if (r.metrics) j.metrics = readMetrics(r.metrics)
  if (r.error) j.error = r.error
  if (r.version !== null) j.version = Number(r.version)
  if (r.rows_used !== null) j.rowsUsed = Number(r.rows_used)
  if (r.rows_skipped !== null) j.rowsSkipped = Number(r.rows_skipped)
  if (r.started_at !== null) j.startedAt = iso(r.started_at)
  if (r.finished_at !== null) j.finishedAt = iso(r.finished_at)
  return j
}
