import { afterAll, beforeAll, expect, test } from 'bun:test'
import { type TestApp, forEachEngine } from '../../../test/helpers'
import { ingestApp } from '../../ingest/testing'

/**
 * Spec 1 spells the aggregates `GET /behavior/`: the path is served with and without the slash,
 * and the OpenAPI document describes it once, without the slash, so that no path ends in a slash
 * and no operationId repeats (both errors of `@redocly/cli lint`, issue 38 point 4).
 */
forEachEngine((engine) => {
  let a: TestApp
  let admin: string
  let gameId: string
  beforeAll(async () => {
    ;({ a, admin, gameId } = await ingestApp(engine))
  })
  afterAll(() => a.stop())

  test('both spellings answer the same; the document lists the path once, no path ends in /, operationIds are unique', async () => {
    const q = `gameId=${gameId}&env=prod`
    const bare = await a.req('GET', `/api/v1/analytics/behavior?${q}`, { token: admin })
    const slash = await a.req('GET', `/api/v1/analytics/behavior/?${q}`, { token: admin })
    expect([bare.status, slash.status]).toEqual([200, 200])
    expect(slash.body).toEqual(bare.body)
    expect((await a.req('GET', `/api/v1/analytics/behavior/?${q}`)).status).toBe(401)

    const doc = (await a.req('GET', '/v3/api-docs')).body as {
      paths: Record<string, Record<string, { operationId?: string }>>
    }
    expect(doc.paths['/api/v1/analytics/behavior']?.get).toBeDefined()
    expect(Object.keys(doc.paths).filter((p) => p.length > 1 && p.endsWith('/'))).toEqual([])
    const ids = Object.values(doc.paths).flatMap((ops) =>
      Object.values(ops).flatMap((op) =>
        op && typeof op === 'object' && op.operationId ? [op.operationId] : [],
      ),
    )
    expect(ids.filter((id, i) => ids.indexOf(id) !== i)).toEqual([])
  })
})
