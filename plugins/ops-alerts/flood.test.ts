import { afterAll, beforeAll, describe, expect, spyOn, test } from 'bun:test'
import type { AlertFired } from '../../core/events'
import { type TestApp, forEachEngine, makeApp, until } from '../../test/helpers'
import { Evaluator, MAX_FIRED, MAX_FIRED_PER_EVALUATION } from './evaluate'

/**
 * Audit 19 F5: 500 rules of 50 series each with `cooldownSeconds: 0` raised 25,000 alerts an
 * evaluation, every 30 s, each to every channel; and POST /ops/alerts/evaluate ran once per caller.
 */
forEachEngine((engine) => {
  let a: TestApp
  let admin: string
  const fired: AlertFired[] = []
  const rule = (extra: Record<string, unknown> = {}) => ({
    name: 'flood',
    metric: 'svc_fleet_test_load',
    operator: 'gt',
    threshold: -1,
    level: 'warning',
    ...extra,
  })
  const create = (body: Record<string, unknown>) =>
    a.req('POST', '/api/v1/ops/alerts', { token: admin, body })
  const evaluate = async () =>
    (await a.req('POST', '/api/v1/ops/alerts/evaluate', { token: admin })).body.data
  const clear = async () => {
    for (const r of (await a.req('GET', '/api/v1/ops/alerts', { token: admin })).body.data)
      await a.req('DELETE', `/api/v1/ops/alerts/${r.id}`, { token: admin })
  }

  beforeAll(async () => {
    // An interval longer than the tests: the scheduled evaluation never runs during them.
    a = await makeApp(engine, { plugins: { 'ops-alerts': { eval_interval_s: 3600 } } })
    admin = await a.token('admin')
    a.bus.on('alert.fired', (e) => {
      fired.push(e)
    })
    // 40 series of one metric.
    const load = a.metrics.gauge('svc_fleet_test_load', 'test series', ['n'])
    for (let i = 0; i < 40; i++) load.set({ n: String(i).padStart(2, '0') }, i)
  })
  afterAll(() => a.stop())

  describe('ops alert floods', () => {
    test('a cooldown below the evaluation interval is refused naming body.cooldownSeconds; absent, it is the interval', async () => {
      for (const cooldownSeconds of [0, 3599]) {
        const r = await create(rule({ cooldownSeconds }))
        expect(r.status).toBe(400)
        expect(r.body.message).toBe(
          'body.cooldownSeconds: at least 3600 (plugins.ops-alerts.eval_interval_s): a series alerts at most once an evaluation',
        )
      }
      const made = await create(rule())
      expect([made.status, made.body.data.cooldownSeconds]).toEqual([201, 3600])
      const put = await a.req('PUT', `/api/v1/ops/alerts/${made.body.data.id}`, {
        token: admin,
        body: { cooldownSeconds: 0 },
      })
      expect(put.status).toBe(400)
      expect(put.body.message).toContain('body.cooldownSeconds')
      // A rule stored with a shorter cooldown (before the floor) counts as the interval.
      await a.db.run('UPDATE ops_alert_rules SET cooldown_s = 0 WHERE id = ?', [made.body.data.id])
      expect((await evaluate()).fired).toHaveLength(40)
      expect((await evaluate()).fired).toHaveLength(0)
      await clear()
    })

    test('an evaluation raises at most 100 alerts over all rules; the rest are counted, logged and told once', async () => {
      for (let i = 0; i < 3; i++) expect((await create(rule({ name: `flood ${i}` }))).status).toBe(201)
      const before = fired.length
      const r = await evaluate()
      // 40 + 40 + 20: the third rule's other 20 series are held back.
      expect(r.fired).toHaveLength(MAX_FIRED_PER_EVALUATION)
      expect(r.held_back).toBe(20)
      const mine = fired.slice(before)
      expect(mine.filter((e) => e.alert_id !== 'ops-alerts:held-back')).toHaveLength(MAX_FIRED_PER_EVALUATION)
      const told = mine.filter((e) => e.alert_id === 'ops-alerts:held-back')
      expect(told).toHaveLength(1)
      expect(told[0]).toMatchObject({
        level: 'warning',
        params: { held_back: 20, rules: 1, per_rule: MAX_FIRED, per_evaluation: MAX_FIRED_PER_EVALUATION },
      })
      expect(told[0].body).toContain('20 more series of 1 rule')
      const metrics = (await a.req('GET', '/api/v1/monitoring/metrics', { token: admin })).body.data
      expect(metrics.svc_ops_alerts_held_back_total).toBe(20)
      // Held back, not claimed: the next evaluation raises them (the others are in their cooldown).
      const next = await evaluate()
      expect([next.fired.length, next.held_back]).toEqual([20, 0])
      await clear()
    })

    test('POST /ops/alerts/evaluate is single-flight: a second caller shares the evaluation under way', async () => {
      expect((await create(rule({ name: 'shared' }))).status).toBe(201)
      let open: () => void = () => undefined
      const gate = new Promise<void>((r) => {
        open = r
      })
      const original = a.metrics.json.bind(a.metrics)
      const json = spyOn(a.metrics, 'json').mockImplementation(async (prefix?: string) => {
        await gate
        return original(prefix)
      })
      const run = spyOn(Evaluator.prototype, 'run')
      try {
        const first = evaluate()
        await until(() => json.mock.calls.length === 1, { what: 'the first evaluation reading the metrics' })
        const second = evaluate()
        await until(() => run.mock.calls.length === 2, { what: 'the second request asking to evaluate' })
        open()
        const [x, y] = await Promise.all([first, second])
        expect(json.mock.calls).toHaveLength(1)
        expect(x.fired).toHaveLength(40)
        expect(y).toEqual(x)
      } finally {
        open()
        json.mockRestore()
        run.mockRestore()
      }
      await clear()
    })
  })
})
