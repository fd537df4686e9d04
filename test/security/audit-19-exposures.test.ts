import { afterAll, beforeAll, expect, test } from 'bun:test'
import { type TestApp, forEachEngine, makeApp } from '../helpers'
import { CONFIG, GAME, SECURITY_APP } from './lib'

/*
 * The nineteenth session's experiments audit, replayed as its attackers made it: an environment
 * deleted and created again under the same name got back the experiments its predecessor had
 * running (they are found by name), and the new environment's SDK key reached them.
 */
forEachEngine((engine) => {
  let a: TestApp
  let admin: string
  beforeAll(async () => {
    a = await makeApp(engine, {
      ...SECURITY_APP,
      plugins: { games: {}, ingest: { purge_interval_minutes: 0 }, experiments: {} },
    })
    admin = await a.token('admin')
  })
  afterAll(() => a.stop())

  const sdkKey = async (gameId: string, environment: string) =>
    (await a.req('POST', '/api/api-keys', { token: admin, body: { name: 'client', gameId, environment } }))
      .body.key as string
  const runningIn = async (gameId: string, environment: string) => {
    const e = await a.req('POST', '/api/experiments', {
      token: admin,
      body: { gameId, environment, name: `sale-${environment}`, config: CONFIG },
    })
    expect(e.status).toBe(201)
    expect((await a.req('POST', `/api/experiments/${e.body.id}/publish`, { token: admin })).status).toBe(200)
    return e.body.id as string
  }
  const assign = (id: string, key: string) =>
    fetch(`${a.listen()}/api/experiments/${id}/assign?userId=u1`, { headers: { 'x-api-key': key } })

  test('a recreated environment starts without the experiments its deleted namesake ran', async () => {
    const gameId = (await a.req('POST', '/api/games', { token: admin, body: { ...GAME, name: 'Reborn' } }))
      .body.id as string
    const created = await a.req('POST', `/api/games/${gameId}/environments`, {
      token: admin,
      body: { name: 'event', type: 'STAGING' },
    })
    expect(created.status).toBe(201)
    const id = await runningIn(gameId, 'event')
    expect((await assign(id, await sdkKey(gameId, 'event'))).status).toBe(200)
    expect((await a.req('DELETE', `/api/games/${gameId}/environments/event`, { token: admin })).status).toBe(
      204,
    )
    const again = await a.req('POST', `/api/games/${gameId}/environments`, {
      token: admin,
      body: { name: 'event', type: 'STAGING' },
    })
    expect(again.status).toBe(201)
    const config = await a.req('GET', `/api/config/${gameId}/event`)
    expect([config.status, config.body]).toEqual([200, []])
    expect((await assign(id, await sdkKey(gameId, 'event'))).status).toBe(404)
    expect((await a.req('GET', `/api/experiments/${id}`, { token: admin })).status).toBe(404)
  })

  test("a deleted game's experiments go with it; another game's stay", async () => {
    const gone = (await a.req('POST', '/api/games', { token: admin, body: { ...GAME, name: 'Gone' } })).body
      .id as string
    const kept = (await a.req('POST', '/api/games', { token: admin, body: { ...GAME, name: 'Kept' } })).body
      .id as string
    const ids = [await runningIn(gone, 'prod'), await runningIn(gone, 'staging')]
    const stays = await runningIn(kept, 'prod')
    await a.req('POST', `/api/experiments/${ids[0]}/pause`, { token: admin })
    expect((await a.req('DELETE', `/api/games/${gone}`, { token: admin })).status).toBeLessThan(300)
    for (const id of ids)
      expect((await a.req('GET', `/api/experiments/${id}`, { token: admin })).status).toBe(404)
    expect((await a.req('GET', `/api/experiments/${stays}`, { token: admin })).body.status).toBe('running')
  })
})
