import { Elysia, t } from 'elysia'
import { PERMISSION_SECURITY } from '../../core/auth/guard'
import { fromJson, iso, newId } from '../../core/db'
import { Conflict, HttpError, invalidField } from '../../core/http'
import type { FastHandler, PluginContext } from '../../core/plugin'
import { jsonBodyReader, rejectUnknown } from '../../core/strict'
import { scanCsv } from './csv-thread'
import type { Trainer } from './jobs'
import type { Monitoring } from './monitoring'
import {
  AbTestBody,
  Dataset,
  DeployBody,
  FeedbackBody,
  ListQuery,
  Model,
  ModelCreate,
  ModelPage,
  ModelUpdate,
  PredictBody,
  PredictResponse,
  Stats,
  TrainBody,
  TrainingJob,
  Version,
} from './schema'
import type { Serving } from './serving'
import type { ModelsStore } from './store'

const tag = (summary: string, description?: string) => ({ tags: ['ml'], summary, description })
const IdParams = t.Object({ id: t.String() })
const JobParams = t.Object({ id: t.String(), jobId: t.String() })
const PageQuery = t.Object({
  page: t.Optional(t.Integer({ minimum: 0, description: 'absent: 0' })),
  size: t.Optional(t.Integer({ minimum: 1, maximum: 100, description: 'absent: 20' })),
})
const JobPage = t.Object({
  // A copy: the registered job schema carries an $id, which the document may define only once.
  items: t.Array(t.Object(TrainingJob.properties)),
  total: t.Integer(),
  page: t.Integer(),
  size: t.Integer(),
})

/**
 * Admits exactly the bodies PredictBody (schema.ts) admits in their usual shape, without the
 * schema walk: an object with `features` (an object) and at most `entityId` (1-256 characters).
 * Anything else goes through the schema check and rejectUnknown, which name the field.
 */
export function isPredictBody(b: unknown): b is { features: Record<string, unknown>; entityId?: string } {
  if (typeof b !== 'object' || b === null || Array.isArray(b)) return false
  for (const k in b) if (k !== 'features' && k !== 'entityId') return false
  const { features, entityId } = b as Record<string, unknown>
  if (typeof features !== 'object' || features === null || Array.isArray(features)) return false
  return (
    entityId === undefined || (typeof entityId === 'string' && entityId.length >= 1 && entityId.length <= 256)
  )
}

export function mlRoutes(
  ctx: PluginContext<{ max_csv_mb: number }>,
  models: ModelsStore,
  trainer: Trainer,
  serving: Serving,
  monitor: Monitoring,
) {
  const db = ctx.db
  const changed = <T>(id: string, v: T): T => {
    serving.invalidate(id)
    return v
  }
  // The hot path, served from Bun's native router (ctx.fastRoute): the permission macro's check,
  // strictBodies' body check and the error bodies, without Elysia's hooks; the Elysia route
  // below runs the same handler (app.handle) and documents it.
  const canPredict = ctx.requestGuard.permission('ml-serving:write')
  const readPredict = jsonBodyReader(
    PredictBody,
    Math.round(ctx.core.server.body_limit_mb * 1024 * 1024),
    isPredictBody,
  )
  const predictRoute: FastHandler = async (request, params) => {
    const headers: Record<string, string> = {}
    const who = canPredict(request, headers)
    if (who instanceof Promise) await who
    const body = await readPredict(request)
    if (!isPredictBody(body)) rejectUnknown(PredictBody, body, 'body')
    const out = await serving.predict(params.id, body.features, body.entityId)
    // Headers only when the rate limit set some: an empty init still costs a Headers object.
    return 'x-ratelimit-limit' in headers ? Response.json(out, { headers }) : Response.json(out)
  }
  ctx.fastRoute('POST', '/api/ml-models/:id/predict', predictRoute)
  return new Elysia({ name: 'ml' })
    .use(ctx.guard)
    .model({
      'ml.Model': Model,
      'ml.TrainingJob': TrainingJob,
      'ml.Prediction': PredictResponse,
      'ml.PredictRequest': PredictBody,
    })
    .post(
      '/api/ml-models',
      async ({ body, set }) => {
        set.status = 201
        return models.create(body)
      },
      {
        permission: 'ml:write',
        transform: ({ body }) => rejectUnknown(ModelCreate, body, 'body'),
        body: ModelCreate,
        response: { 201: 'ml.Model' },
        detail: tag(
          'Register a model (status DRAFT, version 1)',
          'Unknown game: 400 body.gameId. An algorithm that is not built in for the type: 400 body.algorithm. A name taken in the game: 409.',
        ),
      },
    )
    .get('/api/ml-models', ({ query }) => models.list(query), {
      permission: 'ml:read',
      query: ListQuery,
      response: { 200: ModelPage },
      detail: tag('List models: filters gameId, type, status; page object {items, total, page, size}'),
    })
    .get('/api/ml-models/:id', ({ params }) => models.get(params.id), {
      permission: 'ml:read',
      params: IdParams,
      response: { 200: 'ml.Model' },
      detail: tag('Read a model, with the metrics of its serving (else newest trained) version'),
    })
    .put(
      '/api/ml-models/:id',
      async ({ params, body }) => changed(params.id, await models.update(params.id, body)),
      {
        permission: 'ml:write',
        params: IdParams,
        transform: ({ body }) => rejectUnknown(ModelUpdate, body, 'body'),
        body: ModelUpdate,
        response: { 200: 'ml.Model' },
        detail: tag(
          'Update name, description, framework, algorithm (type only while DRAFT)',
          'gameId is fixed (400 when changed). status may name ARCHIVED (as POST /archive) or restore an ARCHIVED model (EVALUATING when ' +
            'trained, DRAFT when not; the restored model is not deployed); other moves answer 409 naming the action that makes them.',
        ),
      },
    )
    .delete(
      '/api/ml-models/:id',
      async ({ params, set }) => {
        await models.remove(params.id)
        serving.invalidate(params.id)
        set.status = 204
      },
      {
        permission: 'ml:write',
        params: IdParams,
        detail: tag(
          'Delete a model with its versions, jobs, data sets and predictions',
          '409 while DEPLOYED, TRAINING, or an A/B baseline.',
        ),
      },
    )
    .post(
      '/api/ml-models/:id/archive',
      async ({ params }) => changed(params.id, await models.archive(params.id)),
      {
        permission: 'ml:write',
        params: IdParams,
        response: { 200: 'ml.Model' },
        detail: tag(
          'Archive: any status but TRAINING -> ARCHIVED; it stops serving',
          '409 while TRAINING or while another model uses it as A/B baseline.',
        ),
      },
    )
    .post(
      '/api/ml-models/:id/train',
      async ({ params, body, set }) => {
        set.status = 202
        return trainer.start(params.id, body)
      },
      {
        permission: 'ml:write',
        params: IdParams,
        transform: ({ body }) => rejectUnknown(TrainBody, body, 'body'),
        body: TrainBody,
        response: { 202: 'ml.TrainingJob' },
        detail: tag(
          'Train: DRAFT, EVALUATING, DEPLOYED or FAILED -> TRAINING; answers 202 with the pending job',
          'The job reads the data set, fits the algorithm in a worker thread and scores a holdout. Completed: a new version (version + 1: ' +
            'a model is created at 1, its first training yields 2) and the model moves to EVALUATING; a deployed version keeps serving until the new one is deployed. ' +
            'Failed: FAILED. 409 while TRAINING or ARCHIVED. Hyperparameters are checked per algorithm (400 naming body.hyperparameters.<name>).',
        ),
      },
    )
    .get(
      '/api/ml-models/:id/training-jobs',
      ({ params, query }) => trainer.list(params.id, query.page ?? 0, query.size ?? 20),
      {
        permission: 'ml:read',
        params: IdParams,
        query: PageQuery,
        response: { 200: JobPage },
        detail: tag(
          'Training jobs of a model, newest first, with status, progress (0..1), stage and metrics',
        ),
      },
    )
    .get('/api/ml-models/:id/training-jobs/:jobId', ({ params }) => trainer.get(params.id, params.jobId), {
      permission: 'ml:read',
      params: JobParams,
      response: { 200: 'ml.TrainingJob' },
      detail: tag('One training job'),
    })
    .post(
      '/api/ml-models/:id/training-jobs/:jobId/cancel',
      ({ params }) => trainer.cancel(params.id, params.jobId),
      {
        permission: 'ml:write',
        params: JobParams,
        response: { 200: 'ml.TrainingJob' },
        detail: tag(
          'Cancel a pending or running job (409 otherwise); the model returns to its status before training',
        ),
      },
    )
    .post(
      '/api/ml-models/:id/datasets',
      async ({ params, query, request, set }) => {
        await models.row(params.id)
        const limit = ctx.config.max_csv_mb * 1024 * 1024
        if (Number(request.headers.get('content-length') ?? 0) > limit)
          throw new HttpError(413, 'body_too_large', `the CSV is larger than ${ctx.config.max_csv_mb} MB`)
        const content = await request.text()
        if (content.length > limit)
          throw new HttpError(413, 'body_too_large', `the CSV is larger than ${ctx.config.max_csv_mb} MB`)
        // Parsed on a thread of its own: a large upload never holds the event loop.
        const scan = await scanCsv(content)
        if (!scan.ok) throw invalidField('body', `not CSV: ${scan.error}`)
        const columns = scan.columns
        if (!columns.length || scan.rows < 1)
          throw invalidField('body', 'needs a header line and at least one row')
        if (new Set(columns).size !== columns.length)
          throw invalidField('body', 'column names must be unique')
        const row = {
          id: newId(),
          modelId: params.id,
          name: query.name ?? 'upload.csv',
          columns,
          rows: scan.rows,
          sizeBytes: Buffer.byteLength(content),
          createdAt: Date.now(),
        }
        await db.run(
          'INSERT INTO ml_datasets (id, model_id, name, columns, rows_count, size_bytes, content, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)',
          [
            row.id,
            row.modelId,
            row.name,
            JSON.stringify(columns),
            row.rows,
            row.sizeBytes,
            content,
            row.createdAt,
          ],
        )
        set.status = 201
        return { ...row, createdAt: iso(row.createdAt)! }
      },
      {
        permission: 'ml:write',
        params: IdParams,
        query: t.Object({ name: t.Optional(t.String({ maxLength: 200 })) }),
        parse: 'none',
        response: { 201: Dataset },
        detail: {
          ...tag(
            'Upload a CSV training set (text/csv, header line first)',
            'Train with datasetConfig {source: csv, query: <the returned id>}; features and label name columns. Over max_csv_mb: 413.',
          ),
          requestBody: {
            required: true,
            description: 'The CSV text: a header line naming the columns (unique), then at least one row',
            content: {
              'text/csv': { schema: { type: 'string', example: 'level,sessions,churned\n3,12,0\n1,2,1\n' } },
            },
          },
        },
      },
    )
    .get(
      '/api/ml-models/:id/datasets',
      async ({ params }) => {
        await models.row(params.id)
        const rows = await db.all<{
          id: string
          name: string
          columns: string
          rows_count: number
          size_bytes: number
          created_at: number
        }>(
          'SELECT id, name, columns, rows_count, size_bytes, created_at FROM ml_datasets WHERE model_id = ? ORDER BY created_at DESC',
          [params.id],
        )
        return rows.map((r) => ({
          id: r.id,
          modelId: params.id,
          name: r.name,
          columns: fromJson<string[]>(r.columns, []),
          rows: Number(r.rows_count),
          sizeBytes: Number(r.size_bytes),
          createdAt: iso(r.created_at)!,
        }))
      },
      {
        permission: 'ml:read',
        params: IdParams,
        response: { 200: t.Array(Dataset) },
        detail: tag('Uploaded CSV training sets of a model'),
      },
    )
    .post('/api/ml-models/:id/deploy', ({ params, body }) => serving.deploy(params.id, body), {
      permission: 'ml:write',
      params: IdParams,
      transform: ({ body }) => rejectUnknown(DeployBody, body, 'body'),
      body: DeployBody,
      response: { 200: 'ml.Model' },
      detail: tag(
        'Deploy: EVALUATING, DEPLOYED or FAILED (with a trained version) -> DEPLOYED',
        "servingEndpoint 'builtin' serves in process (absent: the current one, builtin at first); an http(s) URL receives each prediction request as " +
          '{modelId, version, features, entityId} and answers {prediction, probability, confidence}. version absent: the newest trained one; ' +
          'an older one rolls back. canaryDeployment true next to a serving version: the new version takes canaryPercent of the entities ' +
          '(stable hash), the rest stay on the old one; deploy it again without canary to promote it. 409 from DRAFT, TRAINING, ARCHIVED. ' +
          "The URL's credentials and query values read masked; sent back as read it keeps the stored one, changed around masked parts it is 400. " +
          'A host the outbound policy refuses is 400 outbound_refused.',
      ),
    })
    .post(
      '/api/ml-models/:id/predict',
      ({ request, params, server }) => predictRoute(request, params, server),
      {
        // The handler authenticates (ml-serving:write) and reads its own body, as the fast route does.
        parse: 'none',
        // Serving traffic, not a change: predictions are not audited.
        audit: false,
        params: IdParams,
        detail: {
          security: PERMISSION_SECURITY,
          requestBody: {
            required: true,
            content: {
              'application/json': { schema: { $ref: '#/components/schemas/ml.PredictRequest' } },
            },
          },
          ...tag(
            'Predict with the deployed model: {features} -> {prediction, probability, confidence, latencyMs}',
            'Missing or non-numeric features: 400 naming each (body.features.<name>); extra features are ignored. Time series take ' +
              'features.horizon (steps ahead). probability: classification P(positive class); anomaly detection the anomaly probability ' +
              '(score^2 / (score^2 + threshold^2)); clustering the soft share of the nearest centroid; regression and time series the ' +
              'holdout r2 (resp. 1 - MAPE) clipped to 0..1. confidence: the probability of the answer given. latencyMs: time in the server. ' +
              'With an A/B test or a canary, entityId keeps an entity on one arm (murmur3 mod 100); without it each request is drawn at random. ' +
              '409 when not deployed or archived; 502 when a forwarding endpoint fails.',
          ),
          responses: {
            200: {
              description: 'the prediction',
              content: { 'application/json': { schema: { $ref: '#/components/schemas/ml.Prediction' } } },
            },
          },
        },
      },
    )
    .post('/api/ml-models/:id/ab-test', async ({ params, body }) => serving.abTest(params.id, body), {
      permission: 'ml:write',
      params: IdParams,
      transform: ({ body }) => rejectUnknown(AbTestBody, body, 'body'),
      body: AbTestBody,
      response: { 200: 'ml.Model' },
      detail: tag(
        'Start an A/B test: this deployed model is the challenger, baselineModelId the baseline',
        'An entity goes to the challenger when murmur3(entityId) mod 100 < trafficSplit, else to the baseline. Both deployed (409), same ' +
          'game and type (400). Per-arm predictions and feedback accuracy are in GET /stats. Sending it again changes the split.',
      ),
    })
    .delete('/api/ml-models/:id/ab-test', ({ params }) => serving.stopAbTest(params.id), {
      permission: 'ml:write',
      params: IdParams,
      response: { 200: 'ml.Model' },
      detail: tag('Stop the A/B test (409 when none runs)'),
    })
    .post(
      '/api/ml-models/:id/feedback',
      ({ params, body }) => monitor.feedback(params.id, body.predictionId, body.actual),
      {
        permission: 'ml-serving:write',
        audit: false,
        params: IdParams,
        transform: ({ body }) => rejectUnknown(FeedbackBody, body, 'body'),
        body: FeedbackBody,
        response: {
          200: t.Object({
            predictionId: t.String(),
            prediction: t.String(),
            actual: t.String(),
            correct: t.Boolean(),
          }),
        },
        detail: tag(
          'Record the actual outcome of a prediction',
          'correct: the same class, or for numbers within 10% of the actual. A second feedback for one prediction: 409; unknown prediction: 404.',
        ),
      },
    )
    .get('/api/ml-models/:id/versions', ({ params }) => models.versions(params.id), {
      permission: 'ml:read',
      params: IdParams,
      response: { 200: t.Array(Version) },
      detail: tag(
        'Trained versions, newest first, with metrics and status serving, canary, candidate (newer than serving) or retired',
      ),
    })
    .get('/api/ml-models/:id/stats', ({ params, query }) => monitor.stats(params.id, query.days ?? 7), {
      permission: 'ml:read',
      params: IdParams,
      query: t.Object({ days: t.Optional(t.Integer({ minimum: 1, maximum: 90, description: 'absent: 7' })) }),
      response: { 200: Stats },
      detail: tag(
        'Monitoring: predictions per day, latency P50/P95/P99, feedback accuracy per arm, drift',
        'accuracyDrop: training accuracy minus the deployed version’s feedback accuracy (after min_feedback answers); medium above 0.05, ' +
          'high above 0.10, critical above 0.15. psi: per feature, the latest predictions against the training deciles; medium above 0.1, ' +
          'high above 0.25, critical above 0.5.',
      ),
    })
    .post(
      '/api/ml-models/:id/drift-check',
      async ({ params }) => {
        const m = await models.row(params.id)
        if (m.deployed_version === null)
          throw new Conflict(`model '${params.id}' is not deployed; drift is checked for deployed models`)
        return monitor.checkDrift(params.id)
      },
      {
        permission: 'ml:write',
        params: IdParams,
        detail: tag(
          'Check drift now (the periodic check does the same) and raise model_drift alerts',
          'Each finding is stored and raised on the bus (routed by the notification service) unless one of its kind at that severity or higher was raised within the cooldown.',
        ),
      },
    )
}
