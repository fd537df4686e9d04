import { afterAll, beforeAll, expect, test } from 'bun:test'
import { type TestApp, forEachEngine, makeApp, until } from '../../test/helpers'
import { httpSink } from '../notify/testing'

forEachEngine((engine) => {
  let a: TestApp
  let admin: string
  const mail = httpSink()
  const sms = httpSink()
  beforeAll(async () => {
    a = await makeApp(engine, {
      plugins: {
        'webhook-provider': {},
        notify: {
          channels: { mail: { type: 'webhook', url: mail.url }, sms: { type: 'webhook', url: sms.url } },
          retry: { base_ms: 10, max_ms: 50 },
        },
        rules: {},
      },
    })
    admin = await a.token('admin')
  })
  afterAll(async () => {
    await a.stop()
    mail.stop()
    sms.stop()
  })
  const as = (method: string, path: string, body?: unknown, token: string | null = admin) =>
    a.req(method, path, { token, body })

  test('create, read, list, replace (URL id wins, effective at once), delete; 409, 404', async () => {
    const g = {
      id: 'dba-oncall',
      description: 'Database on-call',
      members: [{ channel: 'mail', recipients: ['kai@db.example'] }, { channel: 'sms' }],
    }
    const r = await as('POST', '/api/v1/groups', g)
    expect(r.status).toBe(200)
    expect(r.body.data).toMatchObject(g)
    expect(r.body.data.members[1].recipients).toBeUndefined()
    expect((await as('POST', '/api/v1/groups', g)).status).toBe(409)
    expect((await as('GET', '/api/v1/groups/dba-oncall')).body.data).toMatchObject(g)
    const list = await as('GET', '/api/v1/groups')
    expect(list.body.data).toMatchObject({ count: 1, groups: [{ id: 'dba-oncall' }] })

    const sent = await as('POST', '/api/v1/notify', {
      type: 'db',
      title: 'to group',
      audience: ['group:dba-oncall'],
    })
    expect(sent.body.data.accepted.sort()).toEqual(['mail', 'sms'])
    const hit = await until(() => mail.hits.find((h) => h.body.title === 'to group'))
    expect(hit?.body.targets).toEqual(['group:dba-oncall'])

    const put = await as('PUT', '/api/v1/groups/dba-oncall', { id: 'ignored', members: [{ channel: 'sms' }] })
    expect(put.body.data).toMatchObject({ id: 'dba-oncall', description: '', members: [{ channel: 'sms' }] })
    const after = await as('POST', '/api/v1/notify', {
      type: 'db',
      title: 'after put',
      channels: ['group:dba-oncall'],
    })
    expect(after.body.data.accepted).toEqual(['sms'])
    expect((await as('PUT', '/api/v1/groups/nope', { members: [] })).status).toBe(404)

    await as('POST', '/api/v1/rules', {
      id: 'to-dba',
      match: 'type == "db"',
      mode: 'active',
      route: [{ channels: ['group:dba-oncall'] }],
    })
    expect((await as('DELETE', '/api/v1/groups/dba-oncall')).body).toMatchObject({
      code: 0,
      data: { id: 'dba-oncall' },
    })
    expect((await as('GET', '/api/v1/groups/dba-oncall')).status).toBe(404)
    expect((await as('DELETE', '/api/v1/groups/dba-oncall')).status).toBe(404)
    expect((await as('GET', '/api/v1/rules/to-dba')).body.data.route).toEqual([
      { channels: ['group:dba-oncall'] },
    ])
    const gone = await as('POST', '/api/v1/notify', { type: 'db', title: 'gone' })
    expect(gone.body).toMatchObject({
      code: 422,
      data: { failed: [{ channel: 'group:dba-oncall', error: 'group not found: dba-oncall' }] },
    })
  })

  test('bad input 400 naming the field; no token 401; viewer write 403', async () => {
    for (const [body, field] of [
      [{ id: 'x', members: [{ recipients: ['a'] }] }, 'body.members[0].channel'],
      [{ id: 'x', members: 'mail' }, 'body.members'],
      [{ id: 'x y', members: [] }, 'body.id'],
      [{ id: 'x', members: [], owner: 'me' }, 'body.owner'],
    ] as const) {
      const r = await as('POST', '/api/v1/groups', body)
      expect(r.status).toBe(400)
      expect(r.body.message).toContain(field)
    }
    expect((await as('GET', '/api/v1/groups/x')).status).toBe(404)
    expect((await as('GET', '/api/v1/groups', undefined, null)).status).toBe(401)
    const viewer = await a.token('viewer')
    expect((await as('GET', '/api/v1/groups', undefined, viewer)).status).toBe(200)
    expect((await as('POST', '/api/v1/groups', { id: 'v', members: [] }, viewer)).status).toBe(403)
  })
})

forEachEngine((engine) => {
  test('switched off, the rule engine, group manager, ack store and incident store answer 503', async () => {
    const a = await makeApp(engine, {
      plugins: {
        notify: {},
        rules: {
          engine: false,
          groups: false,
          acks: false,
          incidents: false,
          chatcard: { verification_token: 'vt-off' },
        },
      },
    })
    try {
      const token = await a.token('admin')
      for (const [m, p] of [
        ['GET', '/api/v1/rules'],
        ['GET', '/api/v1/groups'],
        ['GET', '/api/v1/alerts/a1'],
        ['POST', '/api/v1/alerts/a1/ack'],
        ['GET', '/api/v1/incidents'],
        ['GET', '/api/v1/incidents/stats'],
      ]) {
        const r = await a.req(m, p, { token })
        expect(r.status, `${m} ${p}`).toBe(503)
        expect(r.body.code).toBe(503)
      }
      const cb = await a.req('POST', '/api/v1/callbacks/chatcard', {
        body: { token: 'vt-off', action: { value: { alert_id: 'a1' } }, open_id: 'ou_1' },
      })
      expect(cb.status).toBe(503)
    } finally {
      await a.stop()
    }
  })
})
