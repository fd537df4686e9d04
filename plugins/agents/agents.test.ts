import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { type TestApp, forEachEngine, makeApp, until } from '../../test/helpers'
import { smooth } from './store'

const TOKEN = 'agent-token-7f3e9c'
const game = {
  name: 'Orbit Miners',
  genre: 'STRATEGY',
  platforms: ['WEB'],
  timezone: 'Asia/Tokyo',
  defaultCurrency: 'JPY',
}

/** Polls `fn` until it returns true, failing after `ms`. */
test('qps_1m moves toward the reported qps by the share of a minute that passed', () => {
  expect(smooth(0, 60, 60)).toBeCloseTo(60 * (1 - Math.exp(-1)), 2)
  expect(smooth(10, 10, 5)).toBe(10)
  expect(smooth(100, 0, 0)).toBe(100)
})

test('qps_1m is always finite: an out-of-range stored mean restarts at the report', () => {
  // 1e308 times 1000 (the rounding) was Infinity, which no heartbeat answer can carry.
  expect(smooth(1e308, 3, 1)).toBe(3)
  expect(smooth(Number.POSITIVE_INFINITY, 3, 1)).toBe(3)
  expect(smooth(Number.NaN, 3, 1)).toBe(3)
  expect(smooth(0, 1e308, 60)).toBeCloseTo(1e9 * (1 - Math.exp(-1)), 0)
  expect(Number.isFinite(smooth(1e9, 1e9, Number.NaN))).toBe(true)
})

forEachEngine((engine) => {
  let a: TestApp
  let admin: string
  let gameId: string
  const agent = (id: string, extra: Record<string, unknown> = {}) => ({
    agent_id: id,
    game_id: gameId,
    env: 'staging',
    region: 'ap-northeast-1',
    zone: 'ap-northeast-1c',
    functions: ['ban.player', 'grant.item'],
    ...extra,
  })
  const as = (method: string, path: string, body?: unknown, token: string | null = TOKEN) =>
    a.req(method, path, { body, headers: token ? { 'x-agent-token': token } : {} })

  beforeAll(async () => {
    a = await makeApp(engine, {
      plugins: {
        games: {},
        // The event window wide open: the invocation ts test below is about times up to 9999 on
        // purpose (the default window refuses them: plugins/ingest/signed/event-window.test.ts).
        ingest: {
          purge_interval_minutes: 0,
          max_event_age_days: 3_000_000,
          max_event_future_s: 300_000_000_000,
        },
        // The invocation analytics belong to the analytics plugin since the ingest split.
        analytics: {},
        agents: { token: TOKEN, offline_after_s: 2 },
      },
      config: { telemetry: { prometheus: { enabled: true } } },
    })
    admin = await a.token('admin')
    const g = await a.req('POST', '/api/games', { token: admin, body: game })
    expect(g.status).toBe(201)
    gameId = g.body.id
  })
  afterAll(() => a.stop())

  describe('registration and heartbeat', () => {
    test('register answers 201, again 200 with labels and functions replaced; heartbeats smooth qps_1m', async () => {
      const r = await as('POST', '/api/v1/agents', agent('edge-tokyo-01', { qps: 12.5, version: '2.4.1' }))
      expect(r.status).toBe(201)
      expect(r.body.data).toMatchObject({
        agent_id: 'edge-tokyo-01',
        name: 'edge-tokyo-01',
        game_id: gameId,
        env: 'staging',
        region: 'ap-northeast-1',
        zone: 'ap-northeast-1c',
        version: '2.4.1',
        functions: ['ban.player', 'grant.item'],
        qps: 12.5,
        qps_1m: 12.5,
        status: 'online',
        heartbeat_interval_s: 1,
      })
      const again = await as(
        'POST',
        '/api/v1/agents',
        agent('edge-tokyo-01', { zone: 'ap-northeast-1a', functions: ['kick'] }),
      )
      expect(again.status).toBe(200)
      expect(again.body.data).toMatchObject({ zone: 'ap-northeast-1a', functions: ['kick'] })

      const hb = await as('POST', '/api/v1/agents/edge-tokyo-01/heartbeat', { qps: 40 })
      expect(hb.status).toBe(200)
      expect(hb.body.data.qps).toBe(40)
      // Little time passed since registration (qps 0 then): the minute mean has barely moved.
      expect(hb.body.data.qps_1m).toBeGreaterThanOrEqual(0)
      expect(hb.body.data.qps_1m).toBeLessThan(40)
      // Without the rate-limits plugin nothing limits an agent.
      expect(hb.body.data.limits).toEqual([])
      const sent = await as('POST', '/api/v1/agents/edge-tokyo-01/heartbeat', {
        qps: 41,
        qps_1m: 33.3,
        functions: ['kick', 'mute'],
      })
      expect(sent.body.data).toMatchObject({ qps: 41, qps_1m: 33.3, status: 'online' })
      const one = await a.req('GET', '/api/v1/agents/edge-tokyo-01', { token: await a.token('viewer') })
      expect(one.status).toBe(200)
      expect(one.body.data).toMatchObject({ qps: 41, qps_1m: 33.3, functions: ['kick', 'mute'] })
    })

    test('the agent token is checked before the body: none or wrong 401; bad bodies 400 naming the field', async () => {
      expect((await as('POST', '/api/v1/agents', { nonsense: true }, null)).status).toBe(401)
      const wrong = await as('POST', '/api/v1/agents', agent('x1'), 'agent-token-wrong!')
      expect(wrong.status).toBe(401)
      expect(wrong.body.message).toContain('X-Agent-Token')
      // A user's token is no agent token.
      const user = await a.req('POST', '/api/v1/agents', { token: admin, body: agent('x1') })
      expect(user.status).toBe(401)
      const cases: Array<[Record<string, unknown>, string]> = [
        [{ ...agent('x1'), game_id: undefined }, 'body.game_id'],
        [{ ...agent('x1'), functions: 'ban.player' }, 'body.functions'],
        [{ ...agent('x1'), qps: -1 }, 'body.qps'],
        [{ ...agent('bad id with spaces') }, 'body.agent_id'],
        [{ ...agent('x1'), colour: 'red' }, 'body.colour'],
      ]
      for (const [body, field] of cases) {
        const r = await as('POST', '/api/v1/agents', body)
        expect(r.status, field).toBe(400)
        expect(r.body.message).toContain(field)
      }
      expect((await as('POST', '/api/v1/agents/edge-tokyo-01/heartbeat', { qps: '5' })).status).toBe(400)
      expect((await as('POST', '/api/v1/agents/edge-tokyo-01/heartbeat', [1])).status).toBe(400)
      const missing = await a.req('GET', '/api/v1/agents/x1', { token: admin })
      expect(missing.status).toBe(404)
      expect((await as('POST', '/api/v1/agents/never-registered/heartbeat', { qps: 1 })).status).toBe(404)
    })

    test('an agent without heartbeats turns offline; list filters by labels, status and function', async () => {
      await as(
        'POST',
        '/api/v1/agents',
        agent('edge-osaka-07', { env: 'prod', region: 'ap-northeast-3', functions: ['grant.item'] }),
      )
      const list = (q: string) => a.req('GET', `/api/v1/agents?${q}`, { token: admin })
      expect((await list('env=prod')).body.data.items.map((x: { agent_id: string }) => x.agent_id)).toEqual([
        'edge-osaka-07',
      ])
      expect((await list('region=ap-northeast-1')).body.data.total).toBe(1)
      expect(
        (await list('function_id=grant.item')).body.data.items.map((x: { agent_id: string }) => x.agent_id),
      ).toEqual(['edge-osaka-07'])
      expect((await list('status=sleeping')).status).toBe(400)
      await until(async () => (await list('status=offline')).body.data.total === 2)
      const h = await a.req('GET', '/healthz')
      expect(h.body.checks.agents).toMatchObject({ status: 'up', total: 2, online: 0 })
      await as('POST', '/api/v1/agents/edge-osaka-07/heartbeat', { qps: 3 })
      expect(
        (await list('status=online')).body.data.items.map((x: { agent_id: string }) => x.agent_id),
      ).toEqual(['edge-osaka-07'])
      expect((await a.req('GET', '/healthz')).body.checks.agents).toMatchObject({ total: 2, online: 1 })
    })

    test('a qps past 1e9 is 400 naming the body field, and the agent keeps heartbeating', async () => {
      const hb = (body: unknown) => as('POST', '/api/v1/agents/edge-tokyo-01/heartbeat', body)
      for (const [body, field] of [
        [{ qps: 1e308 }, 'body.qps'],
        [{ qps: 1e9 + 1 }, 'body.qps'],
        [{ qps_1m: 1e308 }, 'body.qps_1m'],
      ] as const) {
        const r = await hb(body)
        expect([field, r.status]).toEqual([field, 400])
        expect(r.body.message).toContain(`${field}:`)
        expect(r.body.message).not.toContain('response.')
      }
      const reg = await as('POST', '/api/v1/agents', agent('edge-tokyo-01', { qps: 1e308 }))
      expect(reg.status).toBe(400)
      expect(reg.body.message).toContain('body.qps')
      const top = await hb({ qps: 1e9 })
      expect(top.status).toBe(200)
      expect(Number.isFinite(top.body.data.qps_1m)).toBe(true)
      const next = await hb({ qps: 3 })
      expect(next.status).toBe(200)
      expect(next.body.data.qps).toBe(3)
    })
  })

  describe('invocations and metrics', () => {
    test('reported invocations reach the invocation analytics, the job counters and the agent metrics', async () => {
      await as('POST', '/api/v1/agents', agent('edge-seoul-02', { env: 'prod', functions: ['grant.item'] }))
      const ts = Date.now()
      const r = await as('POST', '/api/v1/agents/edge-seoul-02/invocations', {
        invocations: [
          { function_id: 'grant.item', ts, duration_ms: 12, outcome: 'success', trace_id: 'tr-1' },
          { function_id: 'grant.item', ts, duration_ms: 250, outcome: 'timeout' },
          { function_id: 'grant.item', duration_ms: 8, outcome: 'success' },
        ],
      })
      expect(r.status).toBe(202)
      expect(r.body.data).toEqual({ accepted: 3, failed: 1 })
      const inv = (outcome: string) =>
        a.req(
          'GET',
          `/api/v1/analytics/invocations?gameId=${gameId}&env=prod&functionId=grant.item&outcome=${outcome}`,
          {
            token: admin,
          },
        )
      expect((await inv('success')).body.total).toBe(2)
      expect((await inv('failure')).body.total).toBe(1)
      const bad = await as('POST', '/api/v1/agents/edge-seoul-02/invocations', {
        invocations: [{ function_id: 'grant.item', outcome: 'exploded' }],
      })
      expect(bad.status).toBe(400)
      expect(bad.body.message).toContain('body.invocations[0].outcome')
      expect(
        (
          await as('POST', '/api/v1/agents/ghost/invocations', {
            invocations: [{ function_id: 'f', outcome: 'success' }],
          })
        ).status,
      ).toBe(404)

      const json = (await a.req('GET', '/api/v1/monitoring/metrics', { token: admin })).body.data
      const series = (name: string) =>
        (json[name] as Array<{ labels: Record<string, string>; value: number }>).find(
          (s) => s.labels.agent_id === 'edge-seoul-02',
        )
      expect(series('svc_agent_jobs_executed_total')?.value).toBe(3)
      expect(series('svc_agent_functions_registered')?.value).toBe(1)
      expect(series('svc_agent_connected')?.value).toBe(1)
      expect(json.svc_agents_total).toBe(3)
      const text = (await a.req('GET', '/metrics/prometheus')).body as string
      expect(text).toContain(
        `svc_agent_jobs_executed_total{agent_id="edge-seoul-02",game_id="${gameId}",env="prod"} 3`,
      )
      expect(text).toContain('svc_agents_total 3')
      expect(text).toMatch(/svc_agent_jobs_duration_bucket\{le="0.25",agent_id="edge-seoul-02".*\} 3/)
      expect(text).toContain(`svc_functions_registered ${json.svc_functions_registered}`)
      // Registered again under another environment: the old labels' durations leave the scrape.
      const again = await a.req('POST', '/api/v1/agents', {
        headers: { 'x-agent-token': TOKEN },
        body: {
          agent_id: 'edge-seoul-02',
          game_id: gameId,
          env: 'staging',
          region: 'ap',
          zone: 'ap-1',
          functions: ['grant.item'],
        },
      })
      expect(again.status).toBe(200)
      const after = (await a.req('GET', '/metrics/prometheus')).body as string
      expect(after).not.toMatch(
        /svc_agent_jobs_duration_bucket\{le="0.25",agent_id="edge-seoul-02",[^}]*env="prod"/,
      )
      await a.req('POST', '/api/v1/agents', {
        headers: { 'x-agent-token': TOKEN },
        body: {
          agent_id: 'edge-seoul-02',
          game_id: gameId,
          env: 'prod',
          region: 'ap',
          zone: 'ap-1',
          functions: ['grant.item'],
        },
      })
    })

    test('an invocation ts outside 0..9999-12-31T23:59:59.999Z or a huge duration is 400 naming the field', async () => {
      const report = (call: Record<string, unknown>) =>
        as('POST', '/api/v1/agents/edge-seoul-02/invocations', {
          invocations: [{ function_id: 'grant.item', outcome: 'success', ...call }],
        })
      for (const [call, field] of [
        [{ ts: 8640000000000001 }, 'body.invocations[0].ts'],
        [{ ts: 253402300800000 }, 'body.invocations[0].ts'],
        [{ ts: -1 }, 'body.invocations[0].ts'],
        [{ ts: 1.5 }, 'body.invocations[0].ts'],
        [{ duration_ms: 1e308 }, 'body.invocations[0].duration_ms'],
        [{ duration_ms: -1 }, 'body.invocations[0].duration_ms'],
      ] as const) {
        const r = await report(call)
        expect([field, r.status]).toEqual([field, 400])
        expect(r.body.message).toContain(`${field}:`)
      }
      // The last millisecond of 9999 is a Date: stored, the invocation analytics still answer.
      expect((await report({ ts: 253402300799999, duration_ms: 2_147_483_647 })).status).toBe(202)
      const inv = await a.req('GET', `/api/v1/analytics/invocations?gameId=${gameId}&env=prod`, {
        token: admin,
      })
      expect(inv.status).toBe(200)
      expect(JSON.stringify(inv.body)).toContain('9999-12-31T23:59:59.999Z')
    })

    test('unregister: operator may, viewer 403, no token 401, unknown 404', async () => {
      await as('POST', '/api/v1/agents', agent('edge-temp-99'))
      expect((await a.req('DELETE', '/api/v1/agents/edge-temp-99')).status).toBe(401)
      expect(
        (await a.req('DELETE', '/api/v1/agents/edge-temp-99', { token: await a.token('viewer') })).status,
      ).toBe(403)
      expect(
        (await a.req('DELETE', '/api/v1/agents/edge-temp-99', { token: await a.token('operator') })).status,
      ).toBe(200)
      expect((await a.req('DELETE', '/api/v1/agents/edge-temp-99', { token: admin })).status).toBe(404)
      expect((await a.req('GET', '/api/v1/agents')).status).toBe(401)
    })
  })
})

test('without a configured token agents are refused with 403 agents_disabled', async () => {
  const a = await makeApp('sqlite', {
    plugins: { games: {}, ingest: { purge_interval_minutes: 0 }, agents: {} },
  })
  try {
    const r = await a.req('POST', '/api/v1/agents', { headers: { 'x-agent-token': 'anything' }, body: {} })
    expect(r.status).toBe(403)
    expect(r.body.message).toContain('plugins.agents.token')
  } finally {
    await a.stop()
  }
})

test('a shared agent token shorter than 16 characters does not start, its value never said', async () => {
  // The fleet's credential and the HMAC key of every agent key: a two-letter one had been taken.
  const start = makeApp('sqlite', {
    plugins: { games: {}, ingest: { purge_interval_minutes: 0 }, agents: { token: 'zq-Agent-15char' } },
  })
  await expect(start).rejects.toThrow('plugins.agents.token (AGENT_TOKEN): at least 16 characters, got 15')
  await expect(start).rejects.not.toThrow('zq-Agent')
})
