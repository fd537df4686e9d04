import type { TSchema } from '@sinclair/typebox'
import { t } from 'elysia'
import { PageNumber } from '../../core/schema'
import { SecretUrl } from '../../core/secrets'

/**
 * 'builtin', or the URL predictions are forwarded to: its credentials and query values are
 * secret (masked on every read; sent back masked, they keep the stored ones only for the same URL).
 */
export const ServingEndpoint = SecretUrl(
  t.String({
    maxLength: 2000,
    description:
      "'builtin': served in process. An http(s) URL: predictions are forwarded there; its user:password and query values read masked ('set' plus the last 4). Absent on deploy: the endpoint of the current deployment ('builtin' on a first deploy)",
  }),
)

export const MODEL_STATUSES = ['DRAFT', 'TRAINING', 'EVALUATING', 'DEPLOYED', 'ARCHIVED', 'FAILED'] as const
export type ModelStatus = (typeof MODEL_STATUSES)[number]
// Tuples spelled out: Elysia's response typing needs the literal members.
export const ModelStatus = t.Union([
  t.Literal('DRAFT'),
  t.Literal('TRAINING'),
  t.Literal('EVALUATING'),
  t.Literal('DEPLOYED'),
  t.Literal('ARCHIVED'),
  t.Literal('FAILED'),
])
export const ModelType = t.Union([
  t.Literal('CLASSIFICATION'),
  t.Literal('REGRESSION'),
  t.Literal('CLUSTERING'),
  t.Literal('ANOMALY_DETECTION'),
  t.Literal('TIME_SERIES'),
])
export const JOB_STATUSES = ['pending', 'running', 'completed', 'failed', 'cancelled'] as const
export type JobStatus = (typeof JOB_STATUSES)[number]
export const JobStatus = t.Union([
  t.Literal('pending'),
  t.Literal('running'),
  t.Literal('completed'),
  t.Literal('failed'),
  t.Literal('cancelled'),
])

const Nullable = <T extends TSchema>(s: T) => t.Union([s, t.Null()])
const Metrics = t.Record(t.String(), t.Number(), {
  description:
    'holdout metrics: accuracy, precision, recall, f1, auc (classification); rmse, mae, r2 (regression); rmse, mae, mape (time series); inertia, silhouette (clustering); anomalyRate (anomaly detection); plus rows, trainRows, testRows',
})

export const AbTest = t.Object({
  baselineModelId: t.String(),
  trafficSplit: t.Number({ description: 'percent of entities sent to this model (the challenger)' }),
  startedAt: t.String(),
})

export const Model = t.Object({
  id: t.String(),
  gameId: t.String(),
  name: t.String(),
  type: ModelType,
  algorithm: t.String(),
  framework: t.String(),
  description: t.String(),
  status: ModelStatus,
  version: t.Integer({
    description:
      'the newest version: 1 on create; each completed training adds one (the first training yields 2)',
  }),
  trainedVersion: t.Optional(t.Integer({ description: 'the newest version that has a trained artifact' })),
  deployedVersion: t.Optional(t.Integer({ description: 'the version serving predictions' })),
  canaryVersion: t.Optional(
    t.Integer({ description: 'during a canary deploy: the version taking canaryPercent' }),
  ),
  canaryPercent: t.Optional(t.Integer()),
  servingEndpoint: t.Optional(ServingEndpoint),
  canaryDeployment: t.Optional(t.Boolean()),
  deployedAt: t.Optional(t.String()),
  abTest: t.Optional(AbTest),
  metrics: t.Optional(Metrics),
  createdAt: t.String({ description: 'ISO 8601 UTC' }),
  updatedAt: t.String({ description: 'ISO 8601 UTC' }),
})
export type Model = typeof Model.static

// A unique key: 191 characters is what MySQL indexes in utf8mb4 (a longer name answered 500 there).
const Name = t.String({ minLength: 1, maxLength: 191, pattern: '\\S' })
const Algorithm = t.String({
  minLength: 1,
  maxLength: 64,
  description:
    'Free text. A built-in algorithm of the type (any case and separators) can be trained in process: CLASSIFICATION logistic_regression; REGRESSION linear_regression, ridge_regression; CLUSTERING kmeans; ANOMALY_DETECTION robust_zscore; TIME_SERIES holt_winters. Any other (gradient_boosting, ...) registers a model trained elsewhere: deploy it with a servingEndpoint; training it answers 409. Absent: the first built-in of its type',
})

export const ModelCreate = t.Object(
  {
    gameId: t.String({ minLength: 1, maxLength: 100 }),
    name: Name,
    type: ModelType,
    algorithm: t.Optional(Algorithm),
    framework: t.Optional(t.String({ maxLength: 64, description: 'absent: liveops' })),
    description: t.Optional(t.String({ maxLength: 2000 })),
  },
  { additionalProperties: false },
)
export type ModelCreate = typeof ModelCreate.static

export const ModelUpdate = t.Object(
  {
    gameId: t.Optional(t.String({ description: 'fixed after create; accepted only when unchanged' })),
    name: t.Optional(Name),
    type: t.Optional(ModelType),
    algorithm: t.Optional(Algorithm),
    framework: t.Optional(t.String({ maxLength: 64 })),
    description: t.Optional(t.String({ maxLength: 2000 })),
    status: t.Optional(ModelStatus),
  },
  { additionalProperties: false },
)
export type ModelUpdate = typeof ModelUpdate.static

export const ListQuery = t.Object({
  gameId: t.Optional(t.String()),
  type: t.Optional(ModelType),
  status: t.Optional(ModelStatus),
  page: t.Optional(PageNumber(0, '0-based page; absent: 0')),
  size: t.Optional(t.Integer({ minimum: 1, maximum: 100, description: 'absent: 20' })),
  sort: t.Optional(
    t.String({
      description:
        'field[,asc|desc]; fields: name, status, type, createdAt, updatedAt (default createdAt,desc)',
    }),
  ),
})
export type ListQuery = typeof ListQuery.static

export const ModelPage = t.Object({
  // A copy: the registered model carries an $id, and an OpenAPI document may define one only once.
  items: t.Array(t.Object(Model.properties)),
  total: t.Integer(),
  page: t.Integer(),
  size: t.Integer(),
})

export const DatasetConfig = t.Object(
  {
    source: t.Union([t.Literal('events'), t.Literal('csv')]),
    query: t.String({
      maxLength: 2000,
      description:
        "events: 'event=<name>[,<name>...]&env=<env>&from=<ISO or ms>&to=<ISO or ms>&limit=<rows>&interval=hour|day' " +
        '(without event=, or empty: every event carrying the features and the label; from/to default to the last 30 days). csv: the id of a dataset uploaded to POST /api/ml-models/{id}/datasets',
    }),
    features: t.Array(t.String({ minLength: 1, maxLength: 128 }), {
      maxItems: 200,
      uniqueItems: true,
      description: 'event fields (top level or inside attrs; booleans count as 0/1) or CSV columns',
    }),
    label: t.Optional(
      t.String({
        minLength: 1,
        maxLength: 128,
        description:
          "an event field or CSV column; for events also computed from the user's later events: 'churn:<N>d' (1 when the user sends no event within N days), " +
          "'payer:<N>d' (1 when the user pays within N days), 'next:<event>:<N>d' (1 when the user sends <event> within N days). " +
          'Needed by CLASSIFICATION and REGRESSION; optional for ANOMALY_DETECTION (scores the flags); TIME_SERIES: the value summed per interval (absent: event count)',
      }),
    ),
  },
  { additionalProperties: false },
)
export type DatasetConfig = typeof DatasetConfig.static

export const TrainBody = t.Object(
  {
    datasetConfig: DatasetConfig,
    hyperparameters: t.Optional(t.Record(t.String(), t.Number())),
  },
  { additionalProperties: false },
)
export type TrainBody = typeof TrainBody.static

export const TrainingJob = t.Object({
  id: t.String(),
  modelId: t.String(),
  status: JobStatus,
  progress: t.Number({ minimum: 0, maximum: 1 }),
  stage: t.String({ description: 'queued, reading data, training, saving, done' }),
  datasetConfig: DatasetConfig,
  hyperparameters: t.Record(t.String(), t.Number(), { description: 'as used, defaults filled in' }),
  metrics: t.Optional(Metrics),
  error: t.Optional(t.String()),
  version: t.Optional(t.Integer({ description: 'the model version this job produced' })),
  rowsUsed: t.Optional(t.Integer()),
  rowsSkipped: t.Optional(
    t.Integer({ description: 'rows lacking a feature or the label, or whose label window is not over yet' }),
  ),
  createdAt: t.String(),
  startedAt: t.Optional(t.String()),
  finishedAt: t.Optional(t.String()),
})
export type TrainingJob = typeof TrainingJob.static

export const DeployBody = t.Object(
  {
    servingEndpoint: t.Optional(ServingEndpoint),
    canaryDeployment: t.Optional(
      t.Boolean({ description: 'true: the new version takes canaryPercent of the traffic' }),
    ),
    canaryPercent: t.Optional(
      t.Integer({ minimum: 1, maximum: 99, description: 'absent: the configured canary_percent' }),
    ),
    version: t.Optional(
      t.Integer({ minimum: 1, description: 'absent: the newest trained version; an older one rolls back' }),
    ),
  },
  { additionalProperties: false },
)
export type DeployBody = typeof DeployBody.static

export const PredictBody = t.Object(
  {
    features: t.Record(t.String(), t.Unknown(), { description: 'feature name to number' }),
    entityId: t.Optional(
      t.String({
        minLength: 1,
        maxLength: 256,
        description: 'the player or entity: keeps it in one A/B or canary arm',
      }),
    ),
  },
  { additionalProperties: false },
)

export const PredictResponse = t.Object({
  prediction: t.String(),
  probability: t.Number(),
  confidence: t.Number(),
  latencyMs: t.Number(),
  predictionId: t.String({ description: 'for POST /api/ml-models/{id}/feedback' }),
  modelId: t.String({ description: 'the model that answered (the baseline for its share of an A/B test)' }),
  version: t.Integer(),
  arm: t.String({
    description: 'default, canary, stable (canary deploy), challenger or baseline (A/B test)',
  }),
  value: t.Optional(t.Number()),
})
export type PredictResponse = typeof PredictResponse.static

export const AbTestBody = t.Object(
  {
    baselineModelId: t.String({ minLength: 1 }),
    trafficSplit: t.Number({
      minimum: 0,
      maximum: 100,
      description: 'percent of entities sent to this model: murmur3(entityId) mod 100 < trafficSplit',
    }),
  },
  { additionalProperties: false },
)

export const FeedbackBody = t.Object(
  {
    predictionId: t.String({ minLength: 1 }),
    actual: t.Union([t.String({ maxLength: 256 }), t.Number(), t.Boolean()], {
      description: 'the observed outcome: a class, or the number for regression and time series',
    }),
  },
  { additionalProperties: false },
)

export const Version = t.Object({
  version: t.Integer(),
  status: t.Union([t.Literal('serving'), t.Literal('canary'), t.Literal('candidate'), t.Literal('retired')]),
  jobId: t.String(),
  algorithm: t.String(),
  metrics: Metrics,
  hyperparameters: t.Record(t.String(), t.Number()),
  datasetConfig: DatasetConfig,
  createdAt: t.String(),
})

export const Dataset = t.Object({
  id: t.String(),
  modelId: t.String(),
  name: t.String(),
  columns: t.Array(t.String()),
  rows: t.Integer(),
  sizeBytes: t.Integer(),
  createdAt: t.String(),
})

const ArmStats = t.Object({
  modelId: t.String(),
  predictions: t.Integer(),
  feedback: t.Integer(),
  correct: t.Integer(),
  accuracy: Nullable(t.Number()),
})

export const DriftAlert = t.Object({
  id: t.String(),
  kind: t.Union([t.Literal('accuracy'), t.Literal('feature')]),
  severity: t.Union([t.Literal('medium'), t.Literal('high'), t.Literal('critical')]),
  value: t.Number(),
  details: t.Record(t.String(), t.Unknown()),
  createdAt: t.String(),
})

export const Stats = t.Object({
  modelId: t.String(),
  days: t.Integer(),
  predictionsPerDay: t.Array(t.Object({ date: t.String(), predictions: t.Integer() })),
  predictions: t.Integer(),
  latencyMs: t.Object({ p50: t.Number(), p95: t.Number(), p99: t.Number() }),
  feedback: t.Integer(),
  feedbackAccuracy: Nullable(t.Number({ description: 'share of feedback whose actual outcome matched' })),
  trainingAccuracy: Nullable(t.Number()),
  arms: t.Record(t.String(), ArmStats, {
    description: 'per arm: default, canary, stable, challenger, baseline',
  }),
  drift: t.Object({
    accuracyDrop: Nullable(t.Number({ description: 'training accuracy minus recent feedback accuracy' })),
    accuracySeverity: Nullable(t.String()),
    psi: t.Record(t.String(), t.Number(), {
      description: 'per feature, recent predictions against training',
    }),
    featureSeverity: Nullable(t.String()),
    alerts: t.Array(DriftAlert),
  }),
})
export type Stats = typeof Stats.static
