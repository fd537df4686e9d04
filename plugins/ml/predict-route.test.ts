import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { murmur3 } from '../../sdk/murmur3'
import { type TestApp, chunkedBody, clearOfMinute, forEachEngine, makeApp } from '../../test/helpers'
import {
  churnCsv,
  mlApp,
  newGame,
  newModel,
  predictionSink,
  trainChurn,
  trainedClassifier,
  uploadCsv,
} from './testing'

/**
 * `POST /api/ml-models/{id}/predict` is served from Bun's native router (ctx.fastRoute) on a
 * socket, and through Elysia by `app.handle`. These tests send each request both ways and hold
 * the answers equal, so the fast route keeps every documented behaviour.
 */
forEachEngine((engine) => {
  let a: TestApp
  let base: string
  let admin: string
  let gameId: string
  /** Elysia reports every answered write with an `http.write` event; the native route does not. */
  const predictWrites: string[] = []
  beforeAll(async () => {
    a = await mlApp(engine, { flush_ms: 5 })
    base = a.listen()
    admin = await a.token('admin')
    gameId = await newGame(a, admin)
    a.bus.on('http.write', (w) => {
      if (w.path.endsWith('/predict')) predictWrites.push(w.path)
    })
  })
  afterAll(() => a.stop())

  const loyal = { sessions: 9.5, days_since_purchase: 0.5 }
  const leaving = { sessions: 0.2, days_since_purchase: 11 }

  type Sent = { token?: string | null; body?: unknown; raw?: string; headers?: Record<string, string> }
  /** Over the socket: Bun's native router answers. */
  async function socket(id: string, o: Sent = {}) {
    const headers: Record<string, string> = { ...o.headers }
    if (o.token) headers.authorization = `Bearer ${o.token}`
    if (o.body !== undefined) headers['content-type'] ??= 'application/json'
    const res = await fetch(`${base}/api/ml-models/${id}/predict`, {
      method: 'POST',
      headers,
      body: o.body !== undefined ? JSON.stringify(o.body) : o.raw,
    })
    const text = await res.text()
    const json = (res.headers.get('content-type') ?? '').includes('json') && text ? JSON.parse(text) : text
    return { status: res.status, body: json, headers: res.headers }
  }
  /** Through `app.handle` (Elysia). */
  const handled = (id: string, o: Sent = {}) =>
    a.req('POST', `/api/ml-models/${id}/predict`, {
      token: o.token,
      body: o.body,
      raw: o.raw,
      headers: {
        ...(o.raw !== undefined ? { 'content-length': String(Buffer.byteLength(o.raw)) } : {}),
        ...o.headers,
      },
    })
  /** Both ways; the error answers must be the same (but for their timestamps). */
  async function same(id: string, o: Sent, status: number) {
    const s = await socket(id, o)
    const h = await handled(id, o)
    expect(s.status).toBe(status)
    expect(h.status).toBe(status)
    const strip = (b: unknown) =>
      b && typeof b === 'object' ? { ...(b as Record<string, unknown>), timestamp: undefined } : b
    expect(strip(s.body)).toEqual(strip(h.body))
    return s
  }
  const deploy = (id: string, body: Record<string, unknown> = {}) =>
    a.req('POST', `/api/ml-models/${id}/deploy`, { token: admin, body })

  describe('predict on the native route', () => {
    test('the socket is answered by the native route: a prediction, logged, in the stats and the histogram', async () => {
      const { model } = await trainedClassifier(a, admin, gameId)
      expect((await deploy(model.id)).status).toBe(200)
      const yes = await socket(model.id, { token: admin, body: { features: leaving } })
      expect(yes.status).toBe(200)
      expect(yes.headers.get('content-type')).toContain('application/json')
      expect(yes.body).toMatchObject({ prediction: 'yes', modelId: model.id, version: 2, arm: 'default' })
      expect(yes.body.probability).toBeGreaterThan(0.9)
      expect(yes.body.confidence).toBe(yes.body.probability)
      expect(yes.body.latencyMs).toBeGreaterThan(0)
      expect(typeof yes.body.predictionId).toBe('string')
      const no = await socket(model.id, { token: await a.token('developer'), body: { features: loyal } })
      expect(no.body.prediction).toBe('no')
      expect(no.body.confidence).toBeCloseTo(1 - no.body.probability, 10)
      // The x-admin-token is a credential of the permission macro too.
      const internal = await socket(model.id, {
        headers: { 'x-admin-token': 'test-admin-token' },
        body: { features: loyal },
      })
      expect(internal.status).toBe(200)
      // Through app.handle, the same handler answers the same prediction, and Elysia reports it.
      const viaElysia = await handled(model.id, { token: admin, body: { features: leaving } })
      expect(viaElysia.body).toMatchObject({ prediction: 'yes', probability: yes.body.probability })
      const deadline = Date.now() + 5000
      while (!predictWrites.length && Date.now() < deadline) await Bun.sleep(5)
      // Only that one: the three socket requests never went through Elysia.
      expect(predictWrites).toEqual([`/api/ml-models/${model.id}/predict`])

      // Logged: feedback finds the socket's prediction, the stats count all four.
      const fb = await a.req('POST', `/api/ml-models/${model.id}/feedback`, {
        token: admin,
        body: { predictionId: yes.body.predictionId, actual: 'yes' },
      })
      expect(fb.status).toBe(200)
      expect(fb.body.correct).toBe(true)
      const stats = await a.req('GET', `/api/ml-models/${model.id}/stats?days=1`, { token: admin })
      expect(stats.body.predictions).toBe(4)
      expect(stats.body.latencyMs.p99).toBeGreaterThan(0)
      expect(stats.body.arms.default).toMatchObject({ modelId: model.id, predictions: 4, feedback: 1 })
      // The stored features are the vector in the artifact's order.
      const row = await a.db.get<{ features: string; entity_id: string | null }>(
        'SELECT features, entity_id FROM ml_predictions WHERE id = ?',
        [yes.body.predictionId],
      )
      expect(JSON.parse(row!.features)).toEqual([leaving.sessions, leaving.days_since_purchase])
      expect(row!.entity_id).toBeNull()
      // The request histogram names the route template for the native answers too.
      const text = await a.metrics.text()
      const line = text
        .split('\n')
        .find(
          (l) =>
            l.startsWith('svc_http_request_duration_seconds_count') &&
            l.includes('route="/api/ml-models/:id/predict"') &&
            l.includes('status="200"'),
        )
      expect(line).toBeDefined()
      expect(Number(line!.split(' ').at(-1))).toBe(4)
    })

    test('401 without or with a bad token, 403 for a role without ml-serving:write, the same bodies both ways', async () => {
      const { model } = await trainedClassifier(a, admin, gameId)
      await deploy(model.id)
      const anon = await same(model.id, { body: { features: loyal } }, 401)
      expect(anon.body).toMatchObject({ error: 'unauthorized', path: `/api/ml-models/${model.id}/predict` })
      await same(model.id, { token: 'not-a-jwt', body: { features: loyal } }, 401)
      await same(model.id, { headers: { 'x-admin-token': 'wrong' }, body: { features: loyal } }, 401)
      // Who asks is decided before the body is read: a bad body without a token is a 401.
      await same(model.id, { raw: '{"features":' }, 401)
      const viewer = await same(model.id, { token: await a.token('viewer'), body: { features: loyal } }, 403)
      expect(viewer.body.message).toContain('ml-serving:write')
      await same(model.id, { token: await a.token('viewer'), body: { features: 'x' } }, 403)
    })

    test('404 for an unknown model; 409 while not deployed, DRAFT or ARCHIVED', async () => {
      const unknown = await same('no-such-model', { token: admin, body: { features: loyal } }, 404)
      expect(unknown.body.error).toBe('not_found')
      const draft = await newModel(a, admin, { gameId, type: 'CLASSIFICATION' })
      const d = await same(draft.id, { token: admin, body: { features: loyal } }, 409)
      expect(d.body.message).toContain('DRAFT')
      const { model } = await trainedClassifier(a, admin, gameId)
      const evaluating = await same(model.id, { token: admin, body: { features: loyal } }, 409)
      expect(evaluating.body.message).toContain('EVALUATING')
      await deploy(model.id)
      expect((await socket(model.id, { token: admin, body: { features: loyal } })).status).toBe(200)
      expect((await a.req('POST', `/api/ml-models/${model.id}/archive`, { token: admin })).status).toBe(200)
      const archived = await same(model.id, { token: admin, body: { features: loyal } }, 409)
      expect(archived.body.message).toContain('ARCHIVED')
    })

    test('400 naming every missing or non-numeric feature and every bad field; 415 and 413', async () => {
      const { model } = await trainedClassifier(a, admin, gameId)
      await deploy(model.id)
      const bad = await same(model.id, { token: admin, body: { features: { sessions: 'many' } } }, 400)
      expect(bad.body.message).toContain('body.features.sessions: must be a finite number')
      expect(bad.body.message).toContain('body.features.days_since_purchase: missing')
      expect(bad.body.details.errors).toEqual([
        { field: 'body.features.sessions', reason: 'must be a finite number' },
        { field: 'body.features.days_since_purchase', reason: 'missing' },
      ])
      const nulls = await same(
        model.id,
        { token: admin, body: { features: { sessions: null, days_since_purchase: 1 } } },
        400,
      )
      expect(nulls.body.details.field).toBe('body.features.sessions')
      expect((await same(model.id, { token: admin, body: { entityId: 'p' } }, 400)).body.message).toContain(
        'body.features',
      )
      expect(
        (await same(model.id, { token: admin, body: { features: [1, 2] } }, 400)).body.message,
      ).toContain('body.features')
      expect(
        (await same(model.id, { token: admin, body: { features: loyal, extra: true } }, 400)).body.message,
      ).toContain('body.extra')
      expect(
        (await same(model.id, { token: admin, body: { features: loyal, entityId: '' } }, 400)).body.message,
      ).toContain('body.entityId')
      expect(
        (await same(model.id, { token: admin, body: { features: loyal, entityId: 7 } }, 400)).body.message,
      ).toContain('body.entityId')
      expect((await same(model.id, { token: admin, body: [loyal] }, 400)).body.message).toContain('body')
      const malformed = await same(
        model.id,
        { token: admin, raw: '{"features":', headers: { 'content-type': 'application/json' } },
        400,
      )
      expect(malformed.body.message).toBe('body: malformed JSON')
      const form = await same(
        model.id,
        {
          token: admin,
          raw: 'sessions=1',
          headers: { 'content-type': 'application/x-www-form-urlencoded' },
        },
        415,
      )
      expect(form.body.error).toBe('unsupported_media_type')
      // Over server.body_limit_mb (10 MB by default): 413 from the Content-Length, before reading.
      const big = JSON.stringify({ features: { ...loyal, pad: 'x'.repeat(10_500_000) } })
      const over = await same(
        model.id,
        { token: admin, raw: big, headers: { 'content-type': 'application/json' } },
        413,
      )
      expect(over.body.error).toBe('body_too_large')
      // A body without a length (chunked) is bounded the same way over the socket.
      const chunked = (text: string) =>
        fetch(`${base}/api/ml-models/${model.id}/predict`, {
          method: 'POST',
          headers: { authorization: `Bearer ${admin}`, 'content-type': 'application/json' },
          body: chunkedBody(text, 65536),
          duplex: 'half',
        } as RequestInit)
      const small = await chunked(JSON.stringify({ features: leaving }))
      expect(small.status).toBe(200)
      expect(((await small.json()) as { prediction: string }).prediction).toBe('yes')
      const chunkedOver = await chunked(big)
      expect(chunkedOver.status).toBe(413)
      expect(await chunkedOver.json()).toMatchObject({
        error: 'body_too_large',
        path: `/api/ml-models/${model.id}/predict`,
      })
      // Extra features are ignored; entityId at its longest is taken.
      const ok = await socket(model.id, {
        token: admin,
        body: { features: { ...loyal, guild: 'red' }, entityId: 'e'.repeat(256) },
      })
      expect(ok.status).toBe(200)
    })

    test('an A/B test splits entities by murmur3(entityId) mod 100 on the native route, stably', async () => {
      const challenger = (await trainedClassifier(a, admin, gameId, 41)).model
      const baseline = (await trainedClassifier(a, admin, gameId, 42)).model
      await deploy(challenger.id)
      await deploy(baseline.id)
      const started = await a.req('POST', `/api/ml-models/${challenger.id}/ab-test`, {
        token: admin,
        body: { baselineModelId: baseline.id, trafficSplit: 40 },
      })
      expect(started.status).toBe(200)
      const seen = { challenger: 0, baseline: 0 }
      for (let i = 0; i < 120; i++) {
        const entity = `raider-${i}`
        const p = await socket(challenger.id, { token: admin, body: { features: loyal, entityId: entity } })
        const arm = murmur3(entity) % 100 < 40 ? 'challenger' : 'baseline'
        expect(p.body.arm).toBe(arm)
        expect(p.body.modelId).toBe(arm === 'challenger' ? challenger.id : baseline.id)
        seen[arm]++
        // The same entity stays on its arm.
        if (i % 20 === 0)
          expect(
            (await socket(challenger.id, { token: admin, body: { features: loyal, entityId: entity } })).body
              .arm,
          ).toBe(arm)
      }
      expect(seen.challenger).toBeGreaterThan(20)
      expect(seen.baseline).toBeGreaterThan(40)
      const stats = await a.req('GET', `/api/ml-models/${challenger.id}/stats?days=1`, { token: admin })
      expect(stats.body.arms.challenger.predictions + stats.body.arms.baseline.predictions).toBe(126)
      expect(stats.body.arms.baseline.modelId).toBe(baseline.id)
      // Stopped: every entity goes to the challenger again.
      await a.req('DELETE', `/api/ml-models/${challenger.id}/ab-test`, { token: admin })
      const after = await socket(challenger.id, {
        token: admin,
        body: { features: loyal, entityId: 'raider-1' },
      })
      expect(after.body.arm).toBe('default')
    })

    test('a canary deploy sends its share of entities to the new version on the native route', async () => {
      const { model } = await trainedClassifier(a, admin, gameId)
      await deploy(model.id)
      await trainChurn(a, admin, model.id, await uploadCsv(a, admin, model.id, churnCsv(2000, 9)))
      // Version 2 (the first training) keeps serving until version 3 is deployed.
      expect((await socket(model.id, { token: admin, body: { features: loyal } })).body.version).toBe(2)
      const canary = await deploy(model.id, { version: 3, canaryDeployment: true, canaryPercent: 30 })
      expect(canary.status).toBe(200)
      for (let i = 0; i < 60; i++) {
        const entity = `scout-${i}`
        const p = await socket(model.id, { token: admin, body: { features: loyal, entityId: entity } })
        const onCanary = murmur3(entity) % 100 < 30
        expect(p.body).toMatchObject({ arm: onCanary ? 'canary' : 'stable', version: onCanary ? 3 : 2 })
      }
      // Promoted: version 3 for everyone.
      await deploy(model.id, { version: 3 })
      const promoted = await socket(model.id, {
        token: admin,
        body: { features: loyal, entityId: 'scout-1' },
      })
      expect(promoted.body).toMatchObject({ arm: 'default', version: 3 })
    })

    test('a forwarding servingEndpoint receives the prediction from the native route; 502 when it fails', async () => {
      const sink = predictionSink({ prediction: 'remote', probability: 0.61, confidence: 0.59 })
      const { seen } = sink
      try {
        const { model } = await trainedClassifier(a, admin, gameId)
        await deploy(model.id, { servingEndpoint: sink.url })
        const r = await socket(model.id, { token: admin, body: { features: leaving, entityId: 'captain-3' } })
        expect(r.status).toBe(200)
        expect(r.body).toMatchObject({
          prediction: 'remote',
          probability: 0.61,
          confidence: 0.59,
          version: 2,
        })
        expect(seen).toEqual([{ modelId: model.id, version: 2, features: leaving, entityId: 'captain-3' }])
        // The features it was asked with are the ones logged.
        const row = await (async () => {
          await a.req('GET', `/api/ml-models/${model.id}/stats?days=1`, { token: admin })
          return a.db.get<{ features: string; entity_id: string }>(
            'SELECT features, entity_id FROM ml_predictions WHERE id = ?',
            [r.body.predictionId],
          )
        })()
        expect(JSON.parse(row!.features)).toEqual([leaving.sessions, leaving.days_since_purchase])
        expect(row!.entity_id).toBe('captain-3')
        // Checked here before anything is forwarded.
        expect((await socket(model.id, { token: admin, body: { features: {} } })).status).toBe(400)
        expect(seen.length).toBe(1)
        sink.stop()
        const down = await same(model.id, { token: admin, body: { features: loyal } }, 502)
        expect(down.body.error).toBe('bad_gateway')
      } finally {
        sink.stop()
      }
    })

    test('the rate limit counts native predictions: X-RateLimit-* on each answer, 429 past it', async () => {
      const limited = await makeApp(engine, {
        plugins: { games: {}, ingest: {}, ml: { drift_check_minutes: 0, flush_ms: 5 } },
        config: { rate_limit: { requests_per_minute: 3, burst: 0 } },
      })
      try {
        const url = limited.listen()
        // Set up with the admin token, which the limit exempts.
        const internal: TestApp = {
          ...limited,
          req: (method, path, o = {}) =>
            limited.req(method, path, {
              ...o,
              token: null,
              headers: { ...o.headers, 'x-admin-token': 'test-admin-token' },
            }),
        }
        const { model } = await trainedClassifier(internal, '', await newGame(internal, ''))
        await internal.req('POST', `/api/ml-models/${model.id}/deploy`, { body: {} })
        const dev = await limited.token('developer')
        const send = () =>
          fetch(`${url}/api/ml-models/${model.id}/predict`, {
            method: 'POST',
            headers: { authorization: `Bearer ${dev}`, 'content-type': 'application/json' },
            body: JSON.stringify({ features: loyal }),
          })
        await clearOfMinute()
        for (const remaining of ['2', '1', '0']) {
          const sent = Date.now()
          const r = await send()
          expect(r.status).toBe(200)
          expect(r.headers.get('x-ratelimit-limit')).toBe('3')
          expect(r.headers.get('x-ratelimit-remaining')).toBe(remaining)
          // The end of the minute the request was counted in: after the moment it was sent.
          expect(Number(r.headers.get('x-ratelimit-reset'))).toBeGreaterThan(sent / 1000)
        }
        const over = await send()
        expect(over.status).toBe(429)
        expect(Number(over.headers.get('retry-after'))).toBeGreaterThanOrEqual(1)
        expect(((await over.json()) as { error: string }).error).toBe('rate_limit_exceeded')
      } finally {
        await limited.stop()
      }
    })

    test('the OpenAPI description keeps the route: its body, its security and its answers', async () => {
      const doc = (await a.req('GET', '/v3/api-docs')).body
      const op = doc.paths['/api/ml-models/{id}/predict'].post
      expect(op.security).toEqual([{ bearer: [] }, { adminToken: [] }])
      expect(op.requestBody.content['application/json'].schema).toEqual({
        $ref: '#/components/schemas/ml.PredictRequest',
      })
      const schema = doc.components.schemas['ml.PredictRequest']
      expect(schema.required).toEqual(['features'])
      expect(Object.keys(schema.properties).sort()).toEqual(['entityId', 'features'])
      expect(op.responses['200'].content['application/json'].schema).toEqual({
        $ref: '#/components/schemas/ml.Prediction',
      })
      for (const status of ['400', '401', '403', '404', '409']) expect(op.responses[status]).toBeDefined()
    })
  })
})
