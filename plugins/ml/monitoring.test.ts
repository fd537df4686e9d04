import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { murmur3 } from '../../sdk/murmur3'
import { type TestApp, forEachEngine } from '../../test/helpers'
import { mlApp, newGame, newModel, trainedClassifier } from './testing'

forEachEngine((engine) => {
  let a: TestApp
  let admin: string
  let gameId: string
  beforeAll(async () => {
    a = await mlApp(engine, { flush_ms: 5, min_feedback: 20, min_predictions: 50, psi_sample: 200 })
    admin = await a.token('admin')
    gameId = await newGame(a, admin)
  })
  afterAll(() => a.stop())

  const post = (path: string, body: unknown, token = admin) => a.req('POST', path, { token, body })
  const loyal = { sessions: 9.5, days_since_purchase: 0.5 }
  const deployed = async (seed: number) => {
    const { model } = await trainedClassifier(a, admin, gameId, seed)
    expect((await post(`/api/ml-models/${model.id}/deploy`, {})).status).toBe(200)
    return model
  }

  describe('ml A/B tests, feedback and monitoring', () => {
    test('an A/B test splits entities by murmur3(entityId) mod 100 and counts predictions and feedback per arm', async () => {
      const challenger = await deployed(31)
      const baseline = await deployed(32)
      const draft = await newModel(a, admin, { gameId, type: 'CLASSIFICATION' })
      const other = await newModel(a, admin, { gameId, type: 'REGRESSION' })
      const path = `/api/ml-models/${challenger.id}/ab-test`
      expect((await post(path, { baselineModelId: challenger.id, trafficSplit: 30 })).status).toBe(400)
      expect((await post(path, { baselineModelId: 'missing', trafficSplit: 30 })).body.message).toContain(
        'body.baselineModelId',
      )
      expect((await post(path, { baselineModelId: baseline.id, trafficSplit: 130 })).body.message).toContain(
        'body.trafficSplit',
      )
      const notDeployed = await post(path, { baselineModelId: draft.id, trafficSplit: 30 })
      expect(notDeployed.status).toBe(409)
      expect(notDeployed.body.message).toContain('DEPLOYED')
      expect((await post(path, { baselineModelId: other.id, trafficSplit: 30 })).status).toBe(409)
      expect(
        (await post(`/api/ml-models/${draft.id}/ab-test`, { baselineModelId: baseline.id, trafficSplit: 30 }))
          .status,
      ).toBe(409)
      expect(
        (await post(path, { baselineModelId: baseline.id, trafficSplit: 30 }, await a.token('viewer')))
          .status,
      ).toBe(403)
      const started = await post(path, { baselineModelId: baseline.id, trafficSplit: 30 })
      expect(started.status).toBe(200)
      expect(started.body.abTest).toMatchObject({ baselineModelId: baseline.id, trafficSplit: 30 })

      let challengerN = 0
      const ids: Record<string, string[]> = { challenger: [], baseline: [] }
      for (let i = 0; i < 300; i++) {
        const entity = `pilot-${i}`
        const p = await post(`/api/ml-models/${challenger.id}/predict`, { features: loyal, entityId: entity })
        const expected = murmur3(entity) % 100 < 30 ? 'challenger' : 'baseline'
        expect(p.body.arm).toBe(expected)
        expect(p.body.modelId).toBe(expected === 'challenger' ? challenger.id : baseline.id)
        ids[expected].push(p.body.predictionId)
        if (expected === 'challenger') challengerN++
      }
      // Feedback: the challenger right every time, the baseline wrong half the time.
      for (const id of ids.challenger.slice(0, 20))
        expect(
          (await post(`/api/ml-models/${challenger.id}/feedback`, { predictionId: id, actual: 'no' })).body
            .correct,
        ).toBe(true)
      for (const [i, id] of ids.baseline.slice(0, 20).entries())
        await post(`/api/ml-models/${challenger.id}/feedback`, {
          predictionId: id,
          actual: i % 2 ? 'no' : 'yes',
        })
      const s = (await a.req('GET', `/api/ml-models/${challenger.id}/stats`, { token: admin })).body
      expect(s.predictions).toBe(300)
      expect(s.arms.challenger).toMatchObject({
        modelId: challenger.id,
        predictions: challengerN,
        feedback: 20,
        correct: 20,
        accuracy: 1,
      })
      expect(s.arms.baseline).toMatchObject({
        modelId: baseline.id,
        predictions: 300 - challengerN,
        feedback: 20,
        correct: 10,
        accuracy: 0.5,
      })
      // The baseline cannot go away mid-test.
      expect((await post(`/api/ml-models/${baseline.id}/archive`, {})).status).toBe(409)
      expect((await a.req('DELETE', path, { token: admin })).body.abTest).toBeUndefined()
      expect((await a.req('DELETE', path, { token: admin })).status).toBe(409)
      expect(
        (await post(`/api/ml-models/${challenger.id}/predict`, { features: loyal, entityId: 'pilot-1' })).body
          .arm,
      ).toBe('default')
    })

    test('feedback: 404 for an unknown prediction, 409 for a second answer, 400 for a bad body; stats show days and latency', async () => {
      const m = await deployed(41)
      const p = await post(`/api/ml-models/${m.id}/predict`, { features: loyal })
      const fb = `/api/ml-models/${m.id}/feedback`
      expect((await post(fb, { predictionId: 'nope', actual: 'no' })).status).toBe(404)
      expect((await post(fb, { predictionId: p.body.predictionId })).status).toBe(400)
      expect((await post(fb, { predictionId: p.body.predictionId, actual: { deep: 1 } })).status).toBe(400)
      expect(
        (await post(fb, { predictionId: p.body.predictionId, actual: 'no' }, await a.token('viewer'))).status,
      ).toBe(403)
      expect(
        (await a.req('POST', fb, { body: { predictionId: p.body.predictionId, actual: 'no' } })).status,
      ).toBe(401)
      const first = await post(fb, { predictionId: p.body.predictionId, actual: 'no' })
      expect(first.body).toEqual({
        predictionId: p.body.predictionId,
        prediction: 'no',
        actual: 'no',
        correct: true,
      })
      expect((await post(fb, { predictionId: p.body.predictionId, actual: 'yes' })).status).toBe(409)
      const s = (await a.req('GET', `/api/ml-models/${m.id}/stats?days=3`, { token: admin })).body
      expect(s.predictionsPerDay).toHaveLength(3)
      expect(s.predictionsPerDay[2]).toEqual({ date: new Date().toISOString().slice(0, 10), predictions: 1 })
      expect(s).toMatchObject({ predictions: 1, feedback: 1, feedbackAccuracy: 1 })
      expect(s.latencyMs.p50).toBeGreaterThan(0)
      expect(s.latencyMs.p99).toBeGreaterThanOrEqual(s.latencyMs.p95)
      expect(s.trainingAccuracy).toBeGreaterThan(0.9)
      expect((await a.req('GET', `/api/ml-models/${m.id}/stats?days=0`, { token: admin })).status).toBe(400)
    })

    test('an accuracy drop and a feature shift raise model_drift on the bus once per cooldown', async () => {
      const m = await deployed(51)
      const heard: Array<Record<string, unknown>> = []
      const off = a.bus.on('model_drift', (e) => {
        if (e.model_id === m.id) heard.push(e)
      })
      try {
        // Nothing yet: too little feedback and too few predictions.
        expect((await post(`/api/ml-models/${m.id}/drift-check`, {})).body.raised).toEqual([])
        // Players now arrive with far more sessions than in training, and the model is wrong on them.
        for (let i = 0; i < 60; i++) {
          const p = await post(`/api/ml-models/${m.id}/predict`, {
            features: { sessions: 40 + i, days_since_purchase: 0.1 },
          })
          if (i < 25)
            await post(`/api/ml-models/${m.id}/feedback`, {
              predictionId: p.body.predictionId,
              actual: i < 5 ? 'no' : 'yes',
            })
        }
        const s = (await a.req('GET', `/api/ml-models/${m.id}/stats`, { token: admin })).body
        expect(s.drift.accuracySeverity).toBe('critical')
        expect(s.drift.psi.sessions).toBeGreaterThan(0.5)
        expect(s.drift.featureSeverity).toBe('critical')
        const check = await post(`/api/ml-models/${m.id}/drift-check`, {})
        expect(check.status).toBe(200)
        expect(
          check.body.raised.map((r: { kind: string; severity: string }) => `${r.kind}:${r.severity}`).sort(),
        ).toEqual(['accuracy:critical', 'feature:critical'])
        expect(heard).toHaveLength(2)
        const acc = heard.find((e) => e.kind === 'accuracy')!
        expect(acc).toMatchObject({ model_id: m.id, game_id: gameId, severity: 'critical', version: 2 })
        expect(acc.accuracy_drop as number).toBeGreaterThan(0.15)
        expect(
          (heard.find((e) => e.kind === 'feature')!.psi as Record<string, number>).sessions,
        ).toBeGreaterThan(0.5)
        // Within the cooldown the same findings stay quiet; the alerts are listed in the stats.
        expect((await post(`/api/ml-models/${m.id}/drift-check`, {})).body.raised).toEqual([])
        expect(heard).toHaveLength(2)
        const after = (await a.req('GET', `/api/ml-models/${m.id}/stats`, { token: admin })).body
        expect(after.drift.alerts).toHaveLength(2)
      } finally {
        off()
      }
      const draft = await newModel(a, admin, { gameId, type: 'CLASSIFICATION' })
      expect((await post(`/api/ml-models/${draft.id}/drift-check`, {})).status).toBe(409)
      expect((await post(`/api/ml-models/${m.id}/drift-check`, {}, await a.token('viewer'))).status).toBe(403)
    })
  })
})

forEachEngine((engine) => {
  test('the periodic drift check raises model_drift without being asked', async () => {
    const a = await mlApp(engine, { flush_ms: 5, min_feedback: 20, drift_check_minutes: 0.002 })
    try {
      const admin = await a.token('admin')
      const gameId = await newGame(a, admin)
      const { model } = await trainedClassifier(a, admin, gameId, 61)
      const heard: string[] = []
      a.bus.on('model_drift', (e) => {
        if (e.model_id === model.id) heard.push(`${e.kind}:${e.severity}`)
      })
      await a.req('POST', `/api/ml-models/${model.id}/deploy`, { token: admin, body: {} })
      for (let i = 0; i < 25; i++) {
        const p = await a.req('POST', `/api/ml-models/${model.id}/predict`, {
          token: admin,
          body: { features: { sessions: 9, days_since_purchase: 1 } },
        })
        await a.req('POST', `/api/ml-models/${model.id}/feedback`, {
          token: admin,
          body: { predictionId: p.body.predictionId, actual: 'yes' },
        })
      }
      const deadline = Date.now() + 5000
      while (!heard.length && Date.now() < deadline) await Bun.sleep(20)
      expect(heard).toEqual(['accuracy:critical'])
    } finally {
      await a.stop()
    }
  })
})
