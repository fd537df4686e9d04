import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { type TestApp, forEachEngine, makeApp } from '../../test/helpers'

const GAME = {
  name: 'Access Game',
  genre: 'PUZZLE',
  platforms: ['IOS'],
  timezone: 'UTC',
  defaultCurrency: 'USD',
}
const CONFIG = {
  variants: [
    { name: 'control', weight: 50 },
    { name: 'treatment', weight: 50 },
  ],
}

forEachEngine((engine) => {
  let a: TestApp
  let admin: string
  let gameId: string
  let n = 0
  beforeAll(async () => {
    a = await makeApp(engine, { plugins: { games: {}, ingest: {}, experiments: {} } })
    admin = await a.token('admin')
    gameId = (await a.req('POST', '/api/games', { token: admin, body: GAME })).body.id
  })
  afterAll(() => a.stop())

  const body = () => ({ gameId, environment: 'prod', name: `acc ${++n}`, config: CONFIG })
  const create = async () => {
    const r = await a.req('POST', '/api/experiments', { token: admin, body: body() })
    expect(r.status).toBe(201)
    return r.body
  }

  describe('access', () => {
    test('without a token 401 everywhere; viewer, analyst and developer read but cannot write (403); operator writes', async () => {
      const e = await create()
      const reads: Array<[string, string]> = [
        ['GET', '/api/experiments'],
        ['GET', `/api/experiments/${e.id}`],
        ['GET', `/api/experiments/${e.id}/assign?userId=u1`],
        ['GET', `/api/experiments/${e.id}/results`],
      ]
      const writes: Array<[string, string, unknown?]> = [
        ['POST', '/api/experiments', body()],
        ['PUT', `/api/experiments/${e.id}`, { name: 'x' }],
        ['DELETE', `/api/experiments/${e.id}`],
        ['POST', `/api/experiments/${e.id}/publish`],
        ['POST', `/api/experiments/${e.id}/pause`],
      ]
      for (const [m, p, b] of [...reads, ...writes]) {
        expect((await a.req(m, p, { body: b })).status, `${m} ${p}`).toBe(401)
        expect((await a.req(m, p, { body: b, token: 'not-a-jwt' })).status).toBe(401)
      }
      for (const role of ['viewer', 'analyst', 'developer']) {
        const token = await a.token(role)
        for (const [m, p] of reads)
          expect((await a.req(m, p, { token })).status, `${role} ${m} ${p}`).toBe(200)
        for (const [m, p, b] of writes) {
          const r = await a.req(m, p, { token, body: b })
          expect(r.status, `${role} ${m} ${p}`).toBe(403)
          expect(r.body.error).toBe('forbidden')
        }
      }
      const op = await a.token('operator')
      expect((await a.req('POST', '/api/experiments', { token: op, body: body() })).status).toBe(201)
      expect((await a.req('POST', `/api/experiments/${e.id}/publish`, { token: op })).status).toBe(200)
    })

    test('an unknown experiment is a 404 on every route', async () => {
      const routes: Array<[string, string, unknown?]> = [
        ['GET', '/api/experiments/nope'],
        ['PUT', '/api/experiments/nope', { name: 'x' }],
        ['DELETE', '/api/experiments/nope'],
        ['POST', '/api/experiments/nope/publish'],
        ['POST', '/api/experiments/nope/pause'],
        ['GET', '/api/experiments/nope/assign?userId=u'],
        ['GET', '/api/experiments/nope/results'],
      ]
      for (const [m, p, b] of routes) {
        const r = await a.req(m, p, { token: admin, body: b })
        expect(r.status, `${m} ${p}`).toBe(404)
        expect(r.body).toMatchObject({ error: 'not_found', message: "experiment 'nope' not found" })
      }
    })
  })
})
