import { afterAll, beforeAll, expect, test } from 'bun:test'
import { join } from 'node:path'
import { type TestApp, forEachEngine, makeApp } from '../../test/helpers'
import m004 from './migrations/004_agent_function_count.sql' with { type: 'text' }

/**
 * The fleet's readers do not parse every agent's functions. Each agent's functions are one JSON
 * list of up to 1,000 ids; a scrape and GET /api/v1/agents had parsed all of them (2,000 agents of
 * 500 functions held the event loop 240-280 ms a scrape and 300-440 ms a list on SQLite). The
 * scrape reads a stored count per agent and the distinct count once per change of the functions;
 * the list pages (limit, default and at most 500, and after) with its filters in the store.
 */
const TOKEN = 'agent-token-fleet-reads-9'
const plugins = {
  games: {},
  ingest: { purge_interval_minutes: 0 },
  agents: { token: TOKEN, offline_after_s: 2 },
}
const config = { telemetry: { prometheus: { enabled: true } } }

forEachEngine((engine) => {
  let a: TestApp
  let admin: string
  const as = (method: string, path: string, body?: unknown) =>
    a.req(method, path, { body, headers: { 'x-agent-token': TOKEN } })
  const register = async (id: string, functions: string[], env = 'prod') =>
    expect(
      (await as('POST', '/api/v1/agents', { agent_id: id, game_id: 'g-fleet', env, functions })).status,
    ).toBe(201)
  const list = async (query: string) => {
    const r = await a.req('GET', `/api/v1/agents${query}`, { token: admin })
    expect([query, r.status]).toEqual([query, 200])
    return r.body.data as { items: Array<{ agent_id: string }>; total: number; next_after?: string }
  }
  const ids = async (query: string) => (await list(query)).items.map((i) => i.agent_id)
  const scrape = async (app = a) => {
    const text = (await app.req('GET', '/metrics/prometheus')).body as string
    const per = Object.fromEntries(
      [...text.matchAll(/^svc_agent_functions_registered\{agent_id="([^"]+)"[^}]*\} (\d+)$/gm)].map((m) => [
        m[1],
        Number(m[2]),
      ]),
    )
    return { distinct: Number(/^svc_functions_registered (\d+)$/m.exec(text)?.[1]), per }
  }

  beforeAll(async () => {
    a = await makeApp(engine, { plugins, config })
    admin = await a.token('admin')
  })
  afterAll(() => a.stop())

  test('limit and after walk every agent once, by agent_id; total counts them all on every page', async () => {
    const all = ['p-01', 'p-02', 'p-03', 'p-04', 'p-05', 'p-06', 'p-07']
    for (const id of [...all].reverse()) await register(id, ['walk.fn'], id < 'p-04' ? 'dev' : 'prod')
    const seen: string[] = []
    let after = ''
    for (let page = 0; page < 5; page++) {
      const d = await list(`?function_id=walk.fn&limit=3${after ? `&after=${after}` : ''}`)
      expect(d.total).toBe(7)
      seen.push(...d.items.map((i) => i.agent_id))
      if (!d.next_after) break
      expect(d.next_after).toBe(d.items[d.items.length - 1].agent_id)
      after = d.next_after
    }
    expect(seen).toEqual(all)
    // Filters page too: the labels are applied before the limit, never after it.
    const dev = await list('?function_id=walk.fn&env=dev&limit=2')
    expect([dev.items.map((i) => i.agent_id), dev.total, dev.next_after]).toEqual([
      ['p-01', 'p-02'],
      3,
      'p-02',
    ])
    expect(await ids('?function_id=walk.fn&env=dev&limit=2&after=p-02')).toEqual(['p-03'])
    expect((await list('?function_id=walk.fn')).next_after).toBeUndefined()
    for (const bad of ['0', '501', 'x', '1.5']) {
      const r = await a.req('GET', `/api/v1/agents?limit=${bad}`, { token: admin })
      expect([bad, r.status, r.body.message]).toEqual([bad, 400, expect.stringContaining('query.limit')])
    }
  })

  test('an answer holds 500 agents at most when the query names no limit', async () => {
    for (let i = 0; i < 501; i += 50)
      await Promise.all(
        Array.from({ length: Math.min(50, 501 - i) }, (_, k) =>
          register(`d-${String(i + k).padStart(3, '0')}`, ['many.fn']),
        ),
      )
    const d = await list('?function_id=many.fn')
    expect([d.items.length, d.total, d.next_after]).toEqual([500, 501, 'd-499'])
    expect(await ids('?function_id=many.fn&after=d-499')).toEqual(['d-500'])
  }, 60_000)

  test('function_id selects the agents serving exactly that id; status by the last heartbeat', async () => {
    await register('f-1', ['grant.item', 'ban.player'])
    await register('f-2', ['Grant.item'])
    await register('f-3', ['grant.item.v2'])
    expect(await ids('?function_id=grant.item')).toEqual(['f-1'])
    expect(await ids('?function_id=Grant.item')).toEqual(['f-2'])
    for (const none of ['grant', 'item', ',', 'grant.item,', '","', 'grant.item"', '%', 'grant_item'])
      expect([none, await ids(`?function_id=${encodeURIComponent(none)}`)]).toEqual([none, []])
    await Bun.sleep(2_100)
    expect((await as('POST', '/api/v1/agents/f-2/heartbeat', { qps: 1 })).status).toBe(200)
    const on = await list('?status=online&game_id=g-fleet')
    expect([on.items.map((i) => i.agent_id), on.total]).toEqual([['f-2'], 1])
    expect(await ids('?status=offline&function_id=grant.item.v2')).toEqual(['f-3'])
  }, 20_000)

  test('the scrape counts functions as before: per agent, distinct over all, after every change, on every instance', async () => {
    const fresh = await makeApp(engine, { plugins, config })
    const b = await makeApp(engine, {
      plugins,
      config: {
        ...config,
        ...(engine === 'sqlite' ? { database: { url: join(fresh.dataDir, 'test.sqlite') } } : {}),
      },
      store: fresh,
    })
    try {
      const on = (app: TestApp) => (method: string, path: string, body?: unknown) =>
        app.req(method, path, { body, headers: { 'x-agent-token': TOKEN } })
      await on(fresh)('POST', '/api/v1/agents', {
        agent_id: 's-1',
        game_id: 'g',
        env: 'e',
        functions: ['x', 'y', 'z'],
      })
      await on(fresh)('POST', '/api/v1/agents', {
        agent_id: 's-2',
        game_id: 'g',
        env: 'e',
        functions: ['y', 'w'],
      })
      expect(await scrape(fresh)).toEqual({ distinct: 4, per: { 's-1': 3, 's-2': 2 } })
      // Changed on the other instance: this one's kept count does not outlive it.
      expect(
        (await on(b)('POST', '/api/v1/agents/s-2/heartbeat', { functions: ['v', 'u', 't', 's'] })).status,
      ).toBe(200)
      expect(await scrape(fresh)).toEqual({ distinct: 7, per: { 's-1': 3, 's-2': 4 } })
      expect((await on(b)('POST', '/api/v1/agents/s-2/heartbeat', { qps: 2 })).status).toBe(200)
      expect(await scrape(fresh)).toEqual({ distinct: 7, per: { 's-1': 3, 's-2': 4 } })
      await on(b)('POST', '/api/v1/agents', { agent_id: 's-1', game_id: 'g', env: 'e', functions: ['v'] })
      expect(await scrape(fresh)).toEqual({ distinct: 4, per: { 's-1': 1, 's-2': 4 } })
      const del = await b.req('DELETE', '/api/v1/agents/s-2', { token: await b.token('admin') })
      expect(del.status).toBe(200)
      expect(await scrape(fresh)).toEqual({ distinct: 1, per: { 's-1': 1 } })
      await on(b)('POST', '/api/v1/agents', { agent_id: 's-3', game_id: 'g', env: 'e', functions: [] })
      expect(await scrape(fresh)).toEqual({ distinct: 1, per: { 's-1': 1, 's-3': 0 } })

      // Rows from before migration 004 get their count from the stored list.
      await fresh.db.run('UPDATE agents SET function_count = 99')
      const backfill = m004.split('\n').find((l) => l.startsWith('UPDATE agents'))
      await fresh.db.run(backfill as string)
      expect((await scrape(fresh)).per).toEqual({ 's-1': 1, 's-3': 0 })
    } finally {
      await b.stop()
      await fresh.stop()
    }
  }, 30_000)
})
