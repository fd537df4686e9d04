import { afterAll, beforeAll, expect, test } from 'bun:test'
import { type TestApp, clearOfMinute, forEachEngine, until } from '../helpers'
import { ADMIN_TOKEN, AGENT_TOKEN, type Call, client, securityApp } from './lib'

/*
 * The eighteenth session's agent audit, replayed as it was made: an agent's own key sending
 * heartbeats in parallel past the gateway's rate limit (users got 429, agents never did), and
 * reporting failed invocations one after another (each became a message to every built-in
 * channel: 1,000 reports, 1,000 unread messages in the admin's inbox).
 */
const PER_MINUTE = 30

forEachEngine((engine) => {
  let app: TestApp
  let call: Call
  const keys: Record<string, string> = {}
  beforeAll(async () => {
    app = await securityApp(engine, {
      config: {
        auth: { login_throttle: { address_failures: 100_000, account_failures: 100_000 } },
        rate_limit: { requests_per_minute: PER_MINUTE, burst: 0 },
      },
      plugins: {
        games: {},
        ingest: { purge_interval_minutes: 0 },
        analytics: {},
        notify: {},
        site: {},
        agents: { token: AGENT_TOKEN },
      },
    })
    call = client(app.listen())
    // Three registrations, counted in the shared token's bucket of this minute.
    await clearOfMinute(20_000)
    for (const id of ['burst-01', 'flooder-01', 'other-01']) {
      const r = await call('POST', '/api/v1/agents', {
        headers: { 'x-agent-token': AGENT_TOKEN },
        body: { agent_id: id, game_id: 'game-a', env: 'prod', functions: ['grant.item'] },
      })
      expect(r.status).toBe(201)
      keys[id] = r.body.data.agent_key
    }
  }, 40_000)
  afterAll(() => app.stop())
  const statuses = (answers: Array<{ status: number }>) => {
    const n: Record<number, number> = {}
    for (const a of answers) n[a.status] = (n[a.status] ?? 0) + 1
    return n
  }

  test("an agent's calls count in the gateway bucket: its key's and the shared token's", async () => {
    const key = keys['burst-01']
    const beat = (token: string) =>
      call('POST', '/api/v1/agents/burst-01/heartbeat', {
        headers: { 'x-agent-token': token },
        body: { qps: 1 },
      })
    const own = await Promise.all(Array.from({ length: PER_MINUTE + 10 }, () => beat(key)))
    expect(statuses(own)).toEqual({ 200: PER_MINUTE, 429: 10 })
    const ok = own.find((a) => a.status === 200)
    expect(ok?.headers.get('x-ratelimit-limit')).toBe(String(PER_MINUTE))
    const refused = own.find((a) => a.status === 429)
    expect(refused?.body).toMatchObject({ code: 429, data: { limit: PER_MINUTE } })
    expect(Number(refused?.headers.get('retry-after'))).toBeGreaterThan(0)
    // The shared token's calls share one bucket, whichever agent they name (the registrations counted).
    const fleet = await Promise.all(Array.from({ length: PER_MINUTE }, () => beat(AGENT_TOKEN)))
    expect(statuses(fleet)).toEqual({ 200: PER_MINUTE - 3, 429: 3 })
    // An operator's bucket is its own.
    const admin = await call('GET', '/api/v1/agents/burst-01', { headers: { 'x-admin-token': ADMIN_TOKEN } })
    expect(admin.status).toBe(200)
  })

  test("one agent's flood of failed reports is one message a minute, not one a report", async () => {
    // The fold is by minute: the flood (12 reports, under the agent's own limit) within one.
    await clearOfMinute(10_000)
    const report = (agent: string, token: string) =>
      call('POST', `/api/v1/agents/${agent}/invocations`, {
        headers: { 'x-agent-token': token },
        body: { invocations: [{ function_id: 'grant.item', outcome: 'failure' }] },
      })
    for (let i = 0; i < 12; i++) expect((await report('flooder-01', keys['flooder-01'])).status).toBe(202)
    // Another agent's failure after the flood: once its message is in, the flood's are too.
    expect((await report('other-01', keys['other-01'])).status).toBe(202)
    const messages = async () =>
      (
        await call('GET', '/api/v1/site/messages?size=500&event=function.invoked', {
          headers: { 'x-admin-token': ADMIN_TOKEN },
        })
      ).body.data.items as Array<{ title: string; body: string }>
    const listed = await until(async () => {
      const items = await messages()
      return items.some((m) => m.title.includes('other-01')) && items
    })
    const flood = listed.filter((m) => m.title.includes('flooder-01'))
    expect(flood).toHaveLength(1)
    expect(flood[0].body).toContain('are not notified again')
  }, 30_000)
})
