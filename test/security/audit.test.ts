import { afterAll, beforeAll, expect, test } from 'bun:test'
import { derivedAction } from '../../core/audit'
import { trainedClassifier } from '../../plugins/ml/testing'
import { httpSink } from '../../plugins/notify/testing'
import { type TestApp, forEachEngine, until } from '../helpers'
import { surfaceApp } from './surface-app'

/*
 * Issue 34 point 9: every write is audited. Reported: rules, rosters, notify sends, alert and
 * chat-card acks, games, environments, experiment publishes and ML writes left no entry, and a
 * channel change showed only as `http.put`.
 */

const FROM = '198.51.100.23'

interface Entry {
  at: string
  actor: { kind: string; id?: string; name?: string }
  action: string
  target?: string
  ip?: string
  ok: boolean
  details?: Record<string, unknown>
}

forEachEngine((engine) => {
  const sink = httpSink()
  let a: TestApp
  let admin: string
  beforeAll(async () => {
    a = await surfaceApp(engine, {
      config: { server: { trust_forwarded_for: true } },
      plugins: { experiments: {}, notify: { channels: { pager: { type: 'log' } } } },
    })
    admin = await a.token('admin')
  })
  afterAll(async () => {
    await a.stop()
    sink.stop()
  })
  const as = async (method: string, path: string, body?: unknown) => {
    const r = await a.req(method, path, { token: admin, body, headers: { 'x-forwarded-for': FROM } })
    expect(r.status, `${method} ${path}: ${JSON.stringify(r.body)}`).toBeLessThan(300)
    return r.body
  }
  const entries = async (): Promise<Entry[]> =>
    (await a.req('GET', '/api/v1/audit?size=500', { token: admin })).body.data.items
  /** The entry of `action` on `target`, once the bus has delivered it. */
  const entry = (action: string, target: string) =>
    until(async () => (await entries()).find((e) => e.action === action && e.target === target), 10_000)

  test('each write names who, a readable action and target, when and from where', async () => {
    const t0 = Date.now()
    const game = await as('POST', '/api/games', {
      name: 'Audit Arena',
      genre: 'PUZZLE',
      platforms: ['IOS'],
      timezone: 'UTC',
      defaultCurrency: 'USD',
    })
    await as('PUT', `/api/games/${game.id}`, { description: 'audited' })
    await as('POST', `/api/games/${game.id}/environments`, { name: 'qa', type: 'STAGING', displayName: 'QA' })
    const exp = await as('POST', '/api/experiments', {
      gameId: game.id,
      environment: 'prod',
      name: 'audited experiment',
      salt: 's-1',
      config: {
        variants: [
          { name: 'control', weight: 50 },
          { name: 'treatment', weight: 50 },
        ],
      },
    })
    await as('POST', `/api/experiments/${exp.id}/publish`)
    await as('POST', '/api/v1/rules', {
      id: 'disk',
      match: 'type == "disk"',
      mode: 'active',
      route: [{ channels: ['pager'] }],
    })
    await as('POST', '/api/v1/rosters', {
      id: 'night',
      periods: [{ start: '2030-01-01T00:00:00Z', end: '2030-01-02T00:00:00Z' }],
    })
    const sent = await as('POST', '/api/v1/notify', {
      type: 'disk',
      title: 'disk full',
      params: { alert_id: 'disk-9' },
    })
    await as('POST', '/api/v1/alerts/disk-9/ack', {})

    const expected: Array<[string, string]> = [
      ['game.create', `game:${game.id}`],
      ['game.update', `game:${game.id}`],
      ['environment.create', `game:${game.id}/environment:qa`],
      ['experiment.create', `experiment:${exp.id}`],
      ['experiment.publish', `experiment:${exp.id}`],
      ['rule.create', 'rule:disk'],
      ['roster.create', 'roster:night'],
      ['notification.send', `notification:${sent.data.notification_id}`],
      ['alert.ack', 'alert:disk-9'],
    ]
    for (const [action, target] of expected) {
      const e = await entry(action, target)
      expect(e, action).toMatchObject({ actor: { kind: 'user', name: 'admin-user' }, ip: FROM, ok: true })
      expect(Date.parse(e!.at)).toBeGreaterThanOrEqual(t0 - 1000)
    }
    // The body as its schema declares it: the rule's fields, not the notification's free-form params.
    expect((await entry('rule.create', 'rule:disk'))!.details).toMatchObject({
      status: 200,
      body: { id: 'disk', match: 'type == "disk"', mode: 'active' },
    })
    expect(
      (await entry('notification.send', `notification:${sent.data.notification_id}`))!.details,
    ).toMatchObject({
      body: { type: 'disk', title: 'disk full', params: { alert_id: '(not recorded)' } },
    })
  })

  test('a channel change names the channel, with before and after masked by its schema', async () => {
    await as('PUT', '/api/v1/config/ops-hook', {
      type: 'webhook',
      config: {
        url: `${sink.url}?token=tok-Audit-4411`,
        headers: { Authorization: 'Bearer hdr-Audit-7702' },
      },
    })
    await as('PUT', '/api/v1/config/ops-hook', {
      config: {
        url: `${sink.url}?token=tok-Audit-4411`,
        headers: { Authorization: 'Bearer hdr-Audit-7702' },
        timeout_ms: 900,
      },
    })
    await as('POST', '/api/v1/providers/ops-hook/disable')
    const created = await entry('channel.create', 'channel:ops-hook')
    const updated = await entry('channel.update', 'channel:ops-hook')
    expect(await entry('channel.disable', 'channel:ops-hook')).toBeDefined()
    expect(updated!.details).toMatchObject({
      before: { config: { headers: { Authorization: 'set:7702' } } },
      after: { config: { timeout_ms: 900 } },
    })
    const text = JSON.stringify([created, updated])
    expect(text).not.toContain('hdr-Audit')
    expect(text).not.toContain('tok-Audit')
    expect((await entries()).some((e) => e.action.startsWith('http.'))).toBe(false)
  })

  test('ML writes are audited, the serving endpoint masked; predictions are not', async () => {
    const game = await as('POST', '/api/games', {
      name: 'Audit ML',
      genre: 'PUZZLE',
      platforms: ['IOS'],
      timezone: 'UTC',
      defaultCurrency: 'USD',
    })
    const { model } = await trainedClassifier(a, admin, game.id, 5, undefined, 200)
    await as('POST', `/api/ml-models/${model.id}/deploy`, {
      servingEndpoint: `${sink.url}?key=ml-Audit-5150`,
    })
    await a.req('POST', `/api/ml-models/${model.id}/predict`, {
      token: admin,
      body: { features: { sessions: 1, days_since_purchase: 2 } },
    })
    expect(await entry('ml_model.create', `ml_model:${model.id}`)).toBeDefined()
    expect(await entry('ml_model.train', `ml_model:${model.id}`)).toBeDefined()
    const deploy = await entry('ml_model.deploy', `ml_model:${model.id}`)
    expect(JSON.stringify(deploy)).not.toContain('ml-Audit')
    expect((deploy!.details!.body as { servingEndpoint: string }).servingEndpoint).toContain('key=set%3A5150')
    expect((await entries()).some((e) => e.action === 'ml_model.predict')).toBe(false)
  })

  test("a refused write of a known caller is recorded too; a stranger's 401 is not", async () => {
    const viewer = await a.token('viewer')
    expect((await a.req('DELETE', '/api/v1/rules/disk', { token: viewer })).status).toBe(403)
    expect((await a.req('DELETE', '/api/v1/rules/disk')).status).toBe(401)
    const refused = await until(async () =>
      (await entries()).find((e) => e.action === 'rule.delete' && e.actor.name === 'viewer-user'),
    )
    expect(refused).toMatchObject({ ok: false, target: 'rule:disk', details: { status: 403 } })
    expect((await entries()).filter((e) => e.action === 'rule.delete')).toHaveLength(1)
  })

  test('every write route an operator may call names a readable action (a new route is covered the day it lands)', () => {
    const unnamed: string[] = []
    for (const r of a.app.routes as unknown as Array<{
      method: string
      path: string
      hooks: { detail?: Record<string, unknown> }
    }>) {
      if (['GET', 'HEAD', 'OPTIONS'].includes(r.method)) continue
      const security = (r.hooks.detail?.security ?? []) as Array<Record<string, unknown>>
      if (!security.some((s) => 'bearer' in s || 'appToken' in s)) continue
      const spec = r.hooks.detail?.['x-audit']
      if (spec === false) continue
      const action =
        typeof spec === 'string'
          ? spec
          : ((spec as { action?: string })?.action ?? derivedAction(r.method, r.path, {}).action)
      if (!/^[a-z][a-z_]*\.[a-z][a-z_]*$/.test(action) || action.startsWith('request.'))
        unnamed.push(`${r.method} ${r.path}: ${action}`)
    }
    expect(unnamed).toEqual([])
  })
})
