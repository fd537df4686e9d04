import { afterAll, beforeAll, expect, test } from 'bun:test'
import { type TestApp, forEachEngine } from '../helpers'
import { ADMIN_TOKEN, AGENT_TOKEN, type Call, client, securityApp } from './lib'

/*
 * Issue 34 point 8: agents own their identity. Every agent holds the one shared agent token, so
 * an agent_id must not let one agent move another to its own game.
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
})
