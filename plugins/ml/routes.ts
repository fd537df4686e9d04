import { Elysia, t } from 'elysia'
import { PERMISSION_SECURITY } from '../../core/auth/guard'
import { Conflict } from '../../core/http'
import type { FastHandler, PluginContext } from '../../core/plugin'
import { jsonBodyReader, rejectUnknown } from '../../core/strict'
import type { Trainer } from './jobs'
import type { Monitoring } from './monitoring'
import {
  AbTestBody,
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
  TrainingJob,
  Version,
} from './schema'
import type { Serving } from './serving'
import type { ModelsStore } from './store'
import { trainingRoutes } from './training-routes'

const tag = (summary: string, description?: string) => ({ tags: ['ml'], summary, description })
const IdParams = t.Object({ id: t.String() })
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
  ctx: PluginContext<{ max_csv_mb: number; max_rows: number }>,
  models: ModelsStore,
  trainer: Trainer,
  serving: Serving,
  monitor: Monitoring,
) {
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
  return (
    new Elysia({ name: 'ml' })
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
      // Training and its data sets (training-routes.ts), here in the document's order.
      .use(trainingRoutes(ctx, models, trainer))
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
        query: t.Object({
          days: t.Optional(t.Integer({ minimum: 1, maximum: 90, description: 'absent: 7' })),
        }),
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
  )
}
