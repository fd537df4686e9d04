import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { type TestApp, forEachEngine } from '../../test/helpers'
import { rng } from './algorithms/data'
import { churnCsv, ingest, mlApp, newGame, newModel, sameStoreInstance, uploadCsv, waitJob } from './testing'

const DAY = 86_400_000

forEachEngine((engine) => {
  let a: TestApp
  let admin: string
  let gameId: string
  beforeAll(async () => {
    a = await mlApp(engine)
    admin = await a.token('admin')
    gameId = await newGame(a, admin)
  })
  afterAll(() => a.stop())

  const train = (id: string, body: unknown, token = admin) =>
    a.req('POST', `/api/ml-models/${id}/train`, { token, body })

  describe('ml training', () => {
    test('a classifier trained on a known synthetic CSV set reaches 90% holdout accuracy; the job reports it', async () => {
      const m = await newModel(a, admin, { gameId, type: 'CLASSIFICATION' })
      const ds = await uploadCsv(a, admin, m.id, churnCsv(3000, 17))
      const r = await train(m.id, {
        datasetConfig: {
          source: 'csv',
          query: ds,
          features: ['sessions', 'days_since_purchase'],
          label: 'churned',
        },
        hyperparameters: { testSplit: 0.25, seed: 9 },
      })
      expect(r.status).toBe(202)
      expect(r.body).toMatchObject({ modelId: m.id, status: 'pending', progress: 0 })
      expect((await a.req('GET', `/api/ml-models/${m.id}`, { token: admin })).body.status).toMatch(
        /TRAINING|EVALUATING/,
      )
      const job = await waitJob(a, admin, m.id, r.body.id)
      expect(job).toMatchObject({
        status: 'completed',
        progress: 1,
        stage: 'done',
        // Created at version 1; the first completed training makes version 2.
        version: 2,
        rowsUsed: 3000,
        rowsSkipped: 0,
      })
      expect(job.hyperparameters).toMatchObject({
        testSplit: 0.25,
        seed: 9,
        maxIterations: 100,
        threshold: 0.5,
      })
      expect(job.metrics.testRows).toBe(750)
      expect(job.metrics.accuracy).toBeGreaterThanOrEqual(0.9)
      for (const k of ['precision', 'recall', 'f1', 'auc']) expect(job.metrics[k]).toBeGreaterThan(0.85)
      const model = (await a.req('GET', `/api/ml-models/${m.id}`, { token: admin })).body
      expect(model).toMatchObject({ status: 'EVALUATING', version: 2, trainedVersion: 2 })
      expect(model.metrics.accuracy).toBe(job.metrics.accuracy)
      const jobs = await a.req('GET', `/api/ml-models/${m.id}/training-jobs`, { token: admin })
      expect(jobs.body).toMatchObject({ total: 1, page: 0, size: 20 })
      expect(jobs.body.items[0].id).toBe(r.body.id)
    })

    test('linear regression on a CSV set recovers r2 and rmse; Holt-Winters forecasts a weekly series', async () => {
      const r = rng(4)
      const lines = ['playtime,level,spend']
      for (let i = 0; i < 1000; i++) {
        const p = r() * 50
        const l = r() * 30
        lines.push(`${p},${l},${3 * p - 2 * l + 5 + (r() - 0.5)}`)
      }
      const m = await newModel(a, admin, { gameId, type: 'REGRESSION', algorithm: 'ridge_regression' })
      const ds = await uploadCsv(a, admin, m.id, lines.join('\n'))
      const j = await train(m.id, {
        datasetConfig: { source: 'csv', query: ds, features: ['playtime', 'level'], label: 'spend' },
        hyperparameters: { l2: 0.01 },
      })
      const job = await waitJob(a, admin, m.id, j.body.id)
      expect(job.status).toBe('completed')
      expect(job.metrics.r2).toBeGreaterThan(0.999)
      expect(job.metrics.rmse).toBeLessThan(0.5)

      const week = [50, 55, 60, 58, 70, 120, 130]
      const ts = await newModel(a, admin, { gameId, type: 'TIME_SERIES' })
      const series = ['dau', ...Array.from({ length: 70 }, (_, t) => String(1000 + 2 * t + week[t % 7]))]
      const tds = await uploadCsv(a, admin, ts.id, series.join('\n'))
      const tj = await train(ts.id, {
        datasetConfig: { source: 'csv', query: tds, features: [], label: 'dau' },
        hyperparameters: { seasonLength: 7 },
      })
      const tjob = await waitJob(a, admin, ts.id, tj.body.id)
      expect(tjob.status).toBe('completed')
      expect(tjob.metrics.mape).toBeLessThan(0.02)
    })

    test('bad train bodies answer 400 naming the field and change nothing', async () => {
      const m = await newModel(a, admin, { gameId, type: 'CLASSIFICATION' })
      const ds = await uploadCsv(a, admin, m.id, churnCsv(50, 1))
      const good = { source: 'csv', query: ds, features: ['sessions'], label: 'churned' }
      const cases: Array<[unknown, string]> = [
        [{ datasetConfig: good, hyperparameters: { depth: 3 } }, 'body.hyperparameters.depth'],
        [
          { datasetConfig: good, hyperparameters: { maxIterations: 0 } },
          'body.hyperparameters.maxIterations',
        ],
        [{ datasetConfig: good, hyperparameters: { l2: 'lots' } }, 'body.hyperparameters.l2'],
        [{ datasetConfig: { ...good, label: undefined } }, 'body.datasetConfig.label'],
        [{ datasetConfig: { ...good, features: [] } }, 'body.datasetConfig.features'],
        [{ datasetConfig: { ...good, features: ['sessions', 'gold'] } }, 'body.datasetConfig.features[1]'],
        [{ datasetConfig: { ...good, query: 'no-such-dataset' } }, 'body.datasetConfig.query'],
        [{ datasetConfig: { ...good, source: 'parquet' } }, 'body.datasetConfig.source'],
        [
          { datasetConfig: { source: 'events', query: 'event=x&color=red', features: ['a'], label: 'b' } },
          'body.datasetConfig.query',
        ],
        [
          {
            datasetConfig: { source: 'events', query: 'event=x&from=yesterday', features: ['a'], label: 'b' },
          },
          'body.datasetConfig.query',
        ],
        [
          { datasetConfig: { source: 'events', query: 'event=x', features: ['a'], label: 'churn:soon' } },
          'body.datasetConfig.label',
        ],
        [{ datasetConfig: good, extra: 1 }, 'body.extra'],
        [{}, 'body.datasetConfig'],
      ]
      for (const [body, field] of cases) {
        const r = await train(m.id, body)
        expect([field, r.status]).toEqual([field, 400])
        expect(r.body.message).toContain(field)
      }
      expect((await a.req('GET', `/api/ml-models/${m.id}`, { token: admin })).body.status).toBe('DRAFT')
      expect((await a.req('GET', `/api/ml-models/${m.id}/training-jobs`, { token: admin })).body.total).toBe(
        0,
      )
      expect((await train(m.id, { datasetConfig: good })).status).toBe(202)
    })

    test('training needs ml:write (401, 403) and a job that fails moves the model to FAILED with the reason', async () => {
      const m = await newModel(a, admin, { gameId, type: 'CLASSIFICATION' })
      const ds = await uploadCsv(a, admin, m.id, 'x,tier\n1,gold\n2,silver\n3,bronze\n4,gold\n')
      const body = { datasetConfig: { source: 'csv', query: ds, features: ['x'], label: 'tier' } }
      expect((await a.req('POST', `/api/ml-models/${m.id}/train`, { body })).status).toBe(401)
      expect((await train(m.id, body, await a.token('viewer'))).status).toBe(403)
      const r = await train(m.id, body)
      expect(r.status).toBe(202)
      const job = await waitJob(a, admin, m.id, r.body.id)
      expect(job.status).toBe('failed')
      expect(job.error).toContain('exactly two label values')
      expect((await a.req('GET', `/api/ml-models/${m.id}`, { token: admin })).body.status).toBe('FAILED')
      const cancel = await a.req('POST', `/api/ml-models/${m.id}/training-jobs/${r.body.id}/cancel`, {
        token: admin,
      })
      expect(cancel.status).toBe(409)
    })

    test('a long job runs in a worker: requests keep flowing, a second train is refused, cancel stops it', async () => {
      const r = rng(2)
      const lines = ['x,y']
      for (let i = 0; i < 150_000; i++) lines.push(`${(r() * 1000).toFixed(3)},${(r() * 1000).toFixed(3)}`)
      const m = await newModel(a, admin, { gameId, type: 'CLUSTERING' })
      const ds = await uploadCsv(a, admin, m.id, lines.join('\n'))
      const j = await train(m.id, {
        datasetConfig: { source: 'csv', query: ds, features: ['x', 'y'] },
        hyperparameters: { k: 100, maxIterations: 1000, tolerance: 1e-12 },
      })
      expect(j.status).toBe(202)
      await waitJob(a, admin, m.id, j.body.id, (job) => job.status === 'running' && job.progress >= 0.2)
      // The event loop is free while the worker fits: a read answers before the fit ends (a fit
      // on the loop would hold the answer until the model were READY).
      expect((await a.req('GET', `/api/ml-models/${m.id}`, { token: admin })).body.status).toBe('TRAINING')
      const again = await train(m.id, { datasetConfig: { source: 'csv', query: ds, features: ['x', 'y'] } })
      expect(again.status).toBe(409)
      expect(again.body.message).toContain('already TRAINING')
      const c = await a.req('POST', `/api/ml-models/${m.id}/training-jobs/${j.body.id}/cancel`, {
        token: admin,
      })
      expect(c.status).toBe(200)
      expect(c.body.status).toBe('cancelled')
      const model = (await a.req('GET', `/api/ml-models/${m.id}`, { token: admin })).body
      expect(model.status).toBe('DRAFT')
      expect(model.trainedVersion).toBeUndefined()
      expect((await a.req('GET', `/api/ml-models/${m.id}/versions`, { token: admin })).body).toEqual([])
    })

    test('hyperparameters are honoured: one Newton step, and the stored job lists every value used', async () => {
      const m = await newModel(a, admin, { gameId, type: 'CLASSIFICATION' })
      const ds = await uploadCsv(a, admin, m.id, churnCsv(400, 8))
      const cfg = {
        source: 'csv',
        query: ds,
        features: ['sessions', 'days_since_purchase'],
        label: 'churned',
      }
      const one = await train(m.id, {
        datasetConfig: cfg,
        hyperparameters: { maxIterations: 1, threshold: 0.9 },
      })
      const job = await waitJob(a, admin, m.id, one.body.id)
      expect(job.metrics.iterations).toBe(1)
      expect(job.hyperparameters).toMatchObject({
        maxIterations: 1,
        threshold: 0.9,
        l2: 0.0001,
        tolerance: 1e-6,
      })
      const full = await train(m.id, { datasetConfig: cfg })
      const job2 = await waitJob(a, admin, m.id, full.body.id)
      expect(job2.metrics.iterations).toBeGreaterThan(2)
      expect(job2.version).toBe(3)
    })

    test('a job whose instance stopped is failed by the next start, and the model can train again', async () => {
      const m = await newModel(a, admin, { gameId, type: 'CLASSIFICATION' })
      const old = Date.now() - 10 * 60_000
      await a.db.run("UPDATE ml_models SET status = 'TRAINING' WHERE id = ?", [m.id])
      await a.db.run(
        `INSERT INTO ml_training_jobs (id, model_id, status, progress, stage, dataset_config, hyperparameters, previous_status, created_at, started_at, heartbeat_at)
         VALUES (?, ?, 'running', 0.4, 'training', '{"source":"csv","query":"x","features":["a"],"label":"b"}', '{}', 'DRAFT', ?, ?, ?)`,
        ['0190d1e2-0000-7000-8000-00000000abcd', m.id, old, old, old],
      )
      const other = await sameStoreInstance(a)
      await other.stop()
      const job = (
        await a.req('GET', `/api/ml-models/${m.id}/training-jobs/0190d1e2-0000-7000-8000-00000000abcd`, {
          token: admin,
        })
      ).body
      expect(job.status).toBe('failed')
      expect(job.error).toContain('interrupted')
      expect((await a.req('GET', `/api/ml-models/${m.id}`, { token: admin })).body.status).toBe('FAILED')
    })

    test("payer and next-event labels come from the user's later events", async () => {
      const now = Date.now()
      const g = await newGame(a, admin)
      const events: Array<Record<string, unknown>> = []
      for (let u = 0; u < 120; u++) {
        const user = `trader-${u}`
        const gems = u % 10
        const at = now - 15 * DAY + u * 1000
        events.push({
          event: 'shop_open',
          ts: String(at),
          game_id: g,
          env: 'prod',
          user_id: user,
          attrs: { gems },
        })
        if (gems >= 5) {
          events.push({
            event: 'purchase',
            ts: String(at + DAY),
            game_id: g,
            env: 'prod',
            user_id: user,
            amount_cents: 499,
            currency: 'USD',
          })
          events.push({
            event: 'guild_join',
            ts: String(at + 2 * DAY),
            game_id: g,
            env: 'prod',
            user_id: user,
          })
        }
      }
      await ingest(a, events)
      for (const label of ['payer:3d', 'next:guild_join:3d']) {
        const m = await newModel(a, admin, { gameId: g, type: 'CLASSIFICATION' })
        const r = await train(m.id, {
          datasetConfig: {
            source: 'events',
            query: `event=shop_open&from=${now - 20 * DAY}&to=${now}`,
            features: ['gems'],
            label,
          },
        })
        const job = await waitJob(a, admin, m.id, r.body.id)
        expect([label, job.status]).toEqual([label, 'completed'])
        expect(job.rowsUsed).toBe(120)
        expect(job.metrics.accuracy).toBeGreaterThanOrEqual(0.95)
        await a.req('POST', `/api/ml-models/${m.id}/deploy`, { token: admin, body: {} })
        const p = async (gems: number) =>
          (
            await a.req('POST', `/api/ml-models/${m.id}/predict`, {
              token: admin,
              body: { features: { gems } },
            })
          ).body.prediction
        expect([await p(9), await p(0)]).toEqual(['1', '0'])
      }
    })

    test('events source: features from event fields, a churn label from later events, unfinished windows left out', async () => {
      const now = Date.now()
      const events: Array<Record<string, unknown>> = []
      for (let u = 0; u < 240; u++) {
        const sessions = u % 12
        const user = `pilot-${u}`
        const at = now - 20 * DAY + u * 60_000
        events.push({
          event: 'level_end',
          ts: String(at),
          game_id: gameId,
          env: 'prod',
          user_id: user,
          attrs: { sessions, deaths: u % 5 },
        })
        // Players with more sessions come back within the week; the others never do.
        if (sessions >= 6)
          events.push({
            event: 'login',
            ts: String(at + 3 * DAY),
            game_id: gameId,
            env: 'prod',
            user_id: user,
          })
      }
      // Too recent for a 7-day window: no label yet.
      for (let u = 0; u < 10; u++)
        events.push({
          event: 'level_end',
          ts: String(now - DAY),
          game_id: gameId,
          env: 'prod',
          user_id: `late-${u}`,
          attrs: { sessions: 1, deaths: 0 },
        })
      // Another environment and another event name are not read.
      events.push({
        event: 'level_end',
        ts: String(now - 20 * DAY),
        game_id: gameId,
        env: 'staging',
        user_id: 'x',
        attrs: { sessions: 1, deaths: 0 },
      })
      await ingest(a, events)
      const m = await newModel(a, admin, { gameId, type: 'CLASSIFICATION' })
      const r = await train(m.id, {
        datasetConfig: {
          source: 'events',
          query: `event=level_end&env=prod&from=${new Date(now - 30 * DAY).toISOString()}&to=${now}`,
          features: ['sessions', 'deaths'],
          label: 'churn:7d',
        },
      })
      expect(r.status).toBe(202)
      const job = await waitJob(a, admin, m.id, r.body.id)
      expect(job.status).toBe('completed')
      expect(job.rowsUsed).toBe(240)
      expect(job.rowsSkipped).toBe(10)
      expect(job.metrics.accuracy).toBeGreaterThanOrEqual(0.95)
      // The label's direction: regulars stay (0), players with few sessions churn (1).
      expect((await a.req('POST', `/api/ml-models/${m.id}/deploy`, { token: admin, body: {} })).status).toBe(
        200,
      )
      const p = (s: number) =>
        a.req('POST', `/api/ml-models/${m.id}/predict`, {
          token: admin,
          body: { features: { sessions: s, deaths: 1 } },
        })
      expect((await p(11)).body.prediction).toBe('0')
      expect((await p(0)).body.prediction).toBe('1')
    })
  })
})
