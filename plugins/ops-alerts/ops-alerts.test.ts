import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import type { AlertFired } from '../../core/events'
import { type TestApp, forEachEngine, makeApp } from '../../test/helpers'
import { Evaluator } from './evaluate'
import { alertStore } from './store'

forEachEngine((engine) => {
  let a: TestApp
  let admin: string
  const fired: AlertFired[] = []
  const rule = (extra: Record<string, unknown> = {}) => ({
    name: 'Database answers',
    metric: 'svc_db_up',
    operator: 'gte',
    threshold: 1,
    level: 'warning',
    ...extra,
  })
  const create = async (body: Record<string, unknown>) => {
    const r = await a.req('POST', '/api/v1/ops/alerts', { token: admin, body })
    expect(r.status).toBe(201)
    return r.body.data
  }
  const evaluate = async () =>
    (await a.req('POST', '/api/v1/ops/alerts/evaluate', { token: admin })).body.data.fired

  beforeAll(async () => {
    a = await makeApp(engine, { plugins: { audit: {}, 'ops-alerts': { eval_interval_s: 0 } } })
    admin = await a.token('admin')
    a.bus.on('alert.fired', (e) => {
      fired.push(e)
    })
  })
  afterAll(() => a.stop())

  describe('ops alert rules', () => {
    test('create fills forCount 1, cooldown 300 and enabled; forCount holds back, cooldown stops repeats', async () => {
      const r = await create(rule({ forCount: 2, cooldownSeconds: 3600 }))
      expect(r).toMatchObject({ ...rule(), labels: {}, forCount: 2, cooldownSeconds: 3600, enabled: true })
      const plain = await create(rule({ name: 'plain', threshold: 5 }))
      expect(plain).toMatchObject({ forCount: 1, cooldownSeconds: 300 })
      expect(await evaluate()).toEqual([])
      const second = await evaluate()
      expect(second).toEqual([{ rule_id: r.id, series: '', value: 1 }])
      const e = fired.find((f) => f.params.rule_id === r.id)!
      expect(e).toMatchObject({
        alert_id: `ops-alerts:${r.id}`,
        source: 'ops-alerts',
        level: 'warning',
        title: 'Database answers',
        params: { metric: 'svc_db_up', value: 1, threshold: 1, operator: 'gte' },
      })
      expect(e.body).toBe('svc_db_up is 1 (>= 1) for 2 evaluations')
      // Within the cooldown: no repeat, however long the condition holds.
      expect(await evaluate()).toEqual([])
      const got = (await a.req('GET', `/api/v1/ops/alerts/${r.id}`, { token: admin })).body.data
      expect(got.fired).toEqual([{ series: '', lastFiredAt: expect.any(String), lastValue: 1 }])
      // The threshold-5 rule never held.
      expect(fired.some((f) => f.params.rule_id === plain.id)).toBe(false)
      for (const x of [r, plain]) await a.req('DELETE', `/api/v1/ops/alerts/${x.id}`, { token: admin })
    })

    test('labelled metrics: each matching series fires on its own; a cooldown of 0 fires every time', async () => {
      const r = await create(
        rule({
          name: 'check up',
          metric: 'svc_health_check_up',
          labels: { check: 'database' },
          cooldownSeconds: 0,
          level: 'critical',
        }),
      )
      const first = await evaluate()
      expect(first).toEqual([{ rule_id: r.id, series: 'check=database', value: 1 }])
      expect(fired.at(-1)).toMatchObject({
        alert_id: `ops-alerts:${r.id}:check=database`,
        params: { check: 'database' },
      })
      expect(await evaluate()).toHaveLength(1)
      // Disabled rules are not evaluated; a partial update changes only what it names.
      const upd = await a.req('PUT', `/api/v1/ops/alerts/${r.id}`, { token: admin, body: { enabled: false } })
      expect(upd.body.data).toMatchObject({
        enabled: false,
        level: 'critical',
        labels: { check: 'database' },
        cooldownSeconds: 0,
      })
      expect(await evaluate()).toEqual([])
      await a.req('DELETE', `/api/v1/ops/alerts/${r.id}`, { token: admin })
    })

    test('two instances evaluating the same rule on one store raise it once per cooldown', async () => {
      const r = await create(rule({ name: 'shared', cooldownSeconds: 600 }))
      const other = new Evaluator(alertStore(a.db), a.metrics, a.bus)
      const before = fired.filter((f) => f.params.rule_id === r.id).length
      const [x, y] = await Promise.all([evaluate(), other.run()])
      expect(x.length + y.fired.length).toBe(1)
      expect(fired.filter((f) => f.params.rule_id === r.id).length - before).toBe(1)
      await a.req('DELETE', `/api/v1/ops/alerts/${r.id}`, { token: admin })
    })

    test('bad input 400 naming the field; 404; 401; viewer 403; changes audited', async () => {
      for (const [body, field] of [
        [rule({ operator: 'eq' }), 'body.operator'],
        [rule({ metric: 'db_up' }), 'body.metric'],
        [rule({ threshold: '1' }), 'body.threshold'],
        [rule({ forCount: 0 }), 'body.forCount'],
        [rule({ level: 'fatal' }), 'body.level'],
        [rule({ name: undefined }), 'body.name'],
        [rule({ colour: 'red' }), 'body.colour'],
        // Bounded: each evaluation reads every rule.
        [
          rule({ labels: Object.fromEntries(Array.from({ length: 17 }, (_, i) => [`l${i}`, 'v'])) }),
          'body.labels',
        ],
        [rule({ labels: { host: 'h'.repeat(257) } }), 'body.labels.host'],
        [rule({ cooldownSeconds: 2_592_001 }), 'body.cooldownSeconds'],
      ] as const) {
        const r = await a.req('POST', '/api/v1/ops/alerts', { token: admin, body })
        expect(r.status, field).toBe(400)
        expect(r.body.message, field).toContain(field)
      }
      expect((await a.req('GET', '/api/v1/ops/alerts', { token: admin })).body.data).toEqual([])
      expect((await a.req('GET', '/api/v1/ops/alerts/nope', { token: admin })).status).toBe(404)
      expect(
        (await a.req('PUT', '/api/v1/ops/alerts/nope', { token: admin, body: { threshold: 2 } })).status,
      ).toBe(404)
      expect((await a.req('DELETE', '/api/v1/ops/alerts/nope', { token: admin })).status).toBe(404)
      expect((await a.req('POST', '/api/v1/ops/alerts', { body: { junk: true } })).status).toBe(401)
      const viewer = await a.token('viewer')
      expect((await a.req('POST', '/api/v1/ops/alerts', { token: viewer, body: rule() })).status).toBe(403)
      expect((await a.req('POST', '/api/v1/ops/alerts/evaluate', { token: viewer })).status).toBe(403)
      expect((await a.req('GET', '/api/v1/ops/alerts', { token: viewer })).status).toBe(200)
      const r = await create(rule())
      await a.req('PUT', `/api/v1/ops/alerts/${r.id}`, {
        token: await a.token('operator'),
        body: { threshold: 0.5 },
      })
      const end = Date.now() + 5000
      let actions: string[] = []
      while (Date.now() < end) {
        actions = (await a.req('GET', `/api/v1/audit?target=${r.id}`, { token: admin })).body.data.items.map(
          (e: { action: string }) => e.action,
        )
        if (actions.length >= 2) break
        await Bun.sleep(20)
      }
      expect(actions).toEqual(['ops_alerts.update', 'ops_alerts.create'])
    })

    test('a series of any length fires and keeps its cooldown on every engine (MySQL keys are 191 characters)', async () => {
      // An agent of a 128-character id in a fleet: its series passed 191 characters and every
      // evaluation failed on MariaDB, stopping the rules after it (eighteenth session's audit).
      const r = await create(rule({ name: 'long series' }))
      const store = alertStore(a.db)
      const series = `agent_id=${'a'.repeat(128)},env=staging,game_id=${'g'.repeat(60)}`
      const now = Date.now()
      expect(await store.claim(r.id, series, 1, now, 60_000)).toBe(true)
      expect(await store.claim(r.id, series, 1, now + 1, 60_000)).toBe(false)
      expect(await store.claim(r.id, `${series}x`, 1, now + 1, 60_000)).toBe(true)
      const got = (await a.req('GET', `/api/v1/ops/alerts/${r.id}`, { token: admin })).body.data
      expect(got.fired.map((f: { series: string }) => f.series).sort()).toEqual([series, `${series}x`])
      await a.req('DELETE', `/api/v1/ops/alerts/${r.id}`, { token: admin })
    })
  })
})
