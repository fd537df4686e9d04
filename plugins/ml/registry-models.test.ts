import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { type TestApp, forEachEngine } from '../../test/helpers'
import { ingest, mlApp, newGame, newModel, predictionSink, waitJob } from './testing'

/*
 * Issue 38 point 3, spec 1: algorithm and framework are free strings. A model trained elsewhere
 * (sklearn, gradient_boosting) is created, updated and deployed with a servingEndpoint, and
 * serves through it; training it in process answers 409 saying how to deploy it. An empty
 * datasetConfig.query means every event carrying the features and the label.
 */
const DAY = 86_400_000

forEachEngine((engine) => {
  describe('ml: a registry of models trained elsewhere', () => {
    let a: TestApp
    let admin: string
    let gameId: string
    beforeAll(async () => {
      a = await mlApp(engine)
      admin = await a.token('admin')
      gameId = await newGame(a, admin)
    })
    afterAll(() => a.stop())

    test('created, updated, refused training (409 saying how to deploy), deployed with a servingEndpoint and served by it', async () => {
      const m = await newModel(a, admin, {
        gameId,
        type: 'CLASSIFICATION',
        framework: 'sklearn',
        algorithm: 'gradient_boosting',
      })
      expect(m).toMatchObject({
        framework: 'sklearn',
        algorithm: 'gradient_boosting',
        status: 'DRAFT',
        version: 1,
      })

      const updated = await a.req('PUT', `/api/ml-models/${m.id}`, {
        token: admin,
        body: { algorithm: 'xgboost', framework: 'xgboost 2.1', description: 'churn, trained nightly' },
      })
      expect(updated.status).toBe(200)
      expect(updated.body).toMatchObject({ algorithm: 'xgboost', framework: 'xgboost 2.1' })

      const train = await a.req('POST', `/api/ml-models/${m.id}/train`, {
        token: admin,
        body: { datasetConfig: { source: 'events', query: 'event=x', features: ['a'], label: 'b' } },
      })
      expect(train.status).toBe(409)
      expect(train.body.message).toContain('does not train in process')
      expect(train.body.message).toContain(`POST /api/ml-models/${m.id}/deploy`)
      expect(train.body.message).toContain('servingEndpoint')

      // Without an endpoint there is nothing to serve it.
      const bare = await a.req('POST', `/api/ml-models/${m.id}/deploy`, { token: admin, body: {} })
      expect(bare.status).toBe(400)
      expect(bare.body.message).toContain('body.servingEndpoint')

      const sink = predictionSink({ prediction: 'churns', probability: 0.81, confidence: 0.62 })
      try {
        const d = await a.req('POST', `/api/ml-models/${m.id}/deploy`, {
          token: admin,
          body: { servingEndpoint: sink.url },
        })
        expect(d.status).toBe(200)
        // Read back masked like every secret URL: host and port show, the path does not.
        expect(d.body).toMatchObject({
          status: 'DEPLOYED',
          servingEndpoint: `${new URL(sink.url).origin}/set`,
          deployedVersion: 1,
        })
        const features = { sessions: 3, days_since_purchase: 40 }
        const p = await a.req('POST', `/api/ml-models/${m.id}/predict`, {
          token: admin,
          body: { features, entityId: 'pilot-1' },
        })
        expect(p.status).toBe(200)
        expect(p.body).toMatchObject({ prediction: 'churns', probability: 0.81, modelId: m.id, version: 1 })
        expect(sink.seen).toEqual([{ modelId: m.id, version: 1, features, entityId: 'pilot-1' }])
      } finally {
        sink.stop()
      }
    })

    test('a built-in name of another type is still refused, naming the field', async () => {
      const r = await a.req('POST', '/api/ml-models', {
        token: admin,
        body: {
          gameId,
          name: `m-${crypto.randomUUID().slice(0, 8)}`,
          type: 'CLASSIFICATION',
          algorithm: 'kmeans',
        },
      })
      expect(r.status).toBe(400)
      expect(r.body.message).toContain('body.algorithm')
    })

    test('an empty datasetConfig.query trains on every event carrying the features and the label', async () => {
      const g = await newGame(a, admin)
      const now = Date.now()
      const events: Array<Record<string, unknown>> = []
      for (let u = 0; u < 80; u++) {
        const at = String(now - 2 * DAY + u * 60_000)
        const gems = u % 10
        // Two event names carry the fields; a third lacks the label and one lacks the feature.
        events.push({
          event: u % 2 ? 'shop_open' : 'store_visit',
          ts: at,
          game_id: g,
          env: 'prod',
          user_id: `p${u}`,
          gems,
          bought: gems >= 5 ? 1 : 0,
        })
        events.push({ event: 'heartbeat', ts: at, game_id: g, env: 'prod', user_id: `p${u}`, gems })
        events.push({ event: 'level_end', ts: at, game_id: g, env: 'prod', user_id: `p${u}`, bought: 1 })
      }
      await ingest(a, events)
      const m = await newModel(a, admin, { gameId: g, type: 'CLASSIFICATION' })
      const r = await a.req('POST', `/api/ml-models/${m.id}/train`, {
        token: admin,
        body: { datasetConfig: { source: 'events', query: '', features: ['gems'], label: 'bought' } },
      })
      expect(r.status).toBe(202)
      const job = await waitJob(a, admin, m.id, r.body.id)
      expect(job.status).toBe('completed')
      expect(job.rowsUsed).toBe(80)
    })
  })
})
