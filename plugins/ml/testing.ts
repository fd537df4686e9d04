import { expect } from 'bun:test'
import { signRequest } from '../../sdk/sign'
import { type Engine, TEST_OUTBOUND, type TestApp, makeApp } from '../../test/helpers'
import { rng } from './algorithms/data'

/** Shared by the ml test files. */
export const SECRET = 'ml-test-signing-secret'

export function mlApp(engine: Engine, ml: Record<string, unknown> = {}): Promise<TestApp> {
  return makeApp(engine, {
    plugins: {
      games: {},
      ingest: { signing_secret: SECRET, purge_interval_minutes: 0 },
      ml: { drift_check_minutes: 0, ...ml },
    },
  })
}

export async function newGame(
  a: TestApp,
  token: string,
  name = `Orbit Miners ${crypto.randomUUID().slice(0, 8)}`,
): Promise<string> {
  const r = await a.req('POST', '/api/games', {
    token,
    body: { name, genre: 'STRATEGY', platforms: ['IOS'], timezone: 'Asia/Tokyo', defaultCurrency: 'JPY' },
  })
  expect(r.status).toBe(201)
  return r.body.id
}

export async function newModel(a: TestApp, token: string, body: Record<string, unknown>) {
  const r = await a.req('POST', '/api/ml-models', {
    token,
    body: { name: `m-${crypto.randomUUID().slice(0, 8)}`, ...body },
  })
  expect(r.status).toBe(201)
  return r.body
}

export async function uploadCsv(a: TestApp, token: string, modelId: string, csv: string): Promise<string> {
  const r = await a.req('POST', `/api/ml-models/${modelId}/datasets?name=players.csv`, {
    token,
    raw: csv,
    headers: { 'content-type': 'text/csv' },
  })
  expect(r.status).toBe(201)
  return r.body.id
}

/** Polls the job until `done(job)` holds, for at most `ms`. */
export async function waitJob(
  a: TestApp,
  token: string,
  modelId: string,
  jobId: string,
  done: (job: { status: string; progress: number }) => boolean = (j) =>
    !['pending', 'running'].includes(j.status),
  ms = 20_000,
) {
  const deadline = Date.now() + ms
  for (;;) {
    const r = await a.req('GET', `/api/ml-models/${modelId}/training-jobs/${jobId}`, { token })
    expect(r.status).toBe(200)
    if (done(r.body)) return r.body
    if (Date.now() > deadline) throw new Error(`job ${jobId} still ${r.body.status} after ${ms} ms`)
    await Bun.sleep(20)
  }
}

/**
 * Players with sessions per week and days since the last purchase; they churn when
 * 2 + 0.9 * days - 1.5 * sessions (plus logistic noise) is positive. Seeded, so a set repeats.
 */
export function churnCsv(n: number, seed: number, noise = 0.3): string {
  const r = rng(seed)
  const lines = ['sessions,days_since_purchase,churned']
  for (let i = 0; i < n; i++) {
    const sessions = Math.round(r() * 100) / 10
    const days = Math.round(r() * 120) / 10
    const u = Math.min(Math.max(r(), 1e-9), 1 - 1e-9)
    const z = 2 + 0.9 * days - 1.5 * sessions + noise * Math.log(u / (1 - u))
    lines.push(`${sessions},${days},${z > 0 ? 'yes' : 'no'}`)
  }
  return `${lines.join('\n')}\n`
}

/** Registers, uploads, trains and waits: a classification model with one completed version. */
export async function trainedClassifier(
  a: TestApp,
  token: string,
  gameId: string,
  seed = 5,
  name?: string,
  rows = 2000,
) {
  const m = await newModel(a, token, { gameId, type: 'CLASSIFICATION', ...(name ? { name } : {}) })
  const ds = await uploadCsv(a, token, m.id, churnCsv(rows, seed))
  const job = await trainChurn(a, token, m.id, ds)
  return { model: m, job, dataset: ds }
}

/** Trains a churn classifier on an uploaded churn CSV and waits for the completed job. */
export async function trainChurn(a: TestApp, token: string, modelId: string, dataset: string) {
  const r = await a.req('POST', `/api/ml-models/${modelId}/train`, {
    token,
    body: {
      datasetConfig: {
        source: 'csv',
        query: dataset,
        features: ['sessions', 'days_since_purchase'],
        label: 'churned',
      },
    },
  })
  expect(r.status).toBe(202)
  const job = await waitJob(a, token, modelId, r.body.id)
  expect(job.status).toBe('completed')
  return job
}

/** A forwarding servingEndpoint on 127.0.0.1: records each request and answers `answer`. */
export function predictionSink(answer: Record<string, unknown>) {
  const seen: Array<Record<string, unknown>> = []
  const server = Bun.serve({
    hostname: '127.0.0.1',
    port: 0,
    async fetch(req) {
      seen.push((await req.json()) as Record<string, unknown>)
      return Response.json(answer)
    },
  })
  return { url: `http://127.0.0.1:${server.port}/score`, seen, stop: () => server.stop(true) }
}

/** Signed ingestion of events, the way the SDK sends them. */
export async function ingest(a: TestApp, events: Array<Record<string, unknown>>) {
  for (let i = 0; i < events.length; i += 500) {
    const body = JSON.stringify(events.slice(i, i + 500))
    const sig = await signRequest(SECRET, body)
    const r = await a.req('POST', '/api/ingest/events', {
      raw: body,
      headers: { 'content-type': 'application/json', ...sig },
    })
    expect(r.status).toBe(200)
  }
}

/**
 * Another instance of the app on the same store as `a` (the same SQLite file or PostgreSQL
 * schema), as a second server or a restart would see it.
 */
export async function sameStoreInstance(
  a: TestApp,
  ml: Record<string, unknown> = {},
): Promise<{ req: TestApp['req']; stop: () => Promise<void> }> {
  const { stringify } = await import('yaml')
  const { loadConfig } = await import('../../core/config')
  const { createApp } = await import('../../core/app')
  const { createLogger } = await import('../../core/log')
  const { plugins } = await import('..')
  const loc = a.db.location!
  const yaml = stringify({
    data_dir: a.dataDir,
    database: { url: loc.url, pool: 3 },
    auth: { jwt_secret: 'test-jwt-secret-0001', admin_token: 'test-admin-token' },
    rate_limit: { requests_per_minute: 0, burst: 0 },
    outbound: TEST_OUTBOUND,
    log: { level: 'error' },
    plugins: {
      games: {},
      ingest: { signing_secret: SECRET, purge_interval_minutes: 0 },
      ml: { drift_check_minutes: 0, ...ml },
    },
  })
  const config = loadConfig(yaml, plugins, {})
  const built = await createApp(config, { plugins, pgSchema: loc.schema, log: createLogger(config.core.log) })
  const req: TestApp['req'] = async (method, path, o = {}) => {
    const headers: Record<string, string> = { ...o.headers }
    if (o.token) headers.authorization = `Bearer ${o.token}`
    const body = o.body === undefined ? o.raw : JSON.stringify(o.body)
    if (o.body !== undefined) headers['content-type'] = 'application/json'
    const res = await built.app.handle(new Request(`http://localhost${path}`, { method, headers, body }))
    const text = await res.text()
    return {
      status: res.status,
      body: text && (res.headers.get('content-type') ?? '').includes('json') ? JSON.parse(text) : text,
      headers: res.headers,
    }
  }
  return { req, stop: () => built.stop() }
}
