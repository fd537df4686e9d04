import { afterAll, beforeAll, expect, test } from 'bun:test'
import { createHmac } from 'node:crypto'
import { type TestApp, forEachEngine } from '../helpers'
import { ADMIN_TOKEN, AGENT_TOKEN, type Call, client, securityApp } from './lib'

/*
 * Issue 34 point 8: agents own their identity. Every agent holds the one shared agent token, so
 * an agent_id must not let one agent move another to its own game. The tenancy audit's probe
 * (probe-agents.ts): an agent's key, an HMAC of its id alone, still worked after an operator
 * deleted the agent and the id was registered again under another game, reporting invocations
 * into that game.
 */
forEachEngine((engine) => {
  let app: TestApp
  let call: Call
  beforeAll(async () => {
    app = await securityApp(engine, {
      plugins: {
        games: {},
        ingest: { purge_interval_minutes: 0 },
        analytics: {},
        agents: { token: AGENT_TOKEN },
      },
    })
    call = client(app.listen())
  })
  afterAll(() => app.stop())

  const agent = { 'x-agent-token': AGENT_TOKEN }
  const register = (id: string, game: string, extra: Record<string, unknown> = {}) =>
    call('POST', '/api/v1/agents', {
      headers: agent,
      body: { agent_id: id, game_id: game, env: 'prod', functions: ['grant.item'], ...extra },
    })

  test('re-registering an agent_id under another game is 409; the agent keeps its game', async () => {
    expect((await register('edge-01', 'game-a')).status).toBe(201)
    const moved = await register('edge-01', 'game-b', { region: 'elsewhere' })
    expect(moved.status).toBe(409)
    expect(moved.body.message).toContain('another game')
    const now = await call('GET', '/api/v1/agents/edge-01', { headers: { 'x-admin-token': ADMIN_TOKEN } })
    expect(now.body.data).toMatchObject({ game_id: 'game-a' })
    expect(now.body.data.region).toBeUndefined()
    // Its own game again: an ordinary re-registration, labels replaced.
    const again = await register('edge-01', 'game-a', { region: 'eu-west-1', env: 'staging' })
    expect(again.status).toBe(200)
    expect(again.body.data).toMatchObject({ game_id: 'game-a', region: 'eu-west-1', env: 'staging' })
    // Unregistered by an operator, the id is free for any game.
    expect(
      (await call('DELETE', '/api/v1/agents/edge-01', { headers: { 'x-admin-token': ADMIN_TOKEN } })).status,
    ).toBe(200)
    expect((await register('edge-01', 'game-b')).status).toBe(201)
  })

  const asKey = (key: string) => ({ 'x-agent-token': key })
  const uses = async (id: string, key: string) => [
    (await call('POST', `/api/v1/agents/${id}/heartbeat`, { headers: asKey(key), body: { qps: 1 } })).status,
    (
      await call('POST', `/api/v1/agents/${id}/invocations`, {
        headers: asKey(key),
        body: { invocations: [{ function_id: 'grant.item', outcome: 'failure' }] },
      })
    ).status,
    (await call('GET', `/api/v1/agents/${id}/limits`, { headers: asKey(key) })).status,
  ]

  test("a deleted agent's key is 401 once its id is registered again under another game; the new key works", async () => {
    const first = await register('edge-07', 'game-a')
    expect(first.status).toBe(201)
    const old = first.body.data.agent_key
    expect(await uses('edge-07', old)).toEqual([200, 202, 200])
    // Registering again under its game (an agent restarting) answers the same key.
    expect((await register('edge-07', 'game-a')).body.data.agent_key).toBe(old)
    const admin = { 'x-admin-token': ADMIN_TOKEN }
    expect((await call('DELETE', '/api/v1/agents/edge-07', { headers: admin })).status).toBe(200)
    expect(await uses('edge-07', old)).toEqual([401, 401, 401])
    const second = await register('edge-07', 'game-b')
    expect(second.status).toBe(201)
    const fresh = second.body.data.agent_key
    expect(fresh).not.toBe(old)
    const refused = await call('POST', '/api/v1/agents/edge-07/invocations', {
      headers: asKey(old),
      body: { invocations: [{ function_id: 'grant.item', outcome: 'failure' }] },
    })
    expect(refused.status).toBe(401)
    expect(refused.body.message).toContain('X-Agent-Token')
    expect(await uses('edge-07', old)).toEqual([401, 401, 401])
    expect(await uses('edge-07', fresh)).toEqual([200, 202, 200])
    // Nothing the old key sent reached game-b's agent: only the new key's one report counts.
    const now = await call('GET', '/api/v1/agents/edge-07', { headers: admin })
    expect(now.body.data).toMatchObject({ game_id: 'game-b', jobs_executed: 1 })
  })

  test('an agent registered before keys named their registration keeps its id-only key until it registers again', async () => {
    expect((await register('edge-legacy', 'game-a')).status).toBe(201)
    // As the row stands after the upgrade's migration: no random value, the key the old code answered.
    await app.db.run('UPDATE agents SET key_nonce = NULL WHERE id = ?', ['edge-legacy'])
    const sig = createHmac('sha256', AGENT_TOKEN).update('liveops agent key\u0000edge-legacy').digest()
    const legacy = `lak_${Buffer.from('edge-legacy').toString('base64url')}.${sig.toString('base64url')}`
    expect(await uses('edge-legacy', legacy)).toEqual([200, 202, 200])
    const again = await register('edge-legacy', 'game-a')
    expect(again.status).toBe(200)
    expect(again.body.data.agent_key).not.toBe(legacy)
    expect(await uses('edge-legacy', legacy)).toEqual([401, 401, 401])
    expect(await uses('edge-legacy', again.body.data.agent_key)).toEqual([200, 202, 200])
  })
})
