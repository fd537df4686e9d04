import { afterAll, beforeAll, expect, spyOn, test } from 'bun:test'
import { RuleEngine } from '../../plugins/rules/engine'
import { type TestApp, forEachEngine, makeApp, until } from '../helpers'
import { SECURITY_APP, allPluginsWith } from './lib'

/*
 * The rules audit, replayed as its attackers made it: a trigger-scope server key sending
 * notifications whose alert ids are megabytes long (since audit 19 params take at most 64 KB, so
 * the ids here are that long), held by a rule with `for`, stored in incidents and escalations.
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
      // As long as a notification's params may be (64 KB; megabytes before audit 19).
      const big = 'A'.repeat(60 * 1024)
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

  test('an alert id past 191 characters is kept as its hash on every engine, and the long id still reaches it', async () => {
    const rule = {
      id: 'fx',
      match: 'type == "fx"',
      mode: 'active',
      route: [{ channels: ['audit'] }],
      escalation: { ack_timeout: '1h', to: ['audit'] },
    }
    expect((await a.req('POST', '/api/v1/rules', { token: admin, body: rule })).status).toBe(200)
    const viewer = await a.token('viewer')
    const incidentsOf = async (query: string) =>
      (await a.req('GET', `/api/v1/incidents?${query}`, { token: viewer })).body.data.incidents
    // 205 characters had lost its incident and escalation on MariaDB ("Data too long").
    const long = `ops-alerts:${'r'.repeat(36)}:${'s'.repeat(158)}`
    expect((await notify({ type: 'fx', params: { alert_id: long } })).body.code).toBe(0)
    const [inc] = await until(() => incidentsOf(`alert_id=${long}`).then((l) => l.length && l))
    expect(inc.alert_id).toMatch(/^#[0-9a-f]{64}$/)
    const path = `/api/v1/alerts/${encodeURIComponent(long)}`
    expect((await a.req('GET', path, { token: viewer })).body.data).toEqual({
      alert_id: inc.alert_id,
      acknowledged: false,
    })
    const ack = await a.req('POST', `${path}/ack`, { headers: trigger, body: { acked_by: 'oncall' } })
    expect([ack.status, ack.body.data.alert_id]).toEqual([200, inc.alert_id])
    // The kept form reaches the same alert, and a resolve sent with the long id resolves it.
    const kept = await a.req('GET', `/api/v1/alerts/${encodeURIComponent(inc.alert_id)}`, { token: viewer })
    expect(kept.body.data.acknowledged).toBe(true)
    await notify({ type: 'fx', params: { alert_id: long, status: 'resolved' } })
    expect((await incidentsOf(`alert_id=${long}&status=resolved`)).map((i: { id: string }) => i.id)).toEqual([
      inc.id,
    ])
    // Ids as long as params may be (64 KB; 4 MB before audit 19): each incident lists under 200 characters of id.
    const big = 'B'.repeat(60 * 1024)
    for (let i = 0; i < 3; i++)
      expect((await notify({ type: 'fx', params: { alert_id: `${i}-${big}` } })).body.code).toBe(0)
    const listed = await until(() => incidentsOf('rule_id=fx&status=open').then((l) => l.length === 3 && l))
    expect(listed.every((i: { alert_id: string }) => i.alert_id.length <= 191)).toBe(true)
  })

  test("one alert's 205 events read as the newest 200 with their count, titles cut; stats read no titles", async () => {
    const rule = { id: 'tl', match: 'type == "tl"', mode: 'active', route: [{ channels: ['audit'] }] }
    expect((await a.req('POST', '/api/v1/rules', { token: admin, body: rule })).status).toBe(200)
    const title = 'T'.repeat(10_000)
    for (let i = 0; i < 205; i++)
      expect((await notify({ type: 'tl', title, params: { alert_id: 'tl-1', n: i } })).body.code).toBe(0)
    const viewer = await a.token('viewer')
    const [inc] = await until(async () => {
      const l = (await a.req('GET', '/api/v1/incidents?alert_id=tl-1', { token: viewer })).body.data.incidents
      return l[0]?.events === 205 && l
    })
    const read = (q = '') => a.req('GET', `/api/v1/incidents/${inc.id}${q}`, { token: viewer })
    const full = (await read()).body.data
    expect([full.timeline.length, full.timeline_total]).toEqual([200, 205])
    // The newest, oldest first: the opening entry and the first four events are left out.
    expect(full.timeline.some((e: { kind: string }) => e.kind === 'opened')).toBe(false)
    const at = full.timeline.map((e: { at: string }) => e.at)
    expect(at).toEqual([...at].sort())
    expect(Math.max(...full.timeline.map((e: { detail: { title: string } }) => e.detail.title.length))).toBe(
      256,
    )
    expect((await read('?limit=3')).body.data.timeline).toHaveLength(3)
    const bad = await read('?limit=5000')
    expect([bad.status, bad.body.data.field]).toEqual([400, 'query.limit'])
    const all = spyOn(a.db, 'all')
    try {
      const stats = await a.req('GET', '/api/v1/incidents/stats', { token: viewer })
      expect(stats.body.data.total).toBeGreaterThanOrEqual(1)
      const rows = (await Promise.all(all.mock.results.map((r) => r.value as Promise<object[]>))).flat()
      expect(rows.length).toBeGreaterThan(0)
      expect(rows.some((r) => 'title' in r)).toBe(false)
    } finally {
      all.mockRestore()
    }
  })

  test("rosters: a config key's own writes are not read back by the sync; at most 200, listed by pages", async () => {
    const key = await a.req('POST', '/api/v1/server-keys', {
      token: admin,
      body: { name: 'scheduler', scopes: ['config'] },
    })
    const config = { 'x-api-key': key.body.data.key }
    const day = Date.UTC(2030, 0, 1)
    const periods = Array.from({ length: 512 }, (_, i) => ({
      start: new Date(day + i * 7_200_000).toISOString(),
      end: new Date(day + i * 7_200_000 + 3_600_000).toISOString(),
    }))
    const post = (id: string, ps = periods.slice(0, 1)) =>
      a.req('POST', '/api/v1/rosters', { headers: config, body: { id, periods: ps } })
    expect((await post('bulk-000', periods)).status).toBe(200)
    const put = await a.req('PUT', '/api/v1/rosters/bulk-000', { headers: config, body: { periods } })
    expect(put.status).toBe(200)
    // The next syncs find the revision this instance wrote: they read no roster back.
    const all = spyOn(a.db, 'all')
    const get = spyOn(a.db, 'get')
    try {
      await until(
        () => get.mock.calls.filter((c) => String(c[0]).includes('FROM rosters_revision')).length >= 2,
      )
      expect(all.mock.calls.filter((c) => String(c[0]).includes('FROM rosters'))).toEqual([])
    } finally {
      all.mockRestore()
      get.mockRestore()
    }
    for (let i = 1; i < 200; i++) expect((await post(`bulk-${String(i).padStart(3, '0')}`)).status).toBe(200)
    const over = await post('bulk-200')
    expect([over.status, over.body.message]).toEqual([409, 'at most 200 rosters: delete one first'])
    const vevent = [
      'BEGIN:VEVENT',
      'UID:1',
      'DTSTART:20300101T000000Z',
      'DTEND:20300101T010000Z',
      'END:VEVENT',
    ]
    const ics = await a.req('POST', '/api/v1/rosters/bulk-201/import?from=2029-12-31T00:00:00Z', {
      headers: { ...config, 'content-type': 'text/plain' },
      raw: ['BEGIN:VCALENDAR', 'VERSION:2.0', ...vevent, 'END:VCALENDAR', ''].join('\r\n'),
    })
    expect(ics.status).toBe(409)
    const viewer = await a.token('viewer')
    const list = (q: string) => a.req('GET', `/api/v1/rosters${q}`, { token: viewer })
    const whole = (await list('')).body.data
    expect([whole.count, whole.next_after]).toEqual([200, undefined])
    const first = (await list('?limit=150')).body.data
    expect([first.count, first.next_after]).toEqual([150, 'bulk-149'])
    const rest = (await list(`?limit=150&after=${first.next_after}`)).body.data
    expect([rest.count, rest.rosters[0].id, rest.next_after]).toEqual([50, 'bulk-150', undefined])
    const bad = await list('?limit=201')
    expect([bad.status, bad.body.data.field]).toEqual([400, 'query.limit'])
  })

  test("groups: one read reads one group, a config key's own writes are not read back, 1,000 recipients and 200 groups at most", async () => {
    const key = await a.req('POST', '/api/v1/server-keys', {
      token: admin,
      body: { name: 'grouper', scopes: ['config'] },
    })
    const config = { 'x-api-key': key.body.data.key }
    // A member names at most 500 recipients: larger groups span members.
    const members = (n: number, tag: string) =>
      Array.from({ length: Math.ceil(n / 500) }, (_, m) => ({
        channel: 'email',
        recipients: Array.from(
          { length: Math.min(500, n - m * 500) },
          (_, i) => `${tag}${m * 500 + i}@studio.example`,
        ),
      }))
    const post = (id: string, n = 1) =>
      a.req('POST', '/api/v1/groups', { headers: config, body: { id, members: members(n, id) } })
    // 200 members x 500 recipients could never be delivered (1,000 a delivery) and was parsed at every read.
    const wide = await post('wide', 1_001)
    expect([wide.status, wide.body.message]).toEqual([400, expect.stringContaining('body.members')])
    expect((await post('gfx', 1_000)).status).toBe(200)
    const put = await a.req('PUT', '/api/v1/groups/gfx', {
      headers: config,
      body: { members: members(2, 'x') },
    })
    expect(put.status).toBe(200)
    const all = spyOn(a.db, 'all')
    const get = spyOn(a.db, 'get')
    try {
      const viewer = await a.token('viewer')
      const one = await a.req('GET', '/api/v1/groups/gfx', { token: viewer })
      expect(one.body.data.members).toEqual(members(2, 'x'))
      expect((await a.req('GET', '/api/v1/groups/nope', { token: viewer })).status).toBe(404)
      // The syncs after this instance's own write find its revision: no group is read back.
      await until(
        () => all.mock.calls.filter((c) => String(c[0]).includes('FROM rules_revisions')).length >= 2,
      )
      expect(all.mock.calls.filter((c) => String(c[0]).includes('FROM rules_groups'))).toEqual([])
    } finally {
      all.mockRestore()
      get.mockRestore()
    }
    for (let i = 1; i < 200; i++) expect((await post(`g-${i}`)).status).toBe(200)
    const over = await post('g-200')
    expect([over.status, over.body.message]).toEqual([409, 'at most 200 groups: delete one first'])
    expect((await a.req('DELETE', '/api/v1/groups/g-1', { headers: config })).status).toBe(200)
    expect((await post('g-200')).status).toBe(200)
  }, 60_000)
})
