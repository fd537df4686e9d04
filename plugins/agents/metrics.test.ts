import { afterAll, beforeAll, expect, test } from 'bun:test'
import { type TestApp, forEachEngine, makeApp } from '../../test/helpers'

/**
 * The per-agent series are bounded: svc_agent_connected, svc_agent_functions_registered,
 * svc_agent_jobs_executed_total and svc_agent_jobs_duration were labelled by every registered agent
 * (at max_agents, 10,000, a scrape of some 170,000 series, and the shared agent token registers
 * made-up agents). Past `metrics_max_agents` the agents online come first, then the longest
 * registered; the rest are counted. svc_agents_total and svc_agents_healthy stay exact.
 */
const TOKEN = 'agent-token-metrics-41'
const BOUND = 3
const IDS = ['m-1', 'm-2', 'm-3', 'm-4', 'm-5']

forEachEngine((engine) => {
  let a: TestApp
  const as = (method: string, path: string, body: unknown) =>
    a.req(method, path, { body, headers: { 'x-agent-token': TOKEN } })

  beforeAll(async () => {
    a = await makeApp(engine, {
      plugins: {
        games: {},
        ingest: { purge_interval_minutes: 0 },
        agents: { token: TOKEN, offline_after_s: 3, metrics_max_agents: BOUND },
      },
      config: { telemetry: { prometheus: { enabled: true } } },
    })
  })
  afterAll(() => a.stop())

  test('a scrape with more agents than metrics_max_agents has series for that many: online first, then the longest registered', async () => {
    for (const id of IDS) {
      const r = await as('POST', '/api/v1/agents', {
        agent_id: id,
        game_id: 'g-metrics',
        env: 'prod',
        functions: ['grant.item'],
      })
      expect(r.status).toBe(201)
      const calls = await as('POST', `/api/v1/agents/${id}/invocations`, {
        invocations: [{ function_id: 'grant.item', duration_ms: 20, outcome: 'success' }],
      })
      expect(calls.status).toBe(202)
      // Registered one after another, a millisecond at least apart: the order is the registration's.
      await Bun.sleep(5)
    }
    // Every agent offline, then the two registered last heartbeat again: they come first.
    await Bun.sleep(3_100)
    for (const id of ['m-5', 'm-4'])
      expect((await as('POST', `/api/v1/agents/${id}/heartbeat`, {})).status).toBe(200)

    const text = (await a.req('GET', '/metrics/prometheus')).body as string
    const agentsOf = (name: string) =>
      [
        ...new Set(
          [...text.matchAll(new RegExp(`^${name}\\{[^}]*agent_id="([^"]+)"`, 'gm'))].map((m) => m[1]),
        ),
      ].sort()
    for (const name of [
      'svc_agent_connected',
      'svc_agent_functions_registered',
      'svc_agent_jobs_executed_total',
      'svc_agent_jobs_duration_bucket',
      'svc_agent_jobs_duration_count',
    ])
      expect([name, agentsOf(name)]).toEqual([name, ['m-1', 'm-4', 'm-5']])
    expect(text).toContain('svc_agents_total 5')
    expect(text).toContain('svc_agents_healthy 2')
    expect(text).toContain('svc_agents_metrics_omitted 2')
    expect(text).toContain('svc_agent_connected{agent_id="m-1",game_id="g-metrics",env="prod"} 0')
    expect(text).toContain('svc_agent_connected{agent_id="m-5",game_id="g-metrics",env="prod"} 1')
    expect(text).toMatch(
      /# HELP svc_agent_connected .*metrics_max_agents agents: online first, then the longest registered/,
    )

    // The JSON metrics say the same (spec 3: they match).
    const json = (await a.req('GET', '/api/v1/monitoring/metrics', { token: await a.token('admin') })).body
      .data
    const ids = (name: string) =>
      (json[name] as Array<{ labels: Record<string, string> }>).map((s) => s.labels.agent_id).sort()
    expect(ids('svc_agent_connected')).toEqual(['m-1', 'm-4', 'm-5'])
    expect([json.svc_agents_total, json.svc_agents_metrics_omitted]).toEqual([5, 2])
  }, 30_000)
})
