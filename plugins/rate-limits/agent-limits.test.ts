import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { type TestApp, forEachEngine, makeApp } from '../../test/helpers'

/*
 * Issue 38 point 7: stored rule sets reach what they limit. Each heartbeat answer, and
 * GET /api/v1/agents/{id}/limits, carries the rules of the enabled sets that bind the agent:
 * labels match, key names it (or a function it serves), and its stable rollout bucket for the set
 * is below the rule's percent.
 */
const TOKEN = 'agent-token-limits-58'
const GAME = 'g-limits'

/** The documented bucket, computed here on its own: SHA-256(`rateLimitId:agent_id`), first 4 bytes BE, mod 100. */
const bucket = (setId: string, agentId: string) =>
  new DataView(new Bun.CryptoHasher('sha256').update(`${setId}:${agentId}`).digest().buffer).getUint32(0) %
  100

const set = (id: string, extra: Record<string, unknown> = {}) => ({
  rateLimitId: id,
  name: `set ${id}`,
  resource: 'function',
  limit: 600,
  window: 60,
  action: 'reject',
  rules: [],
  ...extra,
})
const rule = (
  scope: string,
  key: string,
  limitQps: number,
  match: Record<string, string> = {},
  percent = 100,
) => ({
  scope,
  key,
  limitQps,
  match,
  percent,
})

forEachEngine((engine) => {
  let a: TestApp
  let admin: string
  const shared = { 'x-agent-token': TOKEN }
  const keys = new Map<string, string>()
  const register = async (agent_id: string, env: string, region: string, functions: string[]) => {
    const r = await a.req('POST', '/api/v1/agents', {
      headers: shared,
      body: { agent_id, game_id: GAME, env, region, zone: `${region}-a`, functions },
    })
    expect(r.status).toBe(201)
    expect(r.body.data.agent_key).toMatch(/^lak_/)
    keys.set(agent_id, r.body.data.agent_key)
  }
  const heartbeat = (id: string, headers: Record<string, string> = shared) =>
    a.req('POST', `/api/v1/agents/${id}/heartbeat`, { headers, body: { qps: 3 } })
  const limitsOf = async (id: string) => {
    const r = await heartbeat(id)
    expect(r.status).toBe(200)
    return r.body.data.limits as Array<Record<string, unknown>>
  }
  const put = async (body: Record<string, unknown>) => {
    const r = await a.req('PUT', '/api/v1/rate-limits', { token: admin, body })
    expect(r.status).toBeLessThan(300)
  }

  beforeAll(async () => {
    a = await makeApp(engine, {
      plugins: {
        games: {},
        ingest: { purge_interval_minutes: 0 },
        agents: { token: TOKEN },
        'rate-limits': {},
      },
    })
    admin = await a.token('admin')
    await register('gw-eu-1', 'prod', 'eu-west', ['grant.item'])
    await register('gw-eu-2', 'prod', 'eu-west', ['kick'])
    await register('gw-us-1', 'prod', 'us-east', ['grant.item'])
    await register('gw-eu-dev', 'dev', 'eu-west', ['kick'])
  })
  afterAll(() => a.stop())

  describe('effective limits', () => {
    test('without sets an agent has no limits; the heartbeat and the GET answer the same list', async () => {
      expect(await limitsOf('gw-eu-1')).toEqual([])
      const r = await a.req('GET', '/api/v1/agents/gw-eu-1/limits', { token: admin })
      expect(r.status).toBe(200)
      expect(r.body.data).toEqual({ agent_id: 'gw-eu-1', limits: [] })
    })

    test('rules bind by labels, by agent key and by served function', async () => {
      await put(
        set('rl-labels', {
          action: 'throttle',
          rules: [
            rule('service', '*', 80, { env: 'prod', region: 'eu-west' }),
            rule('function', 'grant.item', 25.5),
            rule('service', 'gw-eu-dev', 5),
            rule('service', '*', 7, { game_id: 'another-game' }),
          ],
        }),
      )
      const one = await limitsOf('gw-eu-1')
      expect(one).toEqual([
        {
          rateLimitId: 'rl-labels',
          name: 'set rl-labels',
          resource: 'function',
          action: 'throttle',
          limit: 600,
          window: 60,
          scope: 'service',
          key: '*',
          limitQps: 80,
          percent: 100,
          bucket: bucket('rl-labels', 'gw-eu-1'),
        },
        expect.objectContaining({ scope: 'function', key: 'grant.item', limitQps: 25.5 }),
      ])
      // Same labels, no grant.item: the service rule only.
      expect((await limitsOf('gw-eu-2')).map((l) => [l.scope, l.key])).toEqual([['service', '*']])
      // Another region: grant.item only.
      expect((await limitsOf('gw-us-1')).map((l) => [l.scope, l.key, l.limitQps])).toEqual([
        ['function', 'grant.item', 25.5],
      ])
      // Named by its agent_id.
      expect((await limitsOf('gw-eu-dev')).map((l) => [l.scope, l.key, l.limitQps])).toEqual([
        ['service', 'gw-eu-dev', 5],
      ])
      const read = await a.req('GET', '/api/v1/agents/gw-eu-1/limits', { token: admin })
      expect(read.body.data).toEqual({ agent_id: 'gw-eu-1', limits: one })
      // A function the agent starts serving binds at that heartbeat.
      const now = await a.req('POST', '/api/v1/agents/gw-eu-2/heartbeat', {
        headers: shared,
        body: { functions: ['kick', 'grant.item'] },
      })
      expect(now.body.data.limits.map((l: Record<string, unknown>) => l.key)).toEqual(['*', 'grant.item'])
      await a.req('DELETE', '/api/v1/rate-limits/rl-labels', { token: admin })
    })

    test('percent: the agents whose stable bucket is below it, on every heartbeat', async () => {
      const ids = Array.from({ length: 30 }, (_, i) => `pool-${String(i).padStart(2, '0')}`)
      for (const id of ids) await register(id, 'canary', 'ap-south', ['grant.item'])
      const want = ids.filter((id) => bucket('rl-rollout', id) < 30)
      // The preview names them before the set is stored.
      const preview = await a.req('POST', '/api/v1/rate-limits/preview', {
        token: admin,
        body: set('rl-rollout', { rules: [rule('service', '*', 40, { env: 'canary' }, 30)] }),
      })
      expect(preview.status).toBe(200)
      expect(preview.body.data.rules).toEqual([
        expect.objectContaining({ agents: ids, rollout: want, effective_qps: 12 }),
      ])
      await put(set('rl-rollout', { rules: [rule('service', '*', 40, { env: 'canary' }, 30)] }))
      expect(want.length).toBeGreaterThan(0)
      expect(want.length).toBeLessThan(ids.length)
      for (let round = 0; round < 2; round++) {
        const got: string[] = []
        for (const id of ids) {
          const l = await limitsOf(id)
          if (l.length) {
            expect(l).toEqual([
              expect.objectContaining({ limitQps: 40, percent: 30, bucket: bucket('rl-rollout', id) }),
            ])
            got.push(id)
          }
        }
        expect(got).toEqual(want)
      }
      // Raising the percent only adds agents.
      await put(set('rl-rollout', { rules: [rule('service', '*', 40, { env: 'canary' }, 60)] }))
      const wider: string[] = []
      for (const id of ids) if ((await limitsOf(id)).length) wider.push(id)
      expect(wider).toEqual(ids.filter((id) => bucket('rl-rollout', id) < 60))
      expect(want.every((id) => wider.includes(id))).toBe(true)
      expect(wider.length).toBeGreaterThan(want.length)
      await a.req('DELETE', '/api/v1/rate-limits/rl-rollout', { token: admin })
    })

    test('a set switched off binds nobody; switched on again, it does', async () => {
      await put(set('rl-switch', { status: 'off', rules: [rule('service', '*', 9, { env: 'prod' })] }))
      expect(await limitsOf('gw-eu-1')).toEqual([])
      await put(set('rl-switch', { status: 'on', rules: [rule('service', '*', 9, { env: 'prod' })] }))
      expect((await limitsOf('gw-eu-1')).map((l) => l.rateLimitId)).toEqual(['rl-switch'])
      await a.req('DELETE', '/api/v1/rate-limits/rl-switch', { token: admin })
    })

    test('a changed set is what the next heartbeat carries; a deleted one is gone from it', async () => {
      await put(set('rl-change', { rules: [rule('service', 'gw-us-1', 50)] }))
      expect((await limitsOf('gw-us-1')).map((l) => l.limitQps)).toEqual([50])
      await put(set('rl-change', { action: 'throttle', rules: [rule('service', 'gw-us-1', 12.5)] }))
      expect((await limitsOf('gw-us-1')).map((l) => [l.action, l.limitQps])).toEqual([['throttle', 12.5]])
      await a.req('DELETE', '/api/v1/rate-limits/rl-change', { token: admin })
      expect(await limitsOf('gw-us-1')).toEqual([])
    })

    test("heartbeats keep the sets a second at most: another instance's change shows after it", async () => {
      await put(set('rl-cached', { rules: [rule('service', 'gw-us-1', 40)] }))
      expect((await limitsOf('gw-us-1')).map((l) => l.limitQps)).toEqual([40])
      // Written to the store as another instance would: seen once the second the sets are kept passed.
      const rules = JSON.stringify([rule('service', 'gw-us-1', 9)])
      await a.db.run('UPDATE rate_limits SET rules = ? WHERE id = ?', [rules, 'rl-cached'])
      await Bun.sleep(1_050)
      expect((await limitsOf('gw-us-1')).map((l) => l.limitQps)).toEqual([9])
      await a.req('DELETE', '/api/v1/rate-limits/rl-cached', { token: admin })
    })
  })

  describe('who reads limits', () => {
    test('users who may read agents, the shared token and the agent itself; not a stranger, an SDK key or another agent', async () => {
      const path = '/api/v1/agents/gw-eu-1/limits'
      const get = (headers: Record<string, string>) => a.req('GET', path, { headers })
      const bearer = async (role: string) => ({ authorization: `Bearer ${await a.token(role)}` })
      expect((await get({})).status).toBe(401)
      expect((await get({ 'x-agent-token': 'wrong' })).status).toBe(401)
      expect((await get({ 'x-agent-token': `${keys.get('gw-eu-1')!}x` })).status).toBe(401)
      // Another agent's name on this agent's signature is no key at all.
      const [, sig] = keys.get('gw-eu-2')!.split('.')
      const forged = `lak_${Buffer.from('gw-eu-1').toString('base64url')}.${sig}`
      expect((await get({ 'x-agent-token': forged })).status).toBe(401)
      expect((await get({ authorization: 'Bearer nonsense' })).status).toBe(401)
      for (const role of ['viewer', 'operator', 'admin'])
        expect((await get(await bearer(role))).status).toBe(200)
      expect((await get({ 'x-admin-token': 'test-admin-token' })).status).toBe(200)
      expect((await get(shared)).status).toBe(200)
      expect((await get({ 'x-agent-token': keys.get('gw-eu-1')! })).status).toBe(200)
      const other = await get({ 'x-agent-token': keys.get('gw-eu-2')! })
      expect(other.status).toBe(403)
      expect(other.body.message).toContain("belongs to agent 'gw-eu-2'")
      const g = await a.req('POST', '/api/games', {
        token: admin,
        body: {
          name: 'Limits game',
          genre: 'STRATEGY',
          platforms: ['WEB'],
          timezone: 'UTC',
          defaultCurrency: 'USD',
        },
      })
      const sdk = await a.auth.createApiKey({ name: 'sdk', gameId: g.body.id, environment: 'prod' })
      expect((await get({ 'x-api-key': sdk.key })).status).toBe(403)
    })

    test("an agent key reaches only its own agent's heartbeat and invocations; registering takes the shared token", async () => {
      const own = { 'x-agent-token': keys.get('gw-us-1')! }
      expect((await heartbeat('gw-us-1', own)).status).toBe(200)
      expect((await heartbeat('gw-eu-1', own)).status).toBe(403)
      const report = await a.req('POST', '/api/v1/agents/gw-eu-1/invocations', {
        headers: own,
        body: { invocations: [{ function_id: 'grant.item', outcome: 'success' }] },
      })
      expect(report.status).toBe(403)
      const reg = await a.req('POST', '/api/v1/agents', {
        headers: own,
        body: { agent_id: 'gw-us-1', game_id: GAME, env: 'prod', functions: [] },
      })
      expect(reg.status).toBe(403)
    })

    test('404 for an agent that is not registered', async () => {
      expect((await a.req('GET', '/api/v1/agents/ghost/limits', { token: admin })).status).toBe(404)
      expect((await a.req('GET', '/api/v1/agents/ghost/limits', { headers: shared })).status).toBe(404)
    })
  })
})
