import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { type TestApp, forEachEngine, makeApp } from '../../test/helpers'

const TOKEN = 'agent-token-rl-31'
const base = (id: string, extra: Record<string, unknown> = {}) => ({
  rateLimitId: id,
  name: 'Grant item guard',
  resource: 'function',
  limit: 600,
  window: 60,
  action: 'reject',
  rules: [
    { scope: 'service', key: '*', limitQps: 80, match: { env: 'prod', region: 'eu-west' }, percent: 30 },
    { scope: 'function', key: 'grant.item', limitQps: 25.5, match: {}, percent: 100 },
  ],
  ...extra,
})

forEachEngine((engine) => {
  let a: TestApp
  let admin: string
  beforeAll(async () => {
    a = await makeApp(engine, {
      plugins: {
        games: {},
        ingest: { purge_interval_minutes: 0 },
        agents: { token: TOKEN },
        'rate-limits': {},
        audit: {},
      },
    })
    admin = await a.token('admin')
    const reg = (body: Record<string, unknown>) =>
      a.req('POST', '/api/v1/agents', { headers: { 'x-agent-token': TOKEN }, body })
    for (const [id, env, region, fns, qps] of [
      ['gw-eu-1', 'prod', 'eu-west', ['grant.item'], 14],
      ['gw-eu-2', 'prod', 'eu-west', ['kick'], 6],
      ['gw-us-1', 'prod', 'us-east', ['grant.item'], 9],
      ['gw-eu-dev', 'dev', 'eu-west', ['kick'], 1],
    ] as const)
      expect(
        (await reg({ agent_id: id, game_id: 'g-77', env, region, zone: `${region}-a`, functions: fns, qps }))
          .status,
      ).toBe(201)
  })
  afterAll(() => a.stop())

  describe('rule sets', () => {
    test('PUT stores a whole set (201, then 200 replacing it); list, get, delete; audited', async () => {
      const r = await a.req('PUT', '/api/v1/rate-limits', { token: admin, body: base('rl-grant') })
      expect(r.status).toBe(201)
      expect(r.body.data).toMatchObject({ ...base('rl-grant'), status: 'on' })
      const again = await a.req('PUT', '/api/v1/rate-limits', {
        token: await a.token('operator'),
        body: base('rl-grant', { limit: 300, status: 'off', rules: [] }),
      })
      expect(again.status).toBe(200)
      expect(again.body.data).toMatchObject({ limit: 300, status: 'off', rules: [] })
      const one = await a.req('GET', '/api/v1/rate-limits/rl-grant', { token: await a.token('viewer') })
      expect(one.body.data).toMatchObject({
        rateLimitId: 'rl-grant',
        limit: 300,
        window: 60,
        action: 'reject',
      })
      expect(
        (await a.req('GET', '/api/v1/rate-limits', { token: admin })).body.data.map(
          (s: { rateLimitId: string }) => s.rateLimitId,
        ),
      ).toEqual(['rl-grant'])
      expect((await a.req('DELETE', '/api/v1/rate-limits/rl-grant', { token: admin })).status).toBe(200)
      expect((await a.req('GET', '/api/v1/rate-limits/rl-grant', { token: admin })).status).toBe(404)
      expect((await a.req('DELETE', '/api/v1/rate-limits/rl-grant', { token: admin })).status).toBe(404)
      const audited = () => a.req('GET', '/api/v1/audit?action=rate_limits', { token: admin })
      const end = Date.now() + 5000
      while ((await audited()).body.data.total < 4 && Date.now() < end) await Bun.sleep(20)
      type Entry = {
        action: string
        ok: boolean
        actor: { name: string }
        details: { before?: { limit: number }; status?: number }
      }
      const items: Entry[] = (await audited()).body.data.items
      const done = items.filter((e) => e.ok)
      expect(done.map((e) => e.action)).toEqual(['rate_limits.delete', 'rate_limits.put', 'rate_limits.put'])
      expect(done[1].details.before?.limit).toBe(600)
      expect(done[1].actor.name).toBe('operator-user')
      // The refused delete (404) reads as the accepted one: the route names the handler's action.
      expect(items.filter((e) => !e.ok)).toMatchObject([
        { action: 'rate_limits.delete', details: { status: 404 } },
      ])
    })

    test('every field is validated: 400 naming it, nothing stored', async () => {
      const cases: Array<[Record<string, unknown>, string]> = [
        [base('x', { resource: 'queue' }), 'body.resource'],
        [base('x', { action: 'drop' }), 'body.action'],
        [base('x', { limit: 0 }), 'body.limit'],
        [base('x', { window: 1.5 }), 'body.window'],
        [base('x', { limit: '600' }), 'body.limit'],
        [base('x', { name: undefined }), 'body.name'],
        [base('x', { status: 'paused' }), 'body.status'],
        [base('bad id!'), 'body.rateLimitId'],
        [
          base('x', { rules: [{ scope: 'galaxy', key: 'a', limitQps: 1, match: {}, percent: 5 }] }),
          'body.rules[0].scope',
        ],
        [
          base('x', { rules: [{ scope: 'service', key: 'a', limitQps: 0, match: {}, percent: 5 }] }),
          'body.rules[0].limitQps',
        ],
        [
          base('x', { rules: [{ scope: 'service', key: 'a', limitQps: 1, match: {}, percent: 0 }] }),
          'body.rules[0].percent',
        ],
        [
          base('x', { rules: [{ scope: 'service', key: 'a', limitQps: 1, match: {}, percent: 101 }] }),
          'body.rules[0].percent',
        ],
        [
          base('x', {
            rules: [{ scope: 'service', key: 'a', limitQps: 1, match: { planet: 'mars' }, percent: 5 }],
          }),
          'body.rules[0].match',
        ],
        [
          base('x', { rules: [{ scope: 'service', key: 'a', limitQps: 1, percent: 5 }] }),
          'body.rules[0].match',
        ],
        // Longer than any agent's label: it could match none, and only cost each heartbeat.
        [
          base('x', {
            rules: [{ scope: 'service', key: 'a', limitQps: 1, match: { env: 'e'.repeat(129) }, percent: 5 }],
          }),
          'body.rules[0].match.env',
        ],
        [
          base('x', {
            rules: [{ scope: 'service', key: 'a', limitQps: 1, match: {}, percent: 5, extra: 1 }],
          }),
          'body.rules[0].extra',
        ],
        [
          base('x', { rules: [{ scope: 'function', key: '*', limitQps: 1, match: {}, percent: 5 }] }),
          'body.rules[0].key',
        ],
        [
          base('x', {
            rules: [
              { scope: 'service', key: 'a', limitQps: 1, match: {}, percent: 5 },
              { scope: 'service', key: 'a', limitQps: 2, match: {}, percent: 9 },
            ],
          }),
          'body.rules[1].key',
        ],
      ]
      for (const [body, field] of cases) {
        const r = await a.req('PUT', '/api/v1/rate-limits', { token: admin, body })
        expect(r.status, field).toBe(400)
        expect(r.body.message, field).toContain(field)
      }
      expect((await a.req('PUT', '/api/v1/rate-limits', { token: admin, body: [base('x')] })).status).toBe(
        400,
      )
      expect((await a.req('GET', '/api/v1/rate-limits/x', { token: admin })).status).toBe(404)
    })

    test('at most 100 sets: a new one past it is 409, a replaced one is not', async () => {
      const listed = (await a.req('GET', '/api/v1/rate-limits', { token: admin })).body.data
      const have = (listed.items ?? listed).length
      for (let i = have; i < 100; i++)
        expect(
          (await a.req('PUT', '/api/v1/rate-limits', { token: admin, body: base(`fill-${i}`) })).status,
        ).toBe(201)
      const over = await a.req('PUT', '/api/v1/rate-limits', { token: admin, body: base('one-too-many') })
      expect([over.status, over.body.message]).toEqual([409, 'at most 100 rate-limit sets: delete one first'])
      expect(
        (await a.req('PUT', '/api/v1/rate-limits', { token: admin, body: base('fill-99') })).status,
      ).toBe(200)
      for (let i = have; i < 100; i++)
        await a.req('DELETE', `/api/v1/rate-limits/fill-${i}`, { token: admin })
    })

    test('no token 401 (even with a bad body); viewer may read but not write (403)', async () => {
      expect((await a.req('PUT', '/api/v1/rate-limits', { body: { junk: 1 } })).status).toBe(401)
      expect((await a.req('GET', '/api/v1/rate-limits')).status).toBe(401)
      expect((await a.req('POST', '/api/v1/rate-limits/preview', { body: base('p') })).status).toBe(401)
      const viewer = await a.token('viewer')
      expect((await a.req('PUT', '/api/v1/rate-limits', { token: viewer, body: base('v') })).status).toBe(403)
      expect((await a.req('DELETE', '/api/v1/rate-limits/v', { token: viewer })).status).toBe(403)
      expect((await a.req('GET', '/api/v1/rate-limits', { token: viewer })).status).toBe(200)
      expect(
        (await a.req('POST', '/api/v1/rate-limits/preview', { token: viewer, body: base('p') })).status,
      ).toBe(403)
    })
  })

  describe('preview', () => {
    test('service rules match agents by labels, function rules by served function; effective qps = limitQps x percent', async () => {
      const r = await a.req('POST', '/api/v1/rate-limits/preview', {
        token: admin,
        body: base('p', { rateLimitId: undefined }),
      })
      expect(r.status).toBe(200)
      const d = r.body.data
      expect(d.matched).toBe(3)
      expect(d.agents.map((x: { agent_id: string }) => x.agent_id)).toEqual(['gw-eu-1', 'gw-eu-2', 'gw-us-1'])
      expect(d.agents[0]).toEqual({
        agent_id: 'gw-eu-1',
        game_id: 'g-77',
        env: 'prod',
        region: 'eu-west',
        zone: 'eu-west-a',
        qps: 14,
        qps_1m: 14,
        status: 'online',
      })
      expect(d.rules).toEqual([
        {
          index: 0,
          scope: 'service',
          key: '*',
          effective_qps: 24,
          matched: 2,
          agents: ['gw-eu-1', 'gw-eu-2'],
          current_qps: 20,
        },
        {
          index: 1,
          scope: 'function',
          key: 'grant.item',
          effective_qps: 25.5,
          matched: 2,
          agents: ['gw-eu-1', 'gw-us-1'],
          current_qps: 23,
        },
      ])
      const one = await a.req('POST', '/api/v1/rate-limits/preview', {
        token: admin,
        body: base('p', {
          rules: [{ scope: 'service', key: 'gw-eu-dev', limitQps: 10, match: { env: 'dev' }, percent: 10 }],
        }),
      })
      expect(one.body.data).toMatchObject({
        matched: 1,
        rules: [{ effective_qps: 1, agents: ['gw-eu-dev'] }],
      })
      const bad = await a.req('POST', '/api/v1/rate-limits/preview', {
        token: admin,
        body: base('p', { rules: [{ scope: 'service' }] }),
      })
      expect(bad.status).toBe(400)
      expect(bad.body.message).toContain('body.rules[0]')
      expect((await a.req('GET', '/api/v1/rate-limits', { token: admin })).body.data).toEqual([])
    })
  })
})
