import { afterAll, beforeAll, expect, spyOn, test } from 'bun:test'
import { RuleEngine } from '../../plugins/rules/engine'
import { type TestApp, forEachEngine, makeApp } from '../helpers'
import { SECURITY_APP, allPluginsWith } from './lib'

/*
 * The rules audit, replayed as its attackers made it: a trigger-scope server key sending
 * notifications whose alert ids are megabytes long, held by a rule with `for`, stored in
 * incidents and escalations.
 */
forEachEngine((engine) => {
  let a: TestApp
  let admin: string
  let trigger: Record<string, string>
  beforeAll(async () => {
    a = await makeApp(engine, { ...SECURITY_APP, plugins: allPluginsWith() })
    admin = await a.token('admin')
    const key = await a.req('POST', '/api/v1/server-keys', {
      token: admin,
      body: { name: 'alerts', scopes: ['trigger'] },
    })
    trigger = { 'x-api-key': key.body.data.key }
  })
  afterAll(() => a.stop())

  const notify = (body: Record<string, unknown>) =>
    a.req('POST', '/api/v1/notify', { headers: trigger, body: { level: 'error', title: 'x', ...body } })

  test("a `for` rule's pending state holds a long alert id as its hash, not the id", async () => {
    const rule = { id: 'pend', match: 'type == "pend"', mode: 'active', for: '1h', priority: 100 }
    expect((await a.req('POST', '/api/v1/rules', { token: admin, body: rule })).status).toBe(200)
    const evaluate = spyOn(RuleEngine.prototype, 'evaluate')
    try {
      const big = 'A'.repeat(1024 * 1024)
      for (let i = 0; i < 3; i++) {
        const r = await notify({ type: 'pend', params: { alert_id: `${i}-${big}` } })
        expect(r.body.data.held.reason).toBe('pending')
      }
      // The same long id again is the same pending state, not a fourth.
      expect((await notify({ type: 'pend', params: { alert_id: `0-${big}` } })).body.data.held.reason).toBe(
        'pending',
      )
      const held = evaluate.mock.contexts[0] as unknown as { pending: Map<string, unknown> }
      const keys = [...held.pending.keys()].filter((k) => k.startsWith('pend\u0000'))
      expect(keys).toHaveLength(3)
      expect(Math.max(...keys.map((k) => k.length))).toBeLessThanOrEqual(600)
    } finally {
      evaluate.mockRestore()
    }
  })
})
