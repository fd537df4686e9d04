import { afterAll, beforeAll, expect, test } from 'bun:test'
import { type TestApp, forEachEngine, makeApp, until } from '../../test/helpers'
import { httpSink } from './testing'

forEachEngine((engine) => {
  let t: TestApp
  const sink = httpSink()
  const other = httpSink()
  beforeAll(async () => {
    t = await makeApp(engine, {
      plugins: {
        'webhook-provider': {},
        notify: {
          auth: { enabled: false },
          channels: {
            hook: { type: 'webhook', url: sink.url, headers: { 'X-Api-Key': 'k1' } },
            ops: { type: 'webhook', url: other.url },
            quiet: { type: 'log', enabled: false },
          },
          routes: [
            { type: 'deploy*', channels: ['hook'] },
            { levels: ['critical'], channels: ['ops'] },
          ],
          users: { alice: { ops: ['alice@example.com'] } },
          retry: { base_ms: 10, max_ms: 50 },
        },
      },
    })
  })
  afterAll(async () => {
    await t.stop()
    sink.stop()
    other.stop()
  })

  test('all accepted: code 0 with notification_id, task_ids and accepted; stored and delivered with the spec payload', async () => {
    const r = await t.req('POST', '/api/v1/notify', {
      body: {
        type: 'alert',
        level: 'warning',
        channels: ['hook'],
        title: 'Disk',
        body: 'full',
        params: { host: 'a' },
      },
    })
    expect(r.status).toBe(200)
    expect(r.body.code).toBe(0)
    expect(r.body.message).toBe('ok')
    expect(r.body.data.notification_id).toMatch(/^[0-9a-f-]{36}$/)
    expect(r.body.data.accepted).toEqual(['hook'])
    expect(r.body.data.task_ids).toHaveLength(1)
    expect('failed' in r.body.data).toBe(false)
    const id = r.body.data.task_ids[0]
    const hit = await until(() => sink.hits.find((h) => h.body.id === id))
    expect(hit?.method).toBe('POST')
    expect(hit?.headers['content-type']).toBe('application/json')
    expect(hit?.headers['x-api-key']).toBe('k1')
    expect(hit?.body).toMatchObject({
      id,
      provider: 'hook',
      level: 'warning',
      targets: ['hook'],
      title: 'Disk',
      body: 'full',
      raw: { type: 'alert', params: { host: 'a' } },
    })
    expect(Date.parse(String(hit?.body.timestamp))).toBeGreaterThan(0)
    const log = await until(async () => {
      const l = await t.req('GET', `/api/v1/logs/${id}`)
      return l.body.data?.status === 'success' ? l : undefined
    })
    expect(log?.body.data.attempts).toHaveLength(1)
  })

  test('partial failure: code 0 with failed list; unknown channel says provider not found, disabled says so', async () => {
    const r = await t.req('POST', '/api/v1/notify', {
      body: { type: 'x', channels: ['hook', 'nope'], channel: 'quiet', title: 't' },
    })
    expect(r.body.code).toBe(0)
    expect(r.body.data.accepted).toEqual(['hook'])
    expect(r.body.data.failed).toEqual([
      { channel: 'nope', error: 'provider not found: nope' },
      { channel: 'quiet', error: 'provider disabled: quiet' },
    ])
  })

  test('all failed: HTTP 200, body code 422, message lists each failure, nothing stored', async () => {
    const before = (await t.req('GET', '/api/v1/logs')).body.data.total
    const r = await t.req('POST', '/api/v1/notify', { body: { type: 'x', channels: ['a', 'b'], title: 't' } })
    expect(r.status).toBe(200)
    expect(r.body.code).toBe(422)
    expect(r.body.message).toContain('a: provider not found: a')
    expect(r.body.message).toContain('b: provider not found: b')
    expect(r.body.data.accepted).toEqual([])
    expect(r.body.data.notification_id).toBeString()
    expect('task_ids' in r.body.data).toBe(false)
    expect((await t.req('GET', '/api/v1/logs')).body.data.total).toBe(before)
  })

  test('malformed bodies answer 400 naming the field', async () => {
    const bad = await t.req('POST', '/api/v1/notify', {
      raw: '{not json',
      headers: { 'content-type': 'application/json' },
    })
    expect(bad.status).toBe(400)
    const noType = await t.req('POST', '/api/v1/notify', { body: { title: 'x' } })
    expect(noType.status).toBe(400)
    expect(noType.body.message).toContain('body.type')
    const level = await t.req('POST', '/api/v1/notify', { body: { type: 'x', level: 'loud', title: 'x' } })
    expect(level.status).toBe(400)
    expect(level.body.data.field).toBe('body.level')
    const channels = await t.req('POST', '/api/v1/notify', {
      body: { type: 'x', channels: 'hook', title: 'x' },
    })
    expect(channels.status).toBe(400)
    expect(channels.body.data.field).toContain('body.channels')
    const empty = await t.req('POST', '/api/v1/notify', { body: { type: 'x', channel: 'hook' } })
    expect(empty.status).toBe(400)
    const tpl = await t.req('POST', '/api/v1/notify', {
      body: { type: 'x', channel: 'hook', template: 'missing' },
    })
    expect(tpl.status).toBe(400)
    expect(tpl.body.data.field).toBe('body.template')
  })

  test('routing by type and level when no channel is named; no route is all-failed', async () => {
    const deploy = await t.req('POST', '/api/v1/notify', {
      body: { type: 'deploy.done', level: 'info', title: 'd' },
    })
    expect(deploy.body.data.accepted).toEqual(['hook'])
    const both = await t.req('POST', '/api/v1/notify', {
      body: { type: 'deploy.failed', level: 'critical', title: 'd' },
    })
    expect(both.body.data.accepted.sort()).toEqual(['hook', 'ops'])
    const none = await t.req('POST', '/api/v1/notify', { body: { type: 'other', level: 'info', title: 'd' } })
    expect(none.body.code).toBe(422)
    expect(none.body.message).toContain("no route matches type 'other'")
  })

  test('audience: user:<name> to configured recipients, bare channel names, unknown user and group fail; recipients per channel', async () => {
    const r = await t.req('POST', '/api/v1/notify', {
      body: {
        type: 'x',
        title: 't',
        audience: ['user:alice', 'hook', 'user:bob', 'group:oncall', 'user:__proto__', 'user:constructor'],
        recipients: { hook: ['h@x'] },
      },
    })
    expect(r.body.code).toBe(0)
    expect(r.body.data.accepted).toEqual(['ops', 'hook'])
    // A name every object inherits is no user either.
    expect(r.body.data.failed).toEqual([
      { channel: 'user:bob', error: 'user not found: bob' },
      { channel: 'group:oncall', error: 'groups are not configured' },
      { channel: 'user:__proto__', error: 'user not found: __proto__' },
      { channel: 'user:constructor', error: 'user not found: constructor' },
    ])
    const [opsId, hookId] = r.body.data.task_ids
    const ops = await t.req('GET', `/api/v1/logs/${opsId}`)
    expect(ops.body.data.targets).toEqual(['user:alice'])
    expect(ops.body.data.recipients).toEqual(['alice@example.com'])
    const hook = await t.req('GET', `/api/v1/logs/${hookId}`)
    expect(hook.body.data.recipients).toEqual(['h@x'])
  })

  test('templates render {{.name}} with data merged under params (params win)', async () => {
    await t.req('POST', '/api/v1/templates/create', {
      body: {
        id: 'disk',
        name: 'Disk',
        title: 'Disk {{.host}} at {{.pct}}%',
        level: 'error',
        fields: [{ label: 'Region', value: '{{ .region }}' }],
      },
    })
    const r = await t.req('POST', '/api/v1/notify', {
      body: {
        type: 'x',
        channel: 'hook',
        template: 'disk',
        params: { host: 'db1', pct: 91 },
        data: { host: 'ignored', region: 'eu' },
      },
    })
    expect(r.body.code).toBe(0)
    const log = await t.req('GET', `/api/v1/logs/${r.body.data.task_ids[0]}`)
    expect(log.body.data.title).toBe('Disk db1 at 91%')
    expect(log.body.data.body).toBe('Region: eu')
    expect(log.body.data.level).toBe('error')
  })

  test('idempotency: a repeated key returns the first result and creates no delivery; a 422 is not recorded', async () => {
    const body = { type: 'x', channel: 'hook', title: 'once', idempotency_key: `k-${engine}` }
    const a = await t.req('POST', '/api/v1/notify', { body })
    const total = (await t.req('GET', '/api/v1/logs')).body.data.total
    const b = await t.req('POST', '/api/v1/notify', { body })
    expect(b.body).toEqual(a.body)
    expect((await t.req('GET', '/api/v1/logs')).body.data.total).toBe(total)
    const twins = await Promise.all(
      [1, 2, 3].map(() =>
        t.req('POST', '/api/v1/notify', { body: { ...body, idempotency_key: `c-${engine}` } }),
      ),
    )
    expect(new Set(twins.map((x) => x.body.data.notification_id)).size).toBe(1)

    const failed = await t.req('POST', '/api/v1/notify', {
      body: { type: 'x', channel: 'nope', title: 't', idempotency_key: `f-${engine}` },
    })
    expect(failed.body.code).toBe(422)
    const fixed = await t.req('POST', '/api/v1/notify', {
      body: { type: 'x', channel: 'hook', title: 't', idempotency_key: `f-${engine}` },
    })
    expect(fixed.body.code).toBe(0)
  })

  test('GET /queue answers the number of unfinished deliveries', async () => {
    const r = await t.req('GET', '/api/v1/queue')
    expect(r.status).toBe(200)
    expect(r.body.code).toBe(0)
    expect(typeof r.body.data.size).toBe('number')
  })

  test('the OpenAPI document describes the notification routes', async () => {
    const r = await t.req('GET', '/v3/api-docs')
    expect(r.status).toBe(200)
    const paths = Object.keys(r.body.paths)
    for (const p of [
      '/api/v1/notify',
      '/api/v1/logs',
      '/api/v1/config/{name}',
      '/api/v1/templates/create',
      '/api/v1/app-tokens',
    ])
      expect(paths).toContain(p)
  })
})
