import { afterAll, beforeAll, describe, expect, spyOn, test } from 'bun:test'
import type { Param } from '../../core/db'
import { type TestApp, forEachEngine, makeApp, until } from '../../test/helpers'
import * as limits from './limits'
import { MAX_PREVIEW_AGENTS, MAX_RULE_AGENTS } from './preview'
import * as store from './store'

/**
 * Audit 19 F6: a rule cost O(functions) per agent, so 100 stored sets of 200 function rules made
 * each heartbeat scan the agent's 1,000 functions 20,000 times (32 ms of the loop), a preview
 * cost rules x agents x functions, and the shared agent token registered agents without end.
 * The work is counted here (rules checked, buckets hashed, limits computed), never timed.
 */
const TOKEN = 'agent-token-fleet-19'
const GAME = 'g-fleet'
const FUNCTIONS = Array.from({ length: 1000 }, (_, i) => `fn-${i}`)
/** Agents written straight to the store (registering 1,100 through the API would be slow). */
const BULK = 1_100
const MAX_AGENTS = BULK + 2

const rule = (scope: string, key: string, match: Record<string, string> = {}) => ({
  scope,
  key,
  limitQps: 10,
  match,
  percent: 100,
})

forEachEngine((engine) => {
  let a: TestApp
  let admin: string
  const shared = { 'x-agent-token': TOKEN }
  const register = (agent_id: string, functions: string[], env = 'prod') =>
    a.req('POST', '/api/v1/agents', { headers: shared, body: { agent_id, game_id: GAME, env, functions } })
  const heartbeat = async (id: string, body: Record<string, unknown> = { qps: 1 }) => {
    const r = await a.req('POST', `/api/v1/agents/${id}/heartbeat`, { headers: shared, body })
    expect(r.status).toBe(200)
    return r.body.data.limits as Array<{ rateLimitId: string; key: string }>
  }

  beforeAll(async () => {
    a = await makeApp(engine, {
      plugins: {
        games: {},
        ingest: { purge_interval_minutes: 0 },
        agents: { token: TOKEN, max_agents: MAX_AGENTS },
        'rate-limits': {},
      },
    })
    admin = await a.token('admin')
    expect((await register('big', FUNCTIONS)).status).toBe(201)
    // 99 sets of 200 function rules naming functions nobody serves, and one that binds.
    const now = Date.now()
    await a.db.tx(async (tx) => {
      for (let s = 0; s < 100; s++) {
        const rules =
          s === 99
            ? [rule('service', '*', { env: 'prod' }), rule('function', 'fn-7'), rule('service', 'big')]
            : Array.from({ length: 200 }, (_, i) => rule('function', `zz-${s * 200 + i}`))
        await tx.run(
          `INSERT INTO rate_limits (id, name, resource, limit_n, window_s, action, rules, status, created_at, updated_at)
           VALUES (?, ?, 'function', 600, 60, 'reject', ?, 'on', ?, ?)`,
          [`set-${String(s).padStart(2, '0')}`, `set ${s}`, JSON.stringify(rules), now, now],
        )
      }
      for (let i = 0; i < BULK; i += 100) {
        const rows = Array.from({ length: 100 }, (_, j) => i + j)
        await tx.run(
          `INSERT INTO agents (id, name, game_id, env, functions, qps, qps_1m, registered_at, last_heartbeat_at, key_nonce)
           VALUES ${rows.map(() => '(?, ?, ?, ?, ?, 1, 1, ?, ?, ?)').join(', ')}`,
          rows.flatMap((n) => {
            const id = `bulk-${String(n).padStart(4, '0')}`
            return [id, id, GAME, 'staging', JSON.stringify(['fn-7', `own-${n}`]), now, now, `nonce-${n}`]
          }),
        )
      }
    })
  })
  afterAll(() => a.stop())

  describe('fleet-sized rate limits', () => {
    test('a heartbeat checks only the rules that can bind its agent, and computes its limits once while nothing changed', async () => {
      const checked = spyOn(limits, 'matches')
      const computed = spyOn(limits, 'effectiveLimits')
      const reads = spyOn(a.db, 'all')
      try {
        const first = await heartbeat('big')
        expect(first.map((l) => l.key)).toEqual(['*', 'fn-7', 'big'])
        // Three rules can bind it (of 20,003): three label checks, not one per rule.
        expect(checked.mock.calls.length).toBeLessThanOrEqual(3)
        for (let i = 0; i < 4; i++) expect(await heartbeat('big')).toEqual(first)
        // One computation per read of the sets (kept a second): five heartbeats, one or two.
        const setReads = reads.mock.calls.filter((c) => String(c[0]).includes('FROM rate_limits')).length
        expect(computed.mock.calls.length).toBe(setReads)
        expect(setReads).toBeLessThan(5)
        expect(checked.mock.calls.length).toBeLessThanOrEqual(3 * setReads)
        // A function the agent starts serving binds at that heartbeat.
        const more = await heartbeat('big', { functions: ['fn-1', 'fn-7'] })
        expect(more.map((l) => l.key)).toEqual(['*', 'fn-7', 'big'])
        const fewer = await heartbeat('big', { functions: ['fn-1'] })
        expect(fewer.map((l) => l.key)).toEqual(['*', 'big'])
      } finally {
        checked.mockRestore()
        computed.mockRestore()
        reads.mockRestore()
        await heartbeat('big', { functions: FUNCTIONS })
      }
    })

    test('a preview indexes the agents once: each rule reads the agents it names, each bucket is hashed once; lists are capped', async () => {
      const checked = spyOn(limits, 'matches')
      const hashed = spyOn(limits, 'bucket')
      try {
        const body = {
          rateLimitId: 'preview-fleet',
          name: 'preview',
          resource: 'function',
          limit: 600,
          window: 60,
          action: 'reject',
          rules: [
            ...Array.from({ length: 197 }, (_, i) => rule('function', `zz-${i}`)),
            rule('function', 'fn-7'),
            rule('service', '*', { env: 'staging' }),
            rule('service', 'big'),
          ],
        }
        const r = await a.req('POST', '/api/v1/rate-limits/preview', { token: admin, body })
        expect(r.status).toBe(200)
        const d = r.body.data
        expect(d.matched).toBe(BULK + 1)
        expect(d.agents).toHaveLength(MAX_PREVIEW_AGENTS)
        const byKey = Object.fromEntries(d.rules.map((x: { key: string }) => [x.key, x]))
        expect(byKey['zz-0']).toMatchObject({ matched: 0, agents: [], rollout_matched: 0, rollout: [] })
        expect(byKey['fn-7']).toMatchObject({ matched: BULK + 1, current_qps: BULK + 1 })
        expect(byKey['fn-7'].agents).toHaveLength(MAX_RULE_AGENTS)
        expect(byKey['fn-7'].rollout).toHaveLength(MAX_RULE_AGENTS)
        expect(byKey['fn-7'].rollout_matched).toBe(BULK + 1)
        expect(byKey['*']).toMatchObject({ matched: BULK })
        expect(byKey.big).toMatchObject({ matched: 1, agents: ['big'], rollout: ['big'] })
        // fn-7 and * read their agents, big one: no rule reads the other agents, nor any rule all.
        expect(checked.mock.calls.length).toBe(BULK + 1 + BULK + 1)
        expect(hashed.mock.calls.length).toBe(BULK + 1)
      } finally {
        checked.mockRestore()
        hashed.mockRestore()
      }
    })

    test('previews asked at once share one read of the agents', async () => {
      let open: () => void = () => undefined
      const gate = new Promise<void>((r) => {
        open = r
      })
      const all = a.db.all.bind(a.db)
      const reads = spyOn(a.db, 'all').mockImplementation(async (sql: string, params?: readonly Param[]) => {
        if (sql.includes('FROM agents')) await gate
        return all(sql, params) as never
      })
      const entered = spyOn(store, 'checkRules')
      const body = {
        name: 'p',
        resource: 'function',
        limit: 1,
        window: 1,
        action: 'reject',
        rules: [rule('service', 'big')],
      }
      try {
        const previews = Array.from({ length: 3 }, () =>
          a.req('POST', '/api/v1/rate-limits/preview', { token: admin, body }),
        )
        await until(() => entered.mock.calls.length === 3, { what: 'three previews under way' })
        open()
        for (const r of await Promise.all(previews)) expect(r.body.data.rules[0].agents).toEqual(['big'])
        expect(reads.mock.calls.filter((c) => String(c[0]).includes('FROM agents'))).toHaveLength(1)
      } finally {
        open()
        reads.mockRestore()
        entered.mockRestore()
      }
    })

    test('agents are capped at max_agents: a new one past it is 409, one registered again is not', async () => {
      expect((await register('one-more', ['fn-1'])).status).toBe(201)
      const over = await register('too-many', ['fn-1'])
      expect(over.status).toBe(409)
      expect(over.body.message).toBe(
        `at most ${MAX_AGENTS} agents are registered: delete one first (plugins.agents.max_agents)`,
      )
      expect((await register('one-more', ['fn-2'])).status).toBe(200)
      expect((await a.req('DELETE', '/api/v1/agents/one-more', { token: admin })).status).toBe(200)
      expect((await register('too-many', ['fn-1'])).status).toBe(201)
      // Functions per agent were bounded already: 1,001 is 400 naming the field.
      const many = await register('wide', [...FUNCTIONS, 'fn-1000'])
      expect(many.status).toBe(400)
      expect(many.body.message).toContain('body.functions')
    })
  })
})
