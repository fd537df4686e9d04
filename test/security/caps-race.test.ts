import { afterAll, beforeAll, expect, test } from 'bun:test'
import { type TestApp, forEachEngine, makeApp } from '../helpers'

/**
 * The caps on what every reader reads whole (agents, rosters, rule groups, rate-limit sets, ops
 * alert rules) were counted apart from the insert: creates sent at once on PostgreSQL or MariaDB
 * each saw room and passed the cap together. Counted now under a lock held to the insert's commit
 * (`full`, core/db/room.ts); here two of its callers are raced at their cap.
 */
const TOKEN = 'agent-token-caps-race'
const MAX_AGENTS = 3

forEachEngine((engine) => {
  let a: TestApp
  let admin: string
  beforeAll(async () => {
    a = await makeApp(engine, {
      plugins: {
        games: {},
        ingest: { purge_interval_minutes: 0 },
        agents: { token: TOKEN, max_agents: MAX_AGENTS },
        notify: {},
        rules: {},
        rosters: {},
      },
    })
    admin = await a.token('admin')
  })
  afterAll(() => a.stop())

  const statuses = (rs: { status: number }[]) => rs.map((r) => r.status).sort()

  test('twelve new agents at once under max_agents 3: three registered, nine 409', async () => {
    const rs = await Promise.all(
      Array.from({ length: 12 }, (_, i) =>
        a.req('POST', '/api/v1/agents', {
          headers: { 'x-agent-token': TOKEN },
          body: { agent_id: `racer-${i}`, game_id: 'g-race', env: 'prod', functions: ['fn'] },
        }),
      ),
    )
    expect(statuses(rs)).toEqual([...Array(3).fill(201), ...Array(9).fill(409)])
    expect(Number((await a.db.get<{ n: number }>('SELECT COUNT(*) AS n FROM agents'))?.n)).toBe(MAX_AGENTS)
  })

  test('ten new rosters at once, three short of the 200: three created, seven 409', async () => {
    const periods = [{ start: '2031-02-03T04:00:00Z', end: '2031-02-03T09:30:00Z' }]
    const post = (id: string) => a.req('POST', '/api/v1/rosters', { token: admin, body: { id, periods } })
    for (let i = 0; i < 197; i++) expect((await post(`fill-${i}`)).status).toBe(200)
    const rs = await Promise.all(Array.from({ length: 10 }, (_, i) => post(`race-${i}`)))
    expect(statuses(rs)).toEqual([...Array(3).fill(200), ...Array(7).fill(409)])
    expect(Number((await a.db.get<{ n: number }>('SELECT COUNT(*) AS n FROM rosters'))?.n)).toBe(200)
  })
})
