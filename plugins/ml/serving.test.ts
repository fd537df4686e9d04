import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { type TestApp, forEachEngine } from '../../test/helpers'
import {
  mlApp,
  newGame,
  predictionSink,
  sameStoreInstance,
  trainedClassifier,
  uploadCsv,
  waitJob,
} from './testing'

forEachEngine((engine) => {
  let a: TestApp
  let admin: string
  let gameId: string
  beforeAll(async () => {
    a = await mlApp(engine, { flush_ms: 5 })
    admin = await a.token('admin')
    gameId = await newGame(a, admin)
  })
  afterAll(() => a.stop())

  const deploy = (id: string, body: Record<string, unknown> = {}) =>
    a.req('POST', `/api/ml-models/${id}/deploy`, { token: admin, body })
  const predict = (id: string, body: Record<string, unknown>, token = admin) =>
    a.req('POST', `/api/ml-models/${id}/predict`, { token, body })
  const loyal = { sessions: 9.5, days_since_purchase: 0.5 }
  const leaving = { sessions: 0.2, days_since_purchase: 11 }

  describe('ml deploy and predict', () => {
    test('deploy serves in process: {prediction, probability, confidence, latencyMs}; features are checked', async () => {
      const { model } = await trainedClassifier(a, admin, gameId)
      const d = await deploy(model.id, { servingEndpoint: 'builtin', canaryDeployment: false })
      expect(d.status).toBe(200)
      expect(d.body).toMatchObject({
        status: 'DEPLOYED',
        deployedVersion: 2,
        servingEndpoint: 'builtin',
        canaryDeployment: false,
      })
      const yes = await predict(model.id, { features: { ...leaving, guild: 3 } })
      expect(yes.status).toBe(200)
      expect(yes.body).toMatchObject({ prediction: 'yes', modelId: model.id, version: 2, arm: 'default' })
      expect(yes.body.probability).toBeGreaterThan(0.9)
      expect(yes.body.confidence).toBe(yes.body.probability)
      expect(yes.body.latencyMs).toBeGreaterThan(0)
      expect(yes.body.latencyMs).toBeLessThan(50)
      const no = await predict(model.id, { features: loyal })
      expect(no.body.prediction).toBe('no')
      expect(no.body.probability).toBeLessThan(0.1)
      expect(no.body.confidence).toBeCloseTo(1 - no.body.probability, 10)

      const bad = await predict(model.id, { features: { sessions: 'many' } })
      expect(bad.status).toBe(400)
      expect(bad.body.message).toContain('body.features.sessions: must be a finite number')
      expect(bad.body.message).toContain('body.features.days_since_purchase: missing')
      expect((await predict(model.id, { features: [1, 2] })).status).toBe(400)
      expect((await predict(model.id, { features: loyal, extra: true })).status).toBe(400)
      expect(
        (await a.req('POST', `/api/ml-models/${model.id}/predict`, { body: { features: loyal } })).status,
      ).toBe(401)
      expect((await predict(model.id, { features: loyal }, await a.token('viewer'))).status).toBe(403)
      expect((await predict(model.id, { features: loyal }, await a.token('developer'))).status).toBe(200)
      // Deployed models are not deleted.
      expect((await a.req('DELETE', `/api/ml-models/${model.id}`, { token: admin })).status).toBe(409)
    })

    test('bad deploy bodies answer 400; a viewer gets 403', async () => {
      const { model } = await trainedClassifier(a, admin, gameId)
      const e = await deploy(model.id, { servingEndpoint: 'ftp://models.example/x' })
      expect(e.status).toBe(400)
      expect(e.body.message).toContain('body.servingEndpoint')
      const v = await deploy(model.id, { version: 7 })
      expect(v.status).toBe(400)
      expect(v.body.message).toContain('body.version')
      expect((await deploy(model.id, { canaryDeployment: 'yes' })).status).toBe(400)
      const viewer = await a.req('POST', `/api/ml-models/${model.id}/deploy`, {
        token: await a.token('viewer'),
        body: {},
      })
      expect(viewer.status).toBe(403)
      expect((await a.req('GET', `/api/ml-models/${model.id}`, { token: admin })).body.status).toBe(
        'EVALUATING',
      )
    })

    test('a servingEndpoint that is not built in receives the prediction requests', async () => {
      const sink = predictionSink({ prediction: 'remote-yes', probability: 0.77, confidence: 0.66 })
      const { seen, url } = sink
      try {
        const { model } = await trainedClassifier(a, admin, gameId)
        // Read back masked like every secret URL: host and port show, the path does not.
        const shown = `${new URL(url).origin}/set`
        expect((await deploy(model.id, { servingEndpoint: url })).body.servingEndpoint).toBe(shown)
        const r = await predict(model.id, { features: loyal, entityId: 'captain-7' })
        expect(r.status).toBe(200)
        expect(r.body).toMatchObject({
          prediction: 'remote-yes',
          probability: 0.77,
          confidence: 0.66,
          version: 2,
        })
        expect(seen).toEqual([{ modelId: model.id, version: 2, features: loyal, entityId: 'captain-7' }])
        // Features are still checked here first.
        expect((await predict(model.id, { features: {} })).status).toBe(400)
        expect(seen.length).toBe(1)
        sink.stop()
        const down = await predict(model.id, { features: loyal })
        expect(down.status).toBe(502)
        // A deploy that names no endpoint keeps the current one; 'builtin' brings serving home.
        expect((await deploy(model.id)).body.servingEndpoint).toBe(shown)
        expect((await deploy(model.id, { servingEndpoint: 'builtin' })).body.servingEndpoint).toBe('builtin')
        expect((await predict(model.id, { features: loyal })).body.prediction).toBe('no')
      } finally {
        sink.stop()
      }
    })

    test('retraining makes version 3 while version 2 (the first training) serves; deploy, canary, promote and roll back', async () => {
      const { model, dataset } = await trainedClassifier(a, admin, gameId)
      await deploy(model.id)
      const r = await a.req('POST', `/api/ml-models/${model.id}/train`, {
        token: admin,
        body: {
          datasetConfig: {
            source: 'csv',
            query: dataset,
            features: ['sessions', 'days_since_purchase'],
            label: 'churned',
          },
          hyperparameters: { l2: 0.05 },
        },
      })
      expect(r.status).toBe(202)
      expect((await predict(model.id, { features: loyal })).body.version).toBe(2)
      expect((await waitJob(a, admin, model.id, r.body.id)).version).toBe(3)
      const after = (await a.req('GET', `/api/ml-models/${model.id}`, { token: admin })).body
      expect(after).toMatchObject({ status: 'EVALUATING', version: 3, trainedVersion: 3, deployedVersion: 2 })
      expect((await predict(model.id, { features: loyal })).body.version).toBe(2)
      let versions = (await a.req('GET', `/api/ml-models/${model.id}/versions`, { token: admin })).body
      expect(versions.map((v: { version: number; status: string }) => [v.version, v.status])).toEqual([
        [3, 'candidate'],
        [2, 'serving'],
      ])
      expect(versions[0].hyperparameters.l2).toBe(0.05)
      expect(versions[1].metrics.accuracy).toBeGreaterThan(0.9)

      // Canary: 25% of entities, each always on the same arm.
      const c = await deploy(model.id, { canaryDeployment: true, canaryPercent: 25 })
      expect(c.body).toMatchObject({
        deployedVersion: 2,
        canaryVersion: 3,
        canaryPercent: 25,
        canaryDeployment: true,
      })
      const arms = new Map<string, string>()
      for (let i = 0; i < 200; i++) {
        const p = await predict(model.id, { features: loyal, entityId: `player-${i}` })
        arms.set(`player-${i}`, p.body.arm)
        expect(p.body.version).toBe(p.body.arm === 'canary' ? 3 : 2)
      }
      const share = [...arms.values()].filter((x) => x === 'canary').length / 200
      expect(share).toBeGreaterThan(0.15)
      expect(share).toBeLessThan(0.35)
      for (let i = 0; i < 20; i++)
        expect((await predict(model.id, { features: loyal, entityId: `player-${i}` })).body.arm).toBe(
          arms.get(`player-${i}`)!,
        )

      const promoted = await deploy(model.id, { version: 3 })
      expect(promoted.body).toMatchObject({ deployedVersion: 3, canaryDeployment: false })
      expect(promoted.body.canaryVersion).toBeUndefined()
      expect((await predict(model.id, { features: loyal, entityId: 'player-1' })).body).toMatchObject({
        version: 3,
        arm: 'default',
      })
      versions = (await a.req('GET', `/api/ml-models/${model.id}/versions`, { token: admin })).body
      expect(versions.map((v: { status: string }) => v.status)).toEqual(['serving', 'retired'])
      const back = await deploy(model.id, { version: 2 })
      expect(back.body.deployedVersion).toBe(2)
      expect((await predict(model.id, { features: loyal })).body.version).toBe(2)
    })

    test('models live in the database: another instance on the same store serves the same answers', async () => {
      const { model } = await trainedClassifier(a, admin, gameId, 23)
      await deploy(model.id)
      const here = await predict(model.id, { features: leaving })
      const other = await sameStoreInstance(a)
      try {
        const there = await other.req('POST', `/api/ml-models/${model.id}/predict`, {
          token: admin,
          body: { features: leaving },
        })
        expect(there.status).toBe(200)
        expect(there.body.prediction).toBe(here.body.prediction)
        expect(there.body.probability).toBe(here.body.probability)
      } finally {
        await other.stop()
      }
    })

    test('a deploy here shows on another instance at once (change notices), not after its cache time', async () => {
      const { model, dataset } = await trainedClassifier(a, admin, gameId, 29)
      await deploy(model.id)
      const r = await a.req('POST', `/api/ml-models/${model.id}/train`, {
        token: admin,
        body: {
          datasetConfig: {
            source: 'csv',
            query: dataset,
            features: ['sessions', 'days_since_purchase'],
            label: 'churned',
          },
        },
      })
      await waitJob(a, admin, model.id, r.body.id)
      const other = await sameStoreInstance(a, { cache_ttl_ms: 3_600_000 })
      try {
        const ask = () =>
          other.req('POST', `/api/ml-models/${model.id}/predict`, { token: admin, body: { features: loyal } })
        expect((await ask()).body.version).toBe(2) // now cached there for an hour
        await deploy(model.id, { version: 3 })
        const deadline = Date.now() + 3000
        let seen = 2
        while (seen !== 3 && Date.now() < deadline) {
          seen = (await ask()).body.version
          if (seen !== 3) await Bun.sleep(10)
        }
        // PostgreSQL (LISTEN/NOTIFY) and MySQL (the change table) carry the notice to the other process; SQLite is one instance per file,
        // where notices stay in the process that made them.
        expect(seen).toBe(engine === 'sqlite' ? 2 : 3)
      } finally {
        await other.stop()
      }
    })

    test('archiving a deployed model stops its predictions', async () => {
      const { model } = await trainedClassifier(a, admin, gameId)
      await deploy(model.id)
      expect((await a.req('POST', `/api/ml-models/${model.id}/archive`, { token: admin })).body.status).toBe(
        'ARCHIVED',
      )
      const p = await predict(model.id, { features: loyal })
      expect(p.status).toBe(409)
      expect(p.body.message).toContain('ARCHIVED')
    })

    test('time series models forecast a horizon', async () => {
      const m = (
        await a.req('POST', '/api/ml-models', {
          token: admin,
          body: { gameId, name: 'dau-forecast', type: 'TIME_SERIES' },
        })
      ).body
      const week = [10, 12, 14, 13, 20, 40, 42]
      const ds = await uploadCsv(
        a,
        admin,
        m.id,
        ['dau', ...Array.from({ length: 56 }, (_, t) => String(500 + t + week[t % 7]))].join('\n'),
      )
      const j = await a.req('POST', `/api/ml-models/${m.id}/train`, {
        token: admin,
        body: {
          datasetConfig: { source: 'csv', query: ds, features: [], label: 'dau' },
          hyperparameters: { seasonLength: 7 },
        },
      })
      expect((await waitJob(a, admin, m.id, j.body.id)).status).toBe('completed')
      await deploy(m.id)
      const f = await predict(m.id, { features: { horizon: 6 } })
      expect(f.status).toBe(200)
      // t = 61: 500 + 61 + week[61 % 7 = 5]
      expect(f.body.value).toBeGreaterThan(601 * 0.97)
      expect(f.body.value).toBeLessThan(601 * 1.03)
      expect(Number(f.body.prediction)).toBe(f.body.value)
      expect((await predict(m.id, { features: { horizon: 0 } })).status).toBe(400)
      expect((await predict(m.id, { features: {} })).body.message).toContain('body.features.horizon')
    })
  })
})
