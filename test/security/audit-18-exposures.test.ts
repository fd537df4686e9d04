import { afterAll, beforeAll, expect, test } from 'bun:test'
import { experimentCounts } from '../../plugins/experiments/exposures'
import { type TestApp, forEachEngine, makeApp } from '../helpers'
import { CONFIG, GAME, SECURITY_APP } from './lib'

/*
 * The eighteenth session's experiments audit, replayed as its attackers made it: the SDK key
 * (public, in every game client) storing exposures for experiment ids that do not exist (200,000
 * rows, each of their users kept in memory: 500,000 events, +279 MB); an environment
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
  const runningIn = async (gameId: string, environment: string, run = true) => {
    const e = await a.req('POST', '/api/experiments', {
      token: admin,
      body: { gameId, environment, name: `sale-${environment}-${run}`, config: CONFIG },
    })
    expect(e.status).toBe(201)
    if (run)
      expect((await a.req('POST', `/api/experiments/${e.body.id}/publish`, { token: admin })).status).toBe(
        200,
      )
    return e.body.id as string
  }
  const track = (name: string, user: string, attrs: Record<string, string> = {}) => ({
    event_id: crypto.randomUUID(),
    event_type: 'track',
    event_name: name,
    device_id: 'd',
    ts_client: new Date().toISOString(),
    user_id: user,
    attrs,
  })
  const batch = async (key: string, items: object[]) => {
    const r = await fetch(`${a.listen()}/v1/batch`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': key },
      body: JSON.stringify(items),
    })
    expect(r.status).toBe(200)
  }

  test("the SDK key's exposures count only for a non-draft experiment of its game and environment", async () => {
    const gameId = (await a.req('POST', '/api/games', { token: admin, body: { ...GAME, name: 'Exposed' } }))
      .body.id as string
    const running = await runningIn(gameId, 'prod')
    const draft = await runningIn(gameId, 'prod', false)
    const elsewhere = await runningIn(gameId, 'staging')
    const key = await sdkKey(gameId, 'prod')
    const users = ['x0', 'x1', 'x2', 'x3', 'x4']
    await batch(key, [
      ...Array.from({ length: 50 }, (_, i) =>
        track('experiment_exposure', `made-up-${i}`, { exp: `no-such-experiment-${i}`, variant: 'v' }),
      ),
      track('experiment_exposure', 'drafted', { exp: draft, variant: 'a' }),
      track('experiment_exposure', 'misplaced', { exp: elsewhere, variant: 'a' }),
      ...users.map((u, i) => track('experiment_exposure', u, { exp: running, variant: i % 2 ? 'b' : 'a' })),
    ])
    await a.events.drain()
    // A later batch: only the counted exposures made their users followed.
    await batch(
      key,
      [...users, 'made-up-1', 'drafted', 'misplaced'].map((u) => track('buy', u)),
    )
    await a.events.drain()
    const stored = await a.db.all<{ experiment_id: string; user_id: string }>(
      'SELECT experiment_id, user_id FROM experiments_exposures WHERE game_id = ? ORDER BY user_id',
      [gameId],
    )
    expect(stored).toEqual(users.map((user_id) => ({ experiment_id: running, user_id })))
    const followed = await a.db.all<{ user_id: string }>(
      'SELECT DISTINCT user_id FROM experiments_user_events WHERE game_id = ? ORDER BY user_id',
      [gameId],
    )
    expect(followed.map((r) => r.user_id)).toEqual(users)
    expect(
      await experimentCounts(a.db, { gameId, environment: 'prod', experimentId: running, metrics: ['buy'] }),
    ).toEqual({
      variants: {
        a: { exposures: 3, conversions: { buy: 3 } },
        b: { exposures: 2, conversions: { buy: 2 } },
      },
    })
  })
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
