import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { type TestApp, forEachEngine, makeApp } from '../../test/helpers'
import { larkEncrypt, larkSigned } from '../../test/lark'
import { appOn, httpSink, ownStore } from '../notify/testing'

const KEY = 'lark-card-key-7f3a'

const encrypt = (body: unknown, key = KEY) => larkEncrypt(body, key)

forEachEngine((engine) => {
  let a: TestApp
  let admin: string
  const pager = httpSink()
  beforeAll(async () => {
    a = await makeApp(engine, {
      plugins: {
        'webhook-provider': {},
        notify: { channels: { pager: { type: 'webhook', url: pager.url } } },
        rules: { chatcard: { encrypt_key: KEY } },
      },
    })
    admin = await a.token('admin')
    await a.req('POST', '/api/v1/rules', {
      token: admin,
      body: {
        id: 'lag',
        match: 'type == "db.lag" && params.lag > 30',
        mode: 'active',
        route: [{ channels: ['pager'] }],
      },
    })
    await a.req('POST', '/api/v1/rules', {
      token: admin,
      body: { id: 'cpu', match: 'type == "cpu"', mode: 'active', route: [{ channels: ['pager'] }] },
    })
  })
  afterAll(async () => {
    await a.stop()
    pager.stop()
  })
  const as = (method: string, path: string, body?: unknown, token: string | null = admin) =>
    a.req(method, path, { token, body })
  const lag = (alert: string, lagS: number, extra: Record<string, unknown> = {}) =>
    as('POST', '/api/v1/notify', {
      type: 'db.lag',
      level: 'error',
      title: `lag ${alert}`,
      params: { alert_id: alert, lag: lagS, ...extra },
    })
  const incidentOf = async (alert: string) =>
    (await as('GET', `/api/v1/incidents?alert_id=${alert}`)).body.data.incidents

  describe('incidents', () => {
    test('opened by a rule-routed delivery with params.alert_id, counted per event, acked, resolved when the match stops holding', async () => {
      await lag('db-1', 40)
      await lag('db-1', 45)
      await as('POST', '/api/v1/notify', { type: 'db.lag', title: 'no alert id', params: { lag: 99 } })
      await as('POST', '/api/v1/notify', {
        type: 'db.lag',
        title: 'named',
        channels: ['pager'],
        params: { alert_id: 'db-named', lag: 99 },
      })
      expect(await incidentOf('db-named')).toEqual([])
      const [inc] = await incidentOf('db-1')
      expect(inc).toMatchObject({
        rule_id: 'lag',
        alert_id: 'db-1',
        title: 'lag db-1',
        level: 'error',
        events: 2,
        channels: ['pager'],
      })
      expect(inc.acked_at).toBeUndefined()
      expect(inc.resolved_at).toBeUndefined()
      expect((await as('GET', '/api/v1/incidents?status=open&alert_id=db-1')).body.data.count).toBe(1)
      await as('POST', '/api/v1/alerts/db-1/ack', { acked_by: 'hal' })
      expect((await as('GET', '/api/v1/incidents?status=open&alert_id=db-1')).body.data.count).toBe(0)
      expect(
        (await as('GET', '/api/v1/incidents?status=acked&alert_id=db-1')).body.data.incidents[0].acked_at,
      ).toBeDefined()
      await lag('db-1', 12)
      const done = (await as('GET', '/api/v1/incidents?status=resolved&alert_id=db-1')).body.data.incidents
      expect(done).toHaveLength(1)
      const full = (await as('GET', `/api/v1/incidents/${done[0].id}`)).body.data
      expect(full.timeline.map((e: { kind: string }) => e.kind)).toEqual([
        'opened',
        'event',
        'acknowledged',
        'resolved',
      ])
      expect(full.timeline[2].detail).toEqual({ acked_by: 'hal', source: 'api' })
      expect(full.timeline[3].detail.reason).toContain("rule 'lag' no longer matches")
      await lag('db-1', 50)
      const both = await incidentOf('db-1')
      expect(both).toHaveLength(2)
      expect(both[0].resolved_at).toBeUndefined()
      expect(both[0].acked_at).toBeUndefined()
    })

    test('a notification with params.status "resolved" resolves the alert', async () => {
      await as('POST', '/api/v1/notify', {
        type: 'cpu',
        level: 'warning',
        title: 'cpu hot',
        params: { alert_id: 'cpu-1' },
      })
      await as('POST', '/api/v1/notify', {
        type: 'cpu',
        level: 'info',
        title: 'cpu ok',
        params: { alert_id: 'cpu-1', status: 'resolved' },
      })
      const [inc] = await incidentOf('cpu-1')
      expect(inc.resolved_at).toBeDefined()
      expect(inc.events).toBe(1)
    })

    test('list: newest first, rule_id filter, limit, status all; bad status or limit 400; unknown id 404; stats', async () => {
      const all = (await as('GET', '/api/v1/incidents?status=all')).body.data
      expect(all.count).toBe(all.incidents.length)
      const opened = all.incidents.map((i: { opened_at: string }) => i.opened_at)
      expect([...opened].sort().reverse()).toEqual(opened)
      expect((await as('GET', '/api/v1/incidents?limit=1')).body.data.incidents).toHaveLength(1)
      const cpu = (await as('GET', '/api/v1/incidents?rule_id=cpu')).body.data.incidents
      expect(cpu.every((i: { rule_id: string }) => i.rule_id === 'cpu')).toBe(true)
      for (const q of ['status=closed', 'limit=0', 'limit=1001', 'limit=ten', 'limit=2.5'])
        expect((await as('GET', `/api/v1/incidents?${q}`)).body.message).toContain(`query.${q.split('=')[0]}`)
      expect((await as('GET', '/api/v1/incidents/nope')).status).toBe(404)
      const stats = (await as('GET', '/api/v1/incidents/stats')).body.data
      expect(stats).toMatchObject({ total: all.count, resolved: 2, acked: 0, open: 1 })
      expect(stats.mtta.count).toBe(1)
      expect(stats.mttr.count).toBe(2)
      expect(stats.mttr.mean_s).toBeGreaterThanOrEqual(0)
      expect((await as('GET', '/api/v1/incidents/stats?since=later')).status).toBe(400)
    })

    test('no token 401; an application token without the query scope 403', async () => {
      expect((await as('GET', '/api/v1/incidents', undefined, null)).status).toBe(401)
      const tok = await as('POST', '/api/v1/app-tokens', { name: 'ci', scopes: ['trigger'] })
      expect(tok.status).toBe(200)
      const r = await a.req('GET', '/api/v1/incidents', { headers: { 'x-app-token': tok.body.data.token } })
      expect(r.status).toBe(403)
      const ok = await as('POST', '/api/v1/app-tokens', { name: 'dash', scopes: ['query'] })
      expect(
        (await a.req('GET', '/api/v1/incidents', { headers: { 'x-app-token': ok.body.data.token } })).status,
      ).toBe(200)
    })
  })

  describe('chat-card callback', () => {
    /** Signed as Lark signs a callback when an Encrypt Key is set (SHA-256 of time, nonce, key, raw body). */
    const cb = (body: unknown, headers: Record<string, string> = {}) =>
      a.req('POST', '/api/v1/callbacks/chatcard', {
        body,
        headers: larkSigned(KEY, body, headers),
      })

    test('url_verification echoes the challenge when encrypted with the key, without a Bearer token', async () => {
      // Only a key is configured: plaintext proves nothing (issue 34 point 4).
      expect((await cb({ type: 'url_verification', challenge: 'c-123' })).status).toBe(401)
      const enc = await cb({ encrypt: encrypt({ type: 'url_verification', challenge: 'c-456' }) })
      expect(enc.body.data).toEqual({ challenge: 'c-456' })
    })

    test('the confirm action acknowledges the alert in the ack store and its incident; first ack wins', async () => {
      await lag('db-card', 60)
      const r = await cb(
        {
          encrypt: encrypt({
            open_id: 'ou_ivy',
            action: { tag: 'button', value: { alert_id: 'db-card', action: 'confirm' } },
          }),
          // A 1.0 card callback's time and nonce come in Lark's request headers.
        },
        {
          'x-lark-request-timestamp': String(Math.floor(Date.now() / 1000)),
          'x-lark-request-nonce': 'n-card-1',
        },
      )
      expect(r.status).toBe(200)
      expect(r.body).toEqual({
        code: 0,
        message: 'ok',
        data: { alert_id: 'db-card', acknowledged: true, acked_by: 'ou_ivy' },
      })
      const v2 = await cb({
        encrypt: encrypt({
          schema: '2.0',
          header: { create_time: String(Date.now()), event_id: 'ev-card-2' },
          event: { operator: { open_id: 'ou_jo' }, action: { value: { alert_id: 'db-card' } } },
        }),
      })
      expect(v2.body.data).toEqual({ alert_id: 'db-card', acknowledged: true, acked_by: 'ou_ivy' })
      expect((await as('GET', '/api/v1/alerts/db-card')).body.data.ack).toMatchObject({
        acked_by: 'ou_ivy',
        source: 'chatcard',
      })
      const [inc] = await incidentOf('db-card')
      expect(inc.acked_at).toBeDefined()
    })

    test('bad callbacks: a wrong key, garbage or plaintext 401; no alert id 400, an unknown action 400', async () => {
      expect(
        (await cb({ encrypt: encrypt({ type: 'url_verification', challenge: 'x' }, 'other-key') })).status,
      ).toBe(401)
      expect((await cb({ encrypt: 'bm90IGEgY2lwaGVy' })).status).toBe(401)
      expect((await cb({ encrypt: 42 })).status).toBe(401)
      expect((await cb({ action: { value: { alert_id: 'z' } } })).status).toBe(401)
      expect((await cb({ encrypt: encrypt({ action: { value: {} } }) })).body.message).toContain('alert_id')
      expect(
        (await cb({ encrypt: encrypt({ action: { value: { alert_id: 'z', action: 'snooze' } } }) })).status,
      ).toBe(400)
      expect((await cb([1, 2])).status).toBe(401)
      expect((await as('GET', '/api/v1/alerts/z')).body.data.acknowledged).toBe(false)
    })
  })
})

forEachEngine((engine) => {
  test('with a token and no key an encrypted callback answers 501; the token guards plaintext', async () => {
    const a = await makeApp(engine, {
      plugins: { notify: {}, rules: { chatcard: { verification_token: 'vt-1' } } },
    })
    try {
      const enc = await a.req('POST', '/api/v1/callbacks/chatcard', {
        body: { encrypt: encrypt({ type: 'url_verification', challenge: 'x' }) },
      })
      expect(enc.status).toBe(501)
      expect(enc.body.code).toBe(501)
      const wrong = await a.req('POST', '/api/v1/callbacks/chatcard', {
        body: { type: 'url_verification', challenge: 'x', token: 'no' },
      })
      expect(wrong.status).toBe(401)
      const right = await a.req('POST', '/api/v1/callbacks/chatcard', {
        body: { type: 'url_verification', challenge: 'x', token: 'vt-1' },
      })
      expect(right.body.data).toEqual({ challenge: 'x' })
    } finally {
      await a.stop()
    }
  })

  test('incidents, acknowledgements, rules and groups survive a restart', async () => {
    const store = await ownStore(engine)
    const sink = httpSink()
    const settings = {
      'webhook-provider': {},
      notify: { channels: { pager: { type: 'webhook', url: sink.url } } },
      rules: {},
    }
    const first = await appOn(store, settings)
    await first.req('POST', '/api/v1/groups', { id: 'g1', members: [{ channel: 'pager' }] })
    await first.req('POST', '/api/v1/rules', {
      id: 'keep',
      match: 'type == "k"',
      mode: 'active',
      route: [{ channels: ['group:g1'] }],
    })
    await first.req('POST', '/api/v1/notify', { type: 'k', title: 'kept', params: { alert_id: 'k-1' } })
    await first.req('POST', '/api/v1/alerts/k-1/ack', { acked_by: 'kim' })
    await first.stop()
    const second = await appOn(store, settings)
    try {
      const inc = (await second.req('GET', '/api/v1/incidents?alert_id=k-1')).body.data.incidents as {
        acked_at?: string
      }[]
      expect(inc).toHaveLength(1)
      expect(inc[0].acked_at).toBeDefined()
      expect((await second.req('GET', '/api/v1/alerts/k-1')).body.data.ack).toMatchObject({ acked_by: 'kim' })
      const dry = await second.req('POST', '/api/v1/notify?dry_run=true', { type: 'k', title: 'x' })
      expect(dry.body.data).toMatchObject({ rule: 'keep', channels: ['pager'] })
    } finally {
      await second.stop()
      await store.drop()
      sink.stop()
    }
  })
})
