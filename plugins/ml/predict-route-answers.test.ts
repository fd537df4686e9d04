import { describe, expect, test } from 'bun:test'
import { chunkedBody, forEachEngine } from '../../test/helpers'
import { leaving, loyal, predictSuite } from './predict-route-fixture'
import { newModel, trainedClassifier } from './testing'

// A prediction on the native route, its error answers both ways, and the route's OpenAPI
// description (predict-route-fixture.ts).
forEachEngine((engine) => {
  const fx = predictSuite(engine)
  const { socket, handled, same, deploy, predictWrites } = fx

  describe('predict on the native route', () => {
    test('the socket is answered by the native route: a prediction, logged, in the stats and the histogram', async () => {
      const { model } = await trainedClassifier(fx.a, fx.admin, fx.gameId)
      expect((await deploy(model.id)).status).toBe(200)
      const yes = await socket(model.id, { token: fx.admin, body: { features: leaving } })
      expect(yes.status).toBe(200)
      expect(yes.headers.get('content-type')).toContain('application/json')
      expect(yes.body).toMatchObject({ prediction: 'yes', modelId: model.id, version: 2, arm: 'default' })
      expect(yes.body.probability).toBeGreaterThan(0.9)
      expect(yes.body.confidence).toBe(yes.body.probability)
      expect(yes.body.latencyMs).toBeGreaterThan(0)
      expect(typeof yes.body.predictionId).toBe('string')
      const no = await socket(model.id, { token: await fx.a.token('developer'), body: { features: loyal } })
      expect(no.body.prediction).toBe('no')
      expect(no.body.confidence).toBeCloseTo(1 - no.body.probability, 10)
      // The x-admin-token is a credential of the permission macro too.
      const internal = await socket(model.id, {
        headers: { 'x-admin-token': 'test-admin-token' },
        body: { features: loyal },
      })
      expect(internal.status).toBe(200)
      // Through app.handle, the same handler answers the same prediction, and Elysia reports it.
      const viaElysia = await handled(model.id, { token: fx.admin, body: { features: leaving } })
      expect(viaElysia.body).toMatchObject({ prediction: 'yes', probability: yes.body.probability })
      const deadline = Date.now() + 5000
      while (!predictWrites.length && Date.now() < deadline) await Bun.sleep(5)
      // Only that one: the three socket requests never went through Elysia.
      expect(predictWrites).toEqual([`/api/ml-models/${model.id}/predict`])

      // Logged: feedback finds the socket's prediction, the stats count all four.
      const fb = await fx.a.req('POST', `/api/ml-models/${model.id}/feedback`, {
        token: fx.admin,
        body: { predictionId: yes.body.predictionId, actual: 'yes' },
      })
      expect(fb.status).toBe(200)
      expect(fb.body.correct).toBe(true)
      const stats = await fx.a.req('GET', `/api/ml-models/${model.id}/stats?days=1`, { token: fx.admin })
      expect(stats.body.predictions).toBe(4)
      expect(stats.body.latencyMs.p99).toBeGreaterThan(0)
      expect(stats.body.arms.default).toMatchObject({ modelId: model.id, predictions: 4, feedback: 1 })
      // The stored features are the vector in the artifact's order.
      const row = await fx.a.db.get<{ features: string; entity_id: string | null }>(
        'SELECT features, entity_id FROM ml_predictions WHERE id = ?',
        [yes.body.predictionId],
      )
      expect(JSON.parse(row!.features)).toEqual([leaving.sessions, leaving.days_since_purchase])
      expect(row!.entity_id).toBeNull()
      // The request histogram names the route template for the native answers too.
      const text = await fx.a.metrics.text()
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
      const { model } = await trainedClassifier(fx.a, fx.admin, fx.gameId)
      await deploy(model.id)
      const anon = await same(model.id, { body: { features: loyal } }, 401)
      expect(anon.body).toMatchObject({ error: 'unauthorized', path: `/api/ml-models/${model.id}/predict` })
      await same(model.id, { token: 'not-a-jwt', body: { features: loyal } }, 401)
      await same(model.id, { headers: { 'x-admin-token': 'wrong' }, body: { features: loyal } }, 401)
      // Who asks is decided before the body is read: a bad body without a token is a 401.
      await same(model.id, { raw: '{"features":' }, 401)
      const viewer = await same(
        model.id,
        { token: await fx.a.token('viewer'), body: { features: loyal } },
        403,
      )
      expect(viewer.body.message).toContain('ml-serving:write')
      await same(model.id, { token: await fx.a.token('viewer'), body: { features: 'x' } }, 403)
    })

    test('404 for an unknown model; 409 while not deployed, DRAFT or ARCHIVED', async () => {
      const unknown = await same('no-such-model', { token: fx.admin, body: { features: loyal } }, 404)
      expect(unknown.body.error).toBe('not_found')
      const draft = await newModel(fx.a, fx.admin, { gameId: fx.gameId, type: 'CLASSIFICATION' })
      const d = await same(draft.id, { token: fx.admin, body: { features: loyal } }, 409)
      expect(d.body.message).toContain('DRAFT')
      const { model } = await trainedClassifier(fx.a, fx.admin, fx.gameId)
      const evaluating = await same(model.id, { token: fx.admin, body: { features: loyal } }, 409)
      expect(evaluating.body.message).toContain('EVALUATING')
      await deploy(model.id)
      expect((await socket(model.id, { token: fx.admin, body: { features: loyal } })).status).toBe(200)
      expect((await fx.a.req('POST', `/api/ml-models/${model.id}/archive`, { token: fx.admin })).status).toBe(
        200,
      )
      const archived = await same(model.id, { token: fx.admin, body: { features: loyal } }, 409)
      expect(archived.body.message).toContain('ARCHIVED')
    })

    test('400 naming every missing or non-numeric feature and every bad field; 415 and 413', async () => {
      const { model } = await trainedClassifier(fx.a, fx.admin, fx.gameId)
      await deploy(model.id)
      const bad = await same(model.id, { token: fx.admin, body: { features: { sessions: 'many' } } }, 400)
      expect(bad.body.message).toContain('body.features.sessions: must be a finite number')
      expect(bad.body.message).toContain('body.features.days_since_purchase: missing')
      expect(bad.body.details.errors).toEqual([
        { field: 'body.features.sessions', reason: 'must be a finite number' },
        { field: 'body.features.days_since_purchase', reason: 'missing' },
      ])
      const nulls = await same(
        model.id,
        { token: fx.admin, body: { features: { sessions: null, days_since_purchase: 1 } } },
        400,
      )
      expect(nulls.body.details.field).toBe('body.features.sessions')
      expect(
        (await same(model.id, { token: fx.admin, body: { entityId: 'p' } }, 400)).body.message,
      ).toContain('body.features')
      expect(
        (await same(model.id, { token: fx.admin, body: { features: [1, 2] } }, 400)).body.message,
      ).toContain('body.features')
      expect(
        (await same(model.id, { token: fx.admin, body: { features: loyal, extra: true } }, 400)).body.message,
      ).toContain('body.extra')
      expect(
        (await same(model.id, { token: fx.admin, body: { features: loyal, entityId: '' } }, 400)).body
          .message,
      ).toContain('body.entityId')
      expect(
        (await same(model.id, { token: fx.admin, body: { features: loyal, entityId: 7 } }, 400)).body.message,
      ).toContain('body.entityId')
      expect((await same(model.id, { token: fx.admin, body: [loyal] }, 400)).body.message).toContain('body')
      const malformed = await same(
        model.id,
        { token: fx.admin, raw: '{"features":', headers: { 'content-type': 'application/json' } },
        400,
      )
      expect(malformed.body.message).toBe('body: malformed JSON')
      const form = await same(
        model.id,
        {
          token: fx.admin,
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
        { token: fx.admin, raw: big, headers: { 'content-type': 'application/json' } },
        413,
      )
      expect(over.body.error).toBe('body_too_large')
      // A body without a length (chunked) is bounded the same way over the socket.
      const chunked = (text: string) =>
        fetch(`${fx.base}/api/ml-models/${model.id}/predict`, {
          method: 'POST',
          headers: { authorization: `Bearer ${fx.admin}`, 'content-type': 'application/json' },
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
        token: fx.admin,
        body: { features: { ...loyal, guild: 'red' }, entityId: 'e'.repeat(256) },
      })
      expect(ok.status).toBe(200)
    })

    test('the OpenAPI description keeps the route: its body, its security and its answers', async () => {
      const doc = (await fx.a.req('GET', '/v3/api-docs')).body
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
