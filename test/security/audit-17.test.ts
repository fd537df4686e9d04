import { afterAll, beforeAll, expect, test } from 'bun:test'
import { SseReader } from '../../plugins/analytics/realtime/realtime-testing'
import { signed } from '../../plugins/ingest/testing'
import { KEEP_ALIVE_MS } from '../../plugins/site/routes'
import { type TestApp, forEachEngine, makeApp, until } from '../helpers'
import { ADMIN_TOKEN, CONFIG, GAME, SECURITY_APP, allPluginsWith } from './lib'

/*
 * The seventeenth session's audits, replayed as their attackers made them: any viewer reading a
 * notification's params named as secrets off the delivery log and the in-app stream; a query
 * parameter writing events of its own into a realtime stream; a viewer's 9 MB funnel body; the
 * SDK key (public, in every game client) reading an unreleased experiment's variants; the shared
 * signing secret (in every client that uses it) writing events and refunds into a game that has a
 * secret of its own.
 */
forEachEngine((engine) => {
  let a: TestApp
  let admin: string
  let viewer: string
  beforeAll(async () => {
    a = await makeApp(engine, { ...SECURITY_APP, plugins: allPluginsWith() })
    admin = await a.token('admin')
    viewer = await a.token('viewer')
  })
  afterAll(() => a.stop())

  const secrets = { password: 'Param-Pw-5512', token: 'Param-Tok-7781' }
  const notification = (channel: string) => ({
    type: 'reset',
    channels: [channel],
    title: 'Password reset',
    body: 'requested by {{who}}',
    params: { ...secrets, who: 'mina' },
    data: { api_key: 'Data-Key-9934', ticket: 'T-1' },
  })

  test("a delivery's params and data named as secrets read 'set' to every role; the rest as sent", async () => {
    expect(
      (await a.req('POST', '/api/v1/notify', { token: admin, body: notification('audit') })).status,
    ).toBe(200)
    const list = await a.req('GET', '/api/v1/logs', { token: viewer })
    const id = list.body.data.logs.find((l: { title: string }) => l.title === 'Password reset').id
    const one = await a.req('GET', `/api/v1/logs/${id}`, { token: viewer })
    expect(one.status).toBe(200)
    expect(one.body.data.raw).toMatchObject({
      params: { password: 'set', token: 'set', who: 'mina' },
      data: { api_key: 'set', ticket: 'T-1' },
    })
    expect(JSON.stringify(one.body)).not.toMatch(/Param-Pw|Param-Tok|Data-Key/)
  })

  test("an in-app message keeps a param named as a secret 'set', in the list and on the stream", async () => {
    const res = await fetch(`${a.listen()}/api/v1/site/messages/stream?token=${viewer}`)
    const sse = new SseReader(res.body!)
    await sse.next()
    expect(
      (await a.req('POST', '/api/v1/notify', { token: admin, body: notification('site.inapp') })).status,
    ).toBe(200)
    const pushed = await sse.next((f) => f.event === 'message')
    expect(pushed.data).not.toMatch(/Param-Pw|Param-Tok/)
    expect(JSON.parse(pushed.data!).data).toMatchObject({ password: 'set', token: 'set', who: 'mina' })
    await sse.cancel()
    const listed = await until(async () => {
      const r = await a.req('GET', '/api/v1/site/messages', { token: viewer })
      return JSON.stringify(r.body).includes('mina') && r
    })
    expect(JSON.stringify(listed.body)).not.toMatch(/Param-Pw|Param-Tok/)
    // Under Bun's idle timeout (10 s), which cut a quiet stream after 10-12 s.
    expect(KEEP_ALIVE_MS).toBeLessThan(10_000)
  })

  test("a realtime stream's lastEventId cannot write events into the stream", async () => {
    const g = await a.req('POST', '/api/games', { token: admin, body: { ...GAME, name: 'Injected' } })
    const forged = encodeURIComponent('x\n\nid: 9999999999999\nevent: end\ndata: {"error":"injected"}\n\n')
    const res = await fetch(
      `${a.listen()}/api/v1/analytics/realtime?gameId=${g.body.id}&env=prod&token=${viewer}&lastEventId=${forged}`,
    )
    const sse = new SseReader(res.body!)
    const note = await sse.next((f) => f.comments.some((c) => c.includes('not resumable')))
    expect(note.comments[0]).toStartWith('Last-Event-ID that is not a snapshot id not resumable')
    await sse.next((f) => f.event === 'snapshot')
    expect(sse.frames.filter((f) => f.event === 'end' || f.id === '9999999999999')).toEqual([])
    await sse.cancel()
  })

  test("a viewer's funnel body of 1,000,000 steps is refused naming the field, its first issues only", async () => {
    const g = await a.req('POST', '/api/games', { token: admin, body: { ...GAME, name: 'Funnel Flood' } })
    const raw = `{"steps":[${Array(1_000_000).fill('{}').join(',')}]}`
    const r = await fetch(`${a.listen()}/api/v1/analytics/behavior/funnel?gameId=${g.body.id}&env=prod`, {
      method: 'POST',
      headers: { authorization: `Bearer ${viewer}`, 'content-type': 'application/json' },
      body: raw,
    })
    const body = await r.json()
    expect([r.status, body.details.field]).toEqual([400, 'body.steps'])
    expect(body.details.errors.length).toBeLessThanOrEqual(20)
  })

  test("the game's SDK key reads no draft experiment's variants", async () => {
    const g = await a.req('POST', '/api/games', { token: admin, body: { ...GAME, name: 'Unreleased' } })
    const key = (
      await a.req('POST', '/api/api-keys', {
        token: admin,
        body: { name: 'client', gameId: g.body.id, environment: 'prod' },
      })
    ).body.key
    const e = await a.req('POST', '/api/experiments', {
      token: admin,
      body: { gameId: g.body.id, environment: 'prod', name: 'secret-sale', config: CONFIG },
    })
    const r = await fetch(`${a.listen()}/api/experiments/${e.body.id}/assign?userId=u1`, {
      headers: { 'x-api-key': key },
    })
    expect(r.status).toBe(404)
  })

  test('the shared signing secret writes no event, payment or batch item of a game with a secret of its own', async () => {
    const b = await makeApp(engine, {
      plugins: {
        games: {},
        ingest: { signing_secret: 'shared-secret-7731', game_secrets: { 'game-own': 'own-secret-4410' } },
      },
    })
    try {
      const ev = (game: string) => ({ event: 'forged', ts: String(Date.now()), game_id: game, env: 'prod' })
      const pay = (game: string) => ({
        ...ev(game),
        event: 'payment',
        order_id: 'o-1',
        status: 'refunded',
        amount_cents: 99_999,
      })
      const reason =
        "game 'game-own' has a signing secret of its own: sign with it and name the game in X-Game-Id"
      for (const [path, body] of [
        ['/api/ingest/events', [ev('game-own')]],
        ['/api/ingest/payments', [pay('game-own')]],
      ] as const) {
        const r = await signed(b, path, body, { secret: 'shared-secret-7731' })
        expect([path, r.status, r.body.details?.errors]).toEqual([
          path,
          400,
          [{ index: 0, field: 'game_id', reason }],
        ])
      }
      const batch = await signed(b, '/v1/batch', [{ ...ev('game-own'), environment: 'prod' }], {
        secret: 'shared-secret-7731',
      })
      expect(batch.body.rejected).toEqual([{ event_id: '0', reason: `game_id: ${reason}` }])
      // Under its own secret the game's events pass the check (this app has no such game: unknown_game).
      const own = await signed(b, '/api/ingest/events', [ev('game-own')], {
        secret: 'own-secret-4410',
        headers: { 'x-game-id': 'game-own' },
      })
      expect([own.status, own.body.error]).toEqual([400, 'unknown_game'])
      // The shared secret still reaches every other game.
      const other = await signed(b, '/api/ingest/events', [ev('game-shared')], {
        secret: 'shared-secret-7731',
      })
      expect([other.status, other.body.error]).toEqual([400, 'unknown_game'])
    } finally {
      await b.stop()
    }
  })

  test('a notification names at most 500 recipients a channel, and one delivery carries at most 1,000', async () => {
    const many = (n: number, tag: string) => Array.from({ length: n }, (_, i) => `${tag}${i}@victims.example`)
    const flood = await a.req('POST', '/api/v1/notify', {
      token: admin,
      body: { type: 'spam', channels: ['audit'], recipients: { audit: many(501, 'r') }, title: 'Buy now' },
    })
    expect([flood.status, flood.body.data?.field]).toEqual([400, 'body.recipients.audit'])
    // Groups merged past what one delivery carries: that channel fails, nothing is sent on it.
    for (const g of ['g1', 'g2', 'g3'])
      expect(
        (
          await a.req('POST', '/api/v1/groups', {
            token: admin,
            body: { id: `flood-${g}`, members: [{ channel: 'audit', recipients: many(400, g) }] },
          })
        ).status,
      ).toBe(200)
    const merged = await a.req('POST', '/api/v1/notify', {
      token: admin,
      body: {
        type: 'spam',
        channels: ['group:flood-g1', 'group:flood-g2', 'group:flood-g3'],
        title: 'Buy now',
      },
    })
    expect(JSON.stringify(merged.body)).toContain('1200 recipients, more than one delivery carries (1000)')
    const logs = await a.req('GET', '/api/v1/logs?limit=500', { token: admin })
    expect(logs.body.data.logs.filter((l: { title: string }) => l.title === 'Buy now')).toEqual([])
  })

  test('a config token cannot take the name of a routing channel; one stored before gives way, and the server starts', async () => {
    const routing = {
      channels: [
        {
          id: 'certs-hook',
          type: 'webhook',
          url: 'http://127.0.0.1:9/real',
          secret: 'whsec-real-0099887766',
        },
      ],
      rules: [{ event: 'certificate_expiring', channels: ['certs-hook'], thresholdDays: 14 }],
    }
    expect((await a.req('PUT', '/api/v1/ops/notifications', { token: admin, body: routing })).status).toBe(
      200,
    )
    const config = (
      await a.req('POST', '/api/v1/app-tokens', {
        token: admin,
        body: { name: 'config-only', scopes: ['config'] },
      })
    ).body.data.token
    const taken = await a.req('PUT', '/api/v1/config/site.oncall', {
      headers: { authorization: `Bearer ${config}` },
      body: { type: 'webhook', config: { url: 'http://127.0.0.1:9/hijack' } },
    })
    expect([taken.status, taken.body.message]).toEqual([
      409,
      "channel 'site.oncall' is provided by another plugin and configured there, not through /config",
    ])
    // As an older release let it be stored: the next start gives the name back to the routing (a
    // second instance on the same store; a SQLite file has one process).
    if (engine === 'sqlite') return
    await a.db.run(
      'INSERT INTO notify_channels (name, type, config, enabled, updated_at) VALUES (?, ?, ?, ?, ?)',
      ['site.certs-hook', 'webhook', JSON.stringify({ url: 'http://127.0.0.1:9/hijack' }), 1, Date.now()],
    )
    const b = await makeApp(engine, { ...SECURITY_APP, plugins: allPluginsWith(), store: a })
    try {
      const view = await b.req('GET', '/api/v1/config/site.certs-hook', {
        headers: { 'x-admin-token': ADMIN_TOKEN },
      })
      expect([view.status, view.body.data?.source]).toEqual([200, 'plugin'])
      expect(JSON.stringify(view.body)).not.toContain('hijack')
      expect(
        await a.db.get("SELECT name FROM notify_channels WHERE name = 'site.certs-hook'"),
      ).toBeUndefined()
    } finally {
      await b.stop()
    }
  })

  test("an idempotency key is the caller's own: another's request neither recalls nor pre-claims its answer", async () => {
    const trigger = (
      await a.req('POST', '/api/v1/app-tokens', {
        token: admin,
        body: { name: 'trigger-only', scopes: ['trigger'] },
      })
    ).body.data.token
    const operator = await a.token('operator')
    const send = (headers: Record<string, string>, title: string) =>
      a.req('POST', '/api/v1/notify', {
        headers,
        body: { type: 'billing', channels: ['audit'], title, idempotency_key: 'billing-outage-2026-11-30' },
      })
    const first = await send({ authorization: `Bearer ${trigger}` }, 'harmless')
    const real = await send({ authorization: `Bearer ${operator}` }, 'BILLING DOWN')
    expect(real.body.data.notification_id).not.toBe(first.body.data.notification_id)
    const again = await send({ authorization: `Bearer ${operator}` }, 'BILLING DOWN')
    expect(again.body.data.notification_id).toBe(real.body.data.notification_id)
    const logs = (await a.req('GET', '/api/v1/logs?limit=500', { token: admin })).body.data.logs
    expect(logs.filter((l: { title: string }) => l.title === 'BILLING DOWN')).toHaveLength(1)
  })

  test("the site's mail names at most 1,000 recipients", async () => {
    const list = (n: number) => Array.from({ length: n }, (_, i) => `u${i}@victims.example`).join(',')
    const put = (value: string) =>
      a.req('PUT', '/api/v1/site/notification.emailTo', { token: admin, body: { value } })
    const over = await put(list(1_001))
    expect([over.status, over.body.message]).toEqual([
      400,
      'body.value: must be comma-separated recipients of notification mail, at most 1000',
    ])
    expect((await put(list(1_000))).status).toBe(200)
    expect((await put('')).status).toBe(200)
  })
})
