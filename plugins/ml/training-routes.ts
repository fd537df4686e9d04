import { Elysia, t } from 'elysia'
import { fromJson, iso, newId } from '../../core/db'
import { HttpError, TooManyRequests, invalidField } from '../../core/http'
import type { PluginContext } from '../../core/plugin'
import { PageNumber } from '../../core/schema'
import { rejectUnknown } from '../../core/strict'
import { scanCsv } from './csv-thread'
import type { Trainer } from './jobs'
import { Dataset, TrainBody, TrainingJob } from './schema'
import type { ModelsStore } from './store'

/*
 * The ML routes of training: start a training, its jobs (list, read, cancel), and the CSV data
 * sets a training may read. routes.ts mounts them in its chain, where the document lists them.
 */

const tag = (summary: string, description?: string) => ({ tags: ['ml'], summary, description })
/** Dataset uploads read at once in a process, and the columns one may have. */
const MAX_UPLOADS = 2
const MAX_COLUMNS = 1_000
const IdParams = t.Object({ id: t.String() })
const JobParams = t.Object({ id: t.String(), jobId: t.String() })
const PageQuery = t.Object({
  page: t.Optional(PageNumber(0, 'absent: 0')),
  size: t.Optional(t.Integer({ minimum: 1, maximum: 100, description: 'absent: 20' })),
})
const JobPage = t.Object({
  // A copy: the registered job schema carries an $id, which the document may define only once.
  items: t.Array(t.Object(TrainingJob.properties)),
  total: t.Integer(),
  page: t.Integer(),
  size: t.Integer(),
})

export function trainingRoutes(
  ctx: PluginContext<{ max_csv_mb: number; max_rows: number }>,
  models: ModelsStore,
  trainer: Trainer,
) {
  const db = ctx.db
  let uploading = 0
  /** A dataset upload: the CSV read whole (413 past max_csv_mb), scanned on a thread (400 past max_rows rows), stored. */
  async function upload(
    modelId: string,
    name: string | undefined,
    request: Request,
    set: { status?: number | string },
  ) {
    const limit = ctx.config.max_csv_mb * 1024 * 1024
    if (Number(request.headers.get('content-length') ?? 0) > limit)
      throw new HttpError(413, 'body_too_large', `the CSV is larger than ${ctx.config.max_csv_mb} MB`)
    const content = await request.text()
    if (content.length > limit)
      throw new HttpError(413, 'body_too_large', `the CSV is larger than ${ctx.config.max_csv_mb} MB`)
    // Parsed on a thread of its own: a large upload never holds the event loop.
    const maxRows = ctx.config.max_rows
    const scan = await scanCsv(content, maxRows)
    if (!scan.ok) throw invalidField('body', `not CSV: ${scan.error}`)
    const columns = scan.columns
    if (!columns.length || scan.rows < 1)
      throw invalidField('body', 'needs a header line and at least one row')
    // A training reads at most max_rows rows: a longer set is refused whole, not cut silently.
    if (scan.rows > maxRows)
      throw invalidField(
        'body',
        `more than ${maxRows} rows (plugins.ml.max_rows); split the set or raise the limit`,
      )
    if (new Set(columns).size !== columns.length) throw invalidField('body', 'column names must be unique')
    // A training names at most 200 features; every listing of the model's datasets returns the columns.
    if (columns.length > MAX_COLUMNS)
      throw invalidField('body', `at most ${MAX_COLUMNS} columns, got ${columns.length}`)
    const row = {
      id: newId(),
      modelId,
      name: name ?? 'upload.csv',
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
  }
  return new Elysia({ name: 'ml.training' })
    .use(ctx.guard)
    .model({ 'ml.TrainingJob': TrainingJob })
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
        // Each upload is read whole and parsed on a thread: a few at once (6 grew the server 1 GB).
        if (uploading >= MAX_UPLOADS)
          throw new TooManyRequests(
            `${MAX_UPLOADS} datasets are being read; retry in 1 s`,
            1,
            'too_many_uploads',
          )
        uploading++
        try {
          return await upload(params.id, query.name, request, set)
        } finally {
          uploading--
        }
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
            'Train with datasetConfig {source: csv, query: <the returned id>}; features and label name columns. Over max_csv_mb: 413; over max_rows rows: 400.',
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
}
