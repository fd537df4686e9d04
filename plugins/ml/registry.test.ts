import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { Validator } from '@seriousme/openapi-schema-validator'
import { type TestApp, forEachEngine } from '../../test/helpers'
import { mlApp, newGame, newModel } from './testing'

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

  describe('ml registry', () => {
    test('create answers 201 with DRAFT, version 1, every spec field and the type default algorithm', async () => {
      const r = await a.req('POST', '/api/ml-models', {
        token: admin,
        body: {
          gameId,
          name: 'Whale finder',
          type: 'REGRESSION',
          framework: 'scikit-compatible',
          description: 'spend next 30 days',
        },
      })
      expect(r.status).toBe(201)
      expect(r.body).toMatchObject({
        gameId,
        name: 'Whale finder',
        type: 'REGRESSION',
        algorithm: 'linear_regression',
        framework: 'scikit-compatible',
        description: 'spend next 30 days',
        status: 'DRAFT',
        version: 1,
      })
      expect(new Date(r.body.createdAt).toISOString()).toBe(r.body.createdAt)
      expect(r.body.deployedVersion).toBeUndefined()
      const got = await a.req('GET', `/api/ml-models/${r.body.id}`, { token: admin })
      expect(got.status).toBe(200)
      expect(got.body).toEqual(r.body)
      // Aliases are stored under their canonical name.
      const k = await newModel(a, admin, { gameId, type: 'CLUSTERING', algorithm: 'K-Means' })
      expect(k.algorithm).toBe('kmeans')
      expect(k.framework).toBe('liveops')
    })

    test('bad input answers 400 naming the field, and nothing is stored', async () => {
      const before = (await a.req('GET', `/api/ml-models?gameId=${gameId}`, { token: admin })).body.total
      const cases: Array<[unknown, string]> = [
        [{ gameId, type: 'CLASSIFICATION' }, 'body.name'],
        [{ gameId, name: 'x', type: 'DEEP_MAGIC' }, 'body.type'],
        [{ gameId, name: 'x', type: 'CLASSIFICATION', algorithm: 'kmeans' }, 'body.algorithm'],
        [{ gameId: 'no-such-game', name: 'x', type: 'CLASSIFICATION' }, 'body.gameId'],
        [{ gameId, name: 'x', type: 'CLASSIFICATION', descripton: 'typo' }, 'body.descripton'],
        [{ gameId, name: 42, type: 'CLASSIFICATION' }, 'body.name'],
        [['not', 'an', 'object'], 'body'],
      ]
      for (const [body, field] of cases) {
        const r = await a.req('POST', '/api/ml-models', { token: admin, body })
        expect(r.status).toBe(400)
        expect(r.body.error).toBe('bad_request')
        expect(r.body.message).toContain(field)
        expect(r.body.path).toBe('/api/ml-models')
        expect(typeof r.body.timestamp).toBe('string')
      }
      expect((await a.req('GET', `/api/ml-models?gameId=${gameId}`, { token: admin })).body.total).toBe(
        before,
      )
    })

    test('a name taken in the game answers 409; another game may use it', async () => {
      await newModel(a, admin, { gameId, name: 'LTV', type: 'REGRESSION' })
      const dup = await a.req('POST', '/api/ml-models', {
        token: admin,
        body: { gameId, name: 'LTV', type: 'REGRESSION' },
      })
      expect(dup.status).toBe(409)
      const other = await newGame(a, admin)
      await newModel(a, admin, { gameId: other, name: 'LTV', type: 'REGRESSION' })
    })

    test('without a token 401; viewer and analyst read but cannot write (403); an operator writes', async () => {
      expect((await a.req('GET', '/api/ml-models')).status).toBe(401)
      expect(
        (await a.req('POST', '/api/ml-models', { body: { gameId, name: 'n', type: 'CLUSTERING' } })).status,
      ).toBe(401)
      for (const role of ['viewer', 'analyst', 'developer']) {
        const t = await a.token(role)
        const w = await a.req('POST', '/api/ml-models', {
          token: t,
          body: { gameId, name: `by-${role}`, type: 'CLUSTERING' },
        })
        expect(w.status).toBe(403)
        expect(w.body.error).toBe('forbidden')
        expect((await a.req('GET', '/api/ml-models', { token: t })).status).toBe(200)
      }
      const op = await a.token('operator')
      expect(
        (
          await a.req('POST', '/api/ml-models', {
            token: op,
            body: { gameId, name: 'by-operator', type: 'CLUSTERING' },
          })
        ).status,
      ).toBe(201)
    })

    test('unknown ids answer 404 on every model route', async () => {
      const id = '0190d1e2-0000-7000-8000-000000000000'
      const calls: Array<[string, string, unknown?]> = [
        ['GET', `/api/ml-models/${id}`],
        ['PUT', `/api/ml-models/${id}`, { name: 'x' }],
        ['DELETE', `/api/ml-models/${id}`],
        ['POST', `/api/ml-models/${id}/archive`],
        [
          'POST',
          `/api/ml-models/${id}/train`,
          { datasetConfig: { source: 'csv', query: 'x', features: ['a'], label: 'b' } },
        ],
        ['POST', `/api/ml-models/${id}/deploy`, {}],
        ['POST', `/api/ml-models/${id}/predict`, { features: { a: 1 } }],
        ['POST', `/api/ml-models/${id}/ab-test`, { baselineModelId: 'x', trafficSplit: 10 }],
        ['POST', `/api/ml-models/${id}/feedback`, { predictionId: 'p', actual: 'yes' }],
        ['GET', `/api/ml-models/${id}/versions`],
        ['GET', `/api/ml-models/${id}/training-jobs`],
        ['GET', `/api/ml-models/${id}/training-jobs/${id}`],
        ['GET', `/api/ml-models/${id}/stats`],
      ]
      for (const [method, path, body] of calls) {
        const r = await a.req(method, path, { token: admin, body })
        expect([method, path, r.status]).toEqual([method, path, 404])
        expect(r.body.error).toBe('not_found')
      }
    })

    test('list filters by gameId, type and status, pages and sorts', async () => {
      const g = await newGame(a, admin)
      for (const [i, type] of [
        'CLASSIFICATION',
        'REGRESSION',
        'CLASSIFICATION',
        'TIME_SERIES',
        'CLASSIFICATION',
      ].entries())
        await newModel(a, admin, { gameId: g, name: `model-${i}`, type })
      const all = await a.req('GET', `/api/ml-models?gameId=${g}&size=100`, { token: admin })
      expect(all.body.total).toBe(5)
      const cls = await a.req(
        'GET',
        `/api/ml-models?gameId=${g}&type=CLASSIFICATION&size=2&page=1&sort=name,asc`,
        { token: admin },
      )
      expect(cls.status).toBe(200)
      expect(cls.body).toMatchObject({ total: 3, page: 1, size: 2 })
      expect(cls.body.items.map((m: { name: string }) => m.name)).toEqual(['model-4'])
      const drafts = await a.req('GET', `/api/ml-models?gameId=${g}&status=DRAFT`, { token: admin })
      expect(drafts.body.total).toBe(5)
      expect(
        (await a.req('GET', `/api/ml-models?gameId=${g}&status=DEPLOYED`, { token: admin })).body.total,
      ).toBe(0)
      for (const bad of ['type=NEURAL', 'status=LIVE', 'size=0', 'page=-1', 'sort=accuracy'])
        expect((await a.req('GET', `/api/ml-models?${bad}`, { token: admin })).status).toBe(400)
    })

    test('update changes only what it names; gameId is fixed; type only while DRAFT', async () => {
      const m = await newModel(a, admin, { gameId, type: 'CLASSIFICATION', description: 'first' })
      const r = await a.req('PUT', `/api/ml-models/${m.id}`, { token: admin, body: { name: 'renamed' } })
      expect(r.status).toBe(200)
      expect(r.body).toMatchObject({
        name: 'renamed',
        description: 'first',
        type: 'CLASSIFICATION',
        status: 'DRAFT',
      })
      const same = await a.req('PUT', `/api/ml-models/${m.id}`, { token: admin, body: { gameId } })
      expect(same.status).toBe(200)
      const moved = await a.req('PUT', `/api/ml-models/${m.id}`, {
        token: admin,
        body: { gameId: 'elsewhere' },
      })
      expect(moved.status).toBe(400)
      expect(moved.body.message).toContain('body.gameId')
      const retyped = await a.req('PUT', `/api/ml-models/${m.id}`, {
        token: admin,
        body: { type: 'ANOMALY_DETECTION' },
      })
      expect(retyped.body).toMatchObject({ type: 'ANOMALY_DETECTION', algorithm: 'robust_zscore' })
      const wrong = await a.req('PUT', `/api/ml-models/${m.id}`, {
        token: admin,
        body: { algorithm: 'holt_winters' },
      })
      expect(wrong.status).toBe(400)
      expect(wrong.body.message).toContain('body.algorithm')
      const bad = await a.req('PUT', `/api/ml-models/${m.id}`, { token: admin, body: { description: 7 } })
      expect(bad.status).toBe(400)
      expect((await a.req('GET', `/api/ml-models/${m.id}`, { token: admin })).body.description).toBe('first')
    })

    test('the OpenAPI document describes every ml route validly, each with a tag and a summary', async () => {
      const doc = (await a.req('GET', '/v3/api-docs')).body
      for (const p of Object.keys(doc.paths)) if (!p.startsWith('/api/ml-models')) delete doc.paths[p]
      expect(Object.keys(doc.paths).length).toBeGreaterThanOrEqual(14)
      for (const ops of Object.values(doc.paths) as Array<
        Record<string, { tags?: string[]; summary?: string }>
      >)
        for (const op of Object.values(ops)) {
          expect(op.tags).toEqual(['ml'])
          expect(op.summary?.length).toBeGreaterThan(10)
        }
      const res = await new Validator().validate(doc)
      expect(res.errors ?? []).toEqual([])
      expect(doc.components.schemas['ml.Prediction'].properties.latencyMs).toBeDefined()
    })

    test('illegal moves answer 409 with the reason; archive and restore', async () => {
      const m = await newModel(a, admin, { gameId, type: 'CLASSIFICATION' })
      const deploy = await a.req('POST', `/api/ml-models/${m.id}/deploy`, { token: admin, body: {} })
      expect(deploy.status).toBe(409)
      expect(deploy.body.message).toContain('never been trained')
      const put = await a.req('PUT', `/api/ml-models/${m.id}`, { token: admin, body: { status: 'DEPLOYED' } })
      expect(put.status).toBe(409)
      expect(put.body.message).toContain('POST /deploy')
      const predict = await a.req('POST', `/api/ml-models/${m.id}/predict`, {
        token: admin,
        body: { features: { a: 1 } },
      })
      expect(predict.status).toBe(409)
      expect(predict.body.message).toContain('not deployed')
      const archived = await a.req('POST', `/api/ml-models/${m.id}/archive`, { token: admin })
      expect(archived.status).toBe(200)
      expect(archived.body.status).toBe('ARCHIVED')
      expect((await a.req('POST', `/api/ml-models/${m.id}/archive`, { token: admin })).status).toBe(409)
      const train = await a.req('POST', `/api/ml-models/${m.id}/train`, {
        token: admin,
        body: { datasetConfig: { source: 'events', query: 'event=x', features: ['a'], label: 'b' } },
      })
      expect(train.status).toBe(409)
      expect(train.body.message).toContain('ARCHIVED')
      expect(
        (await a.req('PUT', `/api/ml-models/${m.id}`, { token: admin, body: { status: 'EVALUATING' } }))
          .status,
      ).toBe(409)
      const restored = await a.req('PUT', `/api/ml-models/${m.id}`, {
        token: admin,
        body: { status: 'DRAFT' },
      })
      expect(restored.status).toBe(200)
      expect(restored.body.status).toBe('DRAFT')
      const del = await a.req('DELETE', `/api/ml-models/${m.id}`, { token: admin })
      expect(del.status).toBe(204)
      expect((await a.req('GET', `/api/ml-models/${m.id}`, { token: admin })).status).toBe(404)
    })
  })
})
