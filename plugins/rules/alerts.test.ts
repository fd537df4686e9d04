import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { type TestApp, forEachEngine, makeApp, until } from '../../test/helpers'
import { appOn, httpSink, ownStore } from '../notify/testing'

const escalating = (id: string, timeout: string, type = 'svc.down') => ({
  id,
  match: `type == "${type}"`,
  mode: 'active',
  route: [{ channels: ['pager'] }],
  escalation: { ack_timeout: timeout, to: ['oncall'] },
})

forEachEngine((engine) => {
  let a: TestApp
  let admin: string
  const pager = httpSink()
  const oncall = httpSink()
  beforeAll(async () => {
    a = await makeApp(engine, {
      plugins: {
        'webhook-provider': {},
        notify: {
          channels: {
            pager: { type: 'webhook', url: pager.url },
            oncall: { type: 'webhook', url: oncall.url },
          },
          retry: { base_ms: 10, max_ms: 50 },
        },
        rules: { sync_ms: 30 },
      },
    })
    admin = await a.token('admin')
    await a.req('POST', '/api/v1/rules', { token: admin, body: escalating('esc', '300ms') })
  })
  afterAll(async () => {
    await a.stop()
    pager.stop()
    oncall.stop()
  })
  const as = (method: string, path: string, body?: unknown, token: string | null = admin) =>
    a.req(method, path, { token, body })
  const fire = (alert: string) =>
    as('POST', '/api/v1/notify', {
      type: 'svc.down',
      level: 'error',
      title: `down ${alert}`,
      params: { alert_id: alert },
    })
  const escalated = (alert: string) =>
    oncall.hits.find((h) => (h.body.raw as { params: { alert_id: string } }).params.alert_id === alert)

  describe('acknowledgement', () => {
    test('first ack wins, repeats return the same record; GET shows it; 400, 401, 403', async () => {
      // Only a raised alert can be acknowledged (see the next test).
      for (const alert of ['disk-7', 'disk-8', 'disk-9']) await fire(alert)
      const none = await as('GET', '/api/v1/alerts/disk-7')
      expect(none.body).toEqual({ code: 0, message: 'ok', data: { alert_id: 'disk-7', acknowledged: false } })
      const first = await as('POST', '/api/v1/alerts/disk-7/ack', { acked_by: 'dana' })
      expect(first.status).toBe(200)
      expect(first.body.data).toMatchObject({ alert_id: 'disk-7', acked_by: 'dana', source: 'api' })
      expect(new Date(first.body.data.acked_at).toISOString()).toBe(first.body.data.acked_at)
      const again = await as('POST', '/api/v1/alerts/disk-7/ack', { acked_by: 'eli' })
      expect(again.body.data).toEqual(first.body.data)
      expect((await as('GET', '/api/v1/alerts/disk-7')).body.data).toEqual({
        alert_id: 'disk-7',
        acknowledged: true,
        ack: first.body.data,
      })
      const bare = await as('POST', '/api/v1/alerts/disk-8/ack')
      expect(bare.body.data.acked_by).toBe('admin-user')
      expect((await as('POST', '/api/v1/alerts/disk-9/ack', { acked_by: 7 })).body.message).toContain(
        'body.acked_by',
      )
      expect((await as('POST', '/api/v1/alerts/disk-9/ack', { by: 'x' })).status).toBe(400)
      expect((await as('GET', '/api/v1/alerts/disk-9')).body.data.acknowledged).toBe(false)
      expect((await as('POST', '/api/v1/alerts/disk-9/ack', {}, null)).status).toBe(401)
      expect((await as('GET', '/api/v1/alerts/disk-9', undefined, null)).status).toBe(401)
      const viewer = await a.token('viewer')
      expect((await as('GET', '/api/v1/alerts/disk-9', undefined, viewer)).status).toBe(200)
      expect((await as('POST', '/api/v1/alerts/disk-9/ack', {}, viewer)).status).toBe(403)
      expect((await as('POST', '/api/v1/alerts/disk-9/ack', {}, await a.token('operator'))).status).toBe(200)
    })

    test('an alert never raised is 404 and stays unacknowledged, so once raised it still escalates', async () => {
      const early = await as('POST', '/api/v1/alerts/ghost-1/ack', { acked_by: 'mallory' })
      expect(early.status).toBe(404)
      expect(early.body).toEqual({ code: 404, message: "alert 'ghost-1' not found", data: null })
      expect((await as('GET', '/api/v1/alerts/ghost-1')).body.data.acknowledged).toBe(false)
      expect((await fire('ghost-1')).body.data.accepted).toEqual(['pager'])
      expect(await until(() => escalated('ghost-1'), 5000)).toBeDefined()
      const inc = (await as('GET', '/api/v1/incidents?alert_id=ghost-1')).body.data.incidents[0]
      const full = (await as('GET', `/api/v1/incidents/${inc.id}`)).body.data
      expect(full.acked_at).toBeUndefined()
      expect(full.timeline.map((e: { kind: string }) => e.kind)).toEqual([
        'opened',
        'escalation_armed',
        'escalated',
      ])
      // Raised now, it is acknowledged as any other alert.
      const late = await as('POST', '/api/v1/alerts/ghost-1/ack', { acked_by: 'ops' })
      expect(late.status).toBe(200)
      expect(late.body.data).toMatchObject({ alert_id: 'ghost-1', acked_by: 'ops', source: 'api' })
    })
  })

  describe('escalation', () => {
    test('unacknowledged past ack_timeout, the alert goes to the escalation targets; an ack before cancels it', async () => {
      expect((await fire('e-acked')).body.data.accepted).toEqual(['pager'])
      expect((await as('POST', '/api/v1/alerts/e-acked/ack', { acked_by: 'fay' })).status).toBe(200)
      await fire('e-open')
      const hit = await until(() => escalated('e-open'), 5000)
      expect(hit?.body).toMatchObject({ provider: 'oncall', title: 'Escalation: down e-open' })
      // e-acked was due before e-open, so had it not been cancelled it would have fired first.
      expect(escalated('e-acked')).toBeUndefined()
      const inc = (await as('GET', '/api/v1/incidents?alert_id=e-open')).body.data.incidents[0]
      const full = (await as('GET', `/api/v1/incidents/${inc.id}`)).body.data
      expect(full.timeline.map((e: { kind: string }) => e.kind)).toEqual([
        'opened',
        'escalation_armed',
        'escalated',
      ])
    })

    test('an acknowledgement ends when its alert resolves: the next firing escalates and takes a new one', async () => {
      await fire('e-again')
      expect((await as('POST', '/api/v1/alerts/e-again/ack', { acked_by: 'fay' })).status).toBe(200)
      await as('POST', '/api/v1/notify', {
        type: 'svc.down',
        level: 'error',
        title: 'up e-again',
        params: { alert_id: 'e-again', status: 'resolved' },
      })
      expect((await as('GET', '/api/v1/alerts/e-again')).body.data).toEqual({
        alert_id: 'e-again',
        acknowledged: false,
      })
      await fire('e-again')
      const hit = await until(() => escalated('e-again'), 5000)
      expect(hit?.body).toMatchObject({ title: 'Escalation: down e-again' })
      const ack = await as('POST', '/api/v1/alerts/e-again/ack', { acked_by: 'gus' })
      expect(ack.body.data.acked_by).toBe('gus')
    })
  })
})

forEachEngine((engine) => {
  const pager = httpSink()
  const oncall = httpSink()
  afterAll(() => {
    pager.stop()
    oncall.stop()
  })
  const settings = (syncMs: number) => ({
    'webhook-provider': {},
    notify: {
      channels: { pager: { type: 'webhook', url: pager.url }, oncall: { type: 'webhook', url: oncall.url } },
      retry: { base_ms: 10, max_ms: 50 },
    },
    rules: { sync_ms: syncMs },
  })
  const escalatedFor = (alert: string) =>
    oncall.hits.find((h) => (h.body.raw as { params: { alert_id: string } }).params.alert_id === alert)

  test('an escalation due while the process was down fires after it starts', async () => {
    const store = await ownStore(engine)
    const first = await appOn(store, settings(3_600_000))
    await first.req('POST', '/api/v1/rules', escalating('esc-restart', '1ms', 'rs.down'))
    const r = await first.req('POST', '/api/v1/notify', {
      type: 'rs.down',
      title: 'restart me',
      params: { alert_id: 'rs-1' },
    })
    expect(r.body.data.accepted).toEqual(['pager'])
    await first.stop()
    expect(escalatedFor('rs-1')).toBeUndefined()
    const second = await appOn(store, settings(50))
    try {
      expect(await until(() => escalatedFor('rs-1'), 5000)).toBeDefined()
    } finally {
      await second.stop()
      await store.drop()
    }
  })

  test("one instance's ack cancels the escalation another instance armed; rules written on one show on the other", async () => {
    const store = await ownStore(engine)
    const holder = await appOn(store, settings(40))
    const other = await appOn(store, settings(40))
    try {
      await holder.req('POST', '/api/v1/rules', escalating('esc-shared', '600ms', 'mi.down'))
      await until(async () => (await other.req('GET', '/api/v1/rules/esc-shared')).status === 200)
      const dry = await until(async () => {
        const d = await other.req('POST', '/api/v1/notify?dry_run=true', { type: 'mi.down', title: 'x' })
        return d.body.data.rule === 'esc-shared' ? d : undefined
      })
      expect(dry?.body.data.channels).toEqual(['pager'])
      await holder.req('POST', '/api/v1/notify', {
        type: 'mi.down',
        title: 'acked elsewhere',
        params: { alert_id: 'mi-1' },
      })
      const ack = await other.req('POST', '/api/v1/alerts/mi-1/ack', { acked_by: 'gus' })
      expect(ack.body.data.acked_by).toBe('gus')
      expect((await holder.req('GET', '/api/v1/alerts/mi-1')).body.data.acknowledged).toBe(true)
      await holder.req('POST', '/api/v1/notify', {
        type: 'mi.down',
        title: 'sentinel',
        params: { alert_id: 'mi-2' },
      })
      expect(await until(() => escalatedFor('mi-2'), 5000)).toBeDefined()
      expect(escalatedFor('mi-1')).toBeUndefined()
      expect(
        oncall.hits.filter(
          (h) => (h.body.raw as { params: { alert_id: string } }).params.alert_id === 'mi-2',
        ),
      ).toHaveLength(1)
    } finally {
      await holder.stop()
      await other.stop()
      await store.drop()
    }
  })
})

forEachEngine((engine) => {
  // PostgreSQL carries change notices between instances, so polls can be an hour; SQLite (one
  // instance in production) relies on the poll.
  const pollMs = engine === 'postgres' ? 3_600_000 : 40
  test('a rule, a group and a roster written on one instance apply on another at once', async () => {
    const store = await ownStore(engine)
    const settings = {
      notify: { channels: { audit: { type: 'log' } } },
      rules: { sync_ms: pollMs },
      rosters: { sync_ms: pollMs },
    }
    const one = await appOn(store, settings)
    const two = await appOn(store, settings)
    try {
      await one.req('POST', '/api/v1/groups', { id: 'team', members: [{ channel: 'audit' }] })
      await one.req('POST', '/api/v1/rules', {
        id: 'far',
        match: 'type == "far"',
        mode: 'active',
        route: [{ channels: ['group:team'] }],
        silence: { roster: 'quiet' },
      })
      const dry = () => two.req('POST', '/api/v1/notify?dry_run=true', { type: 'far', title: 'x' })
      const routed = await until(
        async () => ((await dry()).body.data.channels as string[])?.[0] === 'audit',
        3000,
      )
      expect(routed).toBe(true)
      const now = Date.now()
      await one.req('POST', '/api/v1/rosters', {
        id: 'quiet',
        periods: [
          { start: new Date(now - 60_000).toISOString(), end: new Date(now + 600_000).toISOString() },
        ],
      })
      const held = await until(
        async () => ((await dry()).body.data.held as { reason?: string } | undefined)?.reason === 'silenced',
        3000,
      )
      expect(held).toBe(true)
    } finally {
      await one.stop()
      await two.stop()
      await store.drop()
    }
  })
})
