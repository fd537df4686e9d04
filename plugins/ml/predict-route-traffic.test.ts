import { describe, expect, test } from 'bun:test'
import { murmur3 } from '../../sdk/murmur3'
import { type TestApp, clearOfMinute, forEachEngine, makeApp } from '../../test/helpers'
import { leaving, loyal, predictSuite } from './predict-route-fixture'
import { churnCsv, newGame, predictionSink, trainChurn, trainedClassifier, uploadCsv } from './testing'

// Where the native route sends a prediction: A/B tests, canaries, a forwarding servingEndpoint;
// and its rate limit (predict-route-fixture.ts).
forEachEngine((engine) => {
  const fx = predictSuite(engine)
  const { socket, same, deploy } = fx

  describe('predict on the native route', () => {
    test('an A/B test splits entities by murmur3(entityId) mod 100 on the native route, stably', async () => {
      const challenger = (await trainedClassifier(fx.a, fx.admin, fx.gameId, 41)).model
      const baseline = (await trainedClassifier(fx.a, fx.admin, fx.gameId, 42)).model
      await deploy(challenger.id)
      await deploy(baseline.id)
      const started = await fx.a.req('POST', `/api/ml-models/${challenger.id}/ab-test`, {
        token: fx.admin,
        body: { baselineModelId: baseline.id, trafficSplit: 40 },
      })
      expect(started.status).toBe(200)
      const seen = { challenger: 0, baseline: 0 }
      for (let i = 0; i < 120; i++) {
        const entity = `raider-${i}`
        const p = await socket(challenger.id, {
          token: fx.admin,
          body: { features: loyal, entityId: entity },
        })
        const arm = murmur3(entity) % 100 < 40 ? 'challenger' : 'baseline'
        expect(p.body.arm).toBe(arm)
        expect(p.body.modelId).toBe(arm === 'challenger' ? challenger.id : baseline.id)
        seen[arm]++
        // The same entity stays on its arm.
        if (i % 20 === 0)
          expect(
            (await socket(challenger.id, { token: fx.admin, body: { features: loyal, entityId: entity } }))
              .body.arm,
          ).toBe(arm)
      }
      expect(seen.challenger).toBeGreaterThan(20)
      expect(seen.baseline).toBeGreaterThan(40)
      const stats = await fx.a.req('GET', `/api/ml-models/${challenger.id}/stats?days=1`, { token: fx.admin })
      expect(stats.body.arms.challenger.predictions + stats.body.arms.baseline.predictions).toBe(126)
      expect(stats.body.arms.baseline.modelId).toBe(baseline.id)
      // Stopped: every entity goes to the challenger again.
      await fx.a.req('DELETE', `/api/ml-models/${challenger.id}/ab-test`, { token: fx.admin })
      const after = await socket(challenger.id, {
        token: fx.admin,
        body: { features: loyal, entityId: 'raider-1' },
      })
      expect(after.body.arm).toBe('default')
    })

    test('a canary deploy sends its share of entities to the new version on the native route', async () => {
      const { model } = await trainedClassifier(fx.a, fx.admin, fx.gameId)
      await deploy(model.id)
      await trainChurn(fx.a, fx.admin, model.id, await uploadCsv(fx.a, fx.admin, model.id, churnCsv(2000, 9)))
      // Version 2 (the first training) keeps serving until version 3 is deployed.
      expect((await socket(model.id, { token: fx.admin, body: { features: loyal } })).body.version).toBe(2)
      const canary = await deploy(model.id, { version: 3, canaryDeployment: true, canaryPercent: 30 })
      expect(canary.status).toBe(200)
      for (let i = 0; i < 60; i++) {
        const entity = `scout-${i}`
        const p = await socket(model.id, { token: fx.admin, body: { features: loyal, entityId: entity } })
        const onCanary = murmur3(entity) % 100 < 30
        expect(p.body).toMatchObject({ arm: onCanary ? 'canary' : 'stable', version: onCanary ? 3 : 2 })
      }
      // Promoted: version 3 for everyone.
      await deploy(model.id, { version: 3 })
      const promoted = await socket(model.id, {
        token: fx.admin,
        body: { features: loyal, entityId: 'scout-1' },
      })
      expect(promoted.body).toMatchObject({ arm: 'default', version: 3 })
    })

    test('a forwarding servingEndpoint receives the prediction from the native route; 502 when it fails', async () => {
      const sink = predictionSink({ prediction: 'remote', probability: 0.61, confidence: 0.59 })
      const { seen } = sink
      try {
        const { model } = await trainedClassifier(fx.a, fx.admin, fx.gameId)
        await deploy(model.id, { servingEndpoint: sink.url })
        const r = await socket(model.id, {
          token: fx.admin,
          body: { features: leaving, entityId: 'captain-3' },
        })
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
          await fx.a.req('GET', `/api/ml-models/${model.id}/stats?days=1`, { token: fx.admin })
          return fx.a.db.get<{ features: string; entity_id: string }>(
            'SELECT features, entity_id FROM ml_predictions WHERE id = ?',
            [r.body.predictionId],
          )
        })()
        expect(JSON.parse(row!.features)).toEqual([leaving.sessions, leaving.days_since_purchase])
        expect(row!.entity_id).toBe('captain-3')
        // Checked here before anything is forwarded.
        expect((await socket(model.id, { token: fx.admin, body: { features: {} } })).status).toBe(400)
        expect(seen.length).toBe(1)
        sink.stop()
        const down = await same(model.id, { token: fx.admin, body: { features: loyal } }, 502)
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
  })
})
