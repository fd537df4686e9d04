import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { type TestApp, forEachEngine, makeApp, until } from '../../test/helpers'
import { httpSink } from '../notify/testing'
import { type Folded, RuleEngine } from './engine'
import type { MatchInput } from './match'
import { normalize } from './rule'
import type { RuleBody } from './schema'

const T0 = Date.UTC(2031, 2, 4, 10, 0, 0)
let seq = 0
const engineWith = (rules: RuleBody[], folded: Folded[] = []) => {
  const e = new RuleEngine({ silenced: () => false, onFolded: (f) => folded.push(f) })
  e.load(rules.map((r) => ({ rule: normalize(r, r.id!), seq: ++seq, created_at: T0, updated_at: T0 })))
  return e
}
const n = (over: Partial<MatchInput> & { params?: Record<string, unknown> }): MatchInput => ({
  type: 'disk',
  level: 'warning',
  title: 'disk filling',
  body: '',
  params: {},
  ...over,
})

describe('the index', () => {
  test('tries only the rules a notification can match and keeps priority order across indexed and free rules', () => {
    const rules: RuleBody[] = [
      // Listed first, so its field (params.env) comes first among the index's fields.
      { id: 'env-first', match: 'params.env == "prod" && level == "debug"', mode: 'active', priority: 10 },
      {
        id: 'prod-err',
        match: 'params.env == "prod" && level in ["error", "critical"]',
        mode: 'active',
        priority: 5,
        route: [{ channels: ['a'] }],
      },
      {
        id: 'db',
        match: 'type in ["db.down", "db.slow"]',
        mode: 'active',
        priority: 9,
        route: [{ channels: ['b'] }],
      },
      { id: 'crit', match: 'level == "critical"', mode: 'active', priority: 7, route: [{ channels: ['c'] }] },
      {
        id: 'broken',
        match: 'params.bad > 1 && type == "db.down"',
        mode: 'active',
        priority: 8,
        route: [{ channels: ['d'] }],
      },
    ]
    const e = engineWith(rules)
    const x = (over: Partial<MatchInput>) =>
      n({ level: 'critical', params: { env: 'prod', bad: {} }, ...over })
    expect(e.evaluate(x({ type: 'db.slow' }), false, T0).outcome?.rule.rule.id).toBe('db')
    expect(e.evaluate(x({ type: 'cpu' }), false, T0).outcome?.rule.rule.id).toBe('crit')
    expect(e.evaluate(x({ type: 'cpu', level: 'error' }), false, T0).outcome?.rule.rule.id).toBe('prod-err')
    expect(
      e.evaluate(x({ type: 'cpu', level: 'error', params: { env: 'dev' } }), false, T0).outcome,
    ).toBeUndefined()
    expect(e.shadowStats('broken').evaluation_errors).toBe(0)
    const off = engineWith(rules.map((r) => (r.id === 'db' ? { ...r, mode: 'off' as const } : r)))
    expect(off.evaluate(x({ type: 'db.down' }), false, T0).outcome?.rule.rule.id).toBe('crit')
    expect(off.shadowStats('broken').evaluation_errors).toBe(1)
    off.evaluate(x({ type: 'db.slow' }), false, T0)
    expect(off.shadowStats('broken').evaluation_errors).toBe(1)
  })
})

describe('for: the match must keep holding before the rule fires', () => {
  const e = engineWith([
    { id: 'slow', match: 'type == "disk"', mode: 'active', for: '5m', route: [{ channels: ['pager'] }] },
  ])
  const at = (min: number) => T0 + min * 60_000
  test('pending until held for the duration, per alert id; a gap longer than the duration or a miss restarts it', () => {
    const a = n({ params: { alert_id: 'd-1' } })
    expect(e.evaluate(a, false, at(0)).outcome?.held?.reason).toBe('pending')
    expect(e.evaluate(a, false, at(3)).outcome?.held?.reason).toBe('pending')
    expect(e.evaluate(n({ params: { alert_id: 'd-2' } }), false, at(4)).outcome?.held?.reason).toBe('pending')
    expect(e.evaluate(a, true, at(5)).outcome).toMatchObject({ channels: ['pager'] })
    expect(e.evaluate(a, false, at(5)).outcome?.held).toBeUndefined()
    expect(e.evaluate(a, false, at(6)).outcome?.channels).toEqual(['pager'])
    expect(e.evaluate(n({ params: { alert_id: 'd-2' } }), false, at(8)).outcome?.held?.reason).toBe('pending')
    expect(e.evaluate(a, false, at(20)).outcome?.held?.reason).toBe('pending')
    expect(e.evaluate(a, false, at(24)).outcome?.held?.reason).toBe('pending')
    e.evaluate(n({ type: 'cpu', params: { alert_id: 'd-1' } }), false, at(24.5))
    expect(e.evaluate(a, false, at(25.5)).outcome?.held?.reason).toBe('pending')
  })
})

describe('inhibit', () => {
  const e = engineWith([
    {
      id: 'disk-warn',
      match: 'type == "disk" && level == "warning"',
      mode: 'active',
      route: [{ channels: ['chat'] }],
      inhibit: { source: 'type == "disk" && level == "critical"', equal: ['params.host'], ttl: '10m' },
    },
  ])
  test('held while a source with the same equal params was seen within ttl; other hosts and later events pass', () => {
    expect(e.evaluate(n({ level: 'critical', params: { host: 'h1' } }), false, T0).outcome).toBeUndefined()
    expect(e.evaluate(n({ params: { host: 'h1' } }), false, T0 + 60_000).outcome?.held?.reason).toBe(
      'inhibited',
    )
    expect(e.evaluate(n({ params: { host: 'h2' } }), false, T0 + 60_000).outcome?.channels).toEqual(['chat'])
    expect(e.evaluate(n({ params: { host: 'h1' } }), false, T0 + 11 * 60_000).outcome?.channels).toEqual([
      'chat',
    ])
  })
})

describe('group_by', () => {
  test('the first event of a group goes out, the rest of the window folds into one summary', () => {
    const folded: Folded[] = []
    const e = engineWith(
      [
        {
          id: 'by-host',
          match: 'type == "disk"',
          mode: 'active',
          group_by: ['host'],
          group_interval: '1m',
          route: [{ channels: ['chat'] }],
        },
      ],
      folded,
    )
    const t = (s: number) => T0 + s * 1000
    expect(e.evaluate(n({ title: 'a1', params: { host: 'a' } }), false, t(0)).outcome?.held).toBeUndefined()
    expect(e.evaluate(n({ title: 'a2', params: { host: 'a' } }), false, t(10)).outcome?.held?.reason).toBe(
      'folded',
    )
    expect(e.evaluate(n({ title: 'b1', params: { host: 'b' } }), false, t(20)).outcome?.held).toBeUndefined()
    expect(e.evaluate(n({ title: 'a3', params: { host: 'a' } }), false, t(30)).outcome?.held?.reason).toBe(
      'folded',
    )
    e.flush(t(61))
    e.stop()
    expect(folded).toHaveLength(1)
    expect(folded[0].key).toEqual({ host: 'a' })
    expect(folded[0].events.map((x) => x.title)).toEqual(['a2', 'a3'])
    expect(folded[0].channels).toEqual(['chat'])
  })

  test("what a trigger token's notifications leave in memory is bounded: lines, text, keys and entries", () => {
    const folded: Folded[] = []
    const route = [{ channels: ['chat'] }]
    const e = engineWith(
      [
        {
          id: 'fold',
          match: 'type == "disk"',
          mode: 'active',
          group_by: ['host'],
          group_interval: '1h',
          route,
        },
        { id: 'wait', match: 'type == "cpu"', mode: 'active', for: '1h', route },
        {
          id: 'quiet',
          match: 'type == "net"',
          mode: 'active',
          inhibit: { source: 'type == "maint"', equal: ['host'], ttl: '1h' },
          route,
        },
      ],
      folded,
    )
    const big = 'x'.repeat(1_000_000)
    for (let i = 0; i < 150; i++)
      e.evaluate(n({ title: `t${i}${big}`, params: { host: big } }), false, T0 + i)
    e.flush(T0 + 3_600_001)
    expect(folded[0].count).toBe(149)
    expect(folded[0].events).toHaveLength(100)
    expect(Math.max(...folded[0].events.map((x) => x.title.length))).toBeLessThanOrEqual(257)
    expect(String(folded[0].key.host)).toHaveLength(257)
    // An inhibit source's key is kept as a hash, and still matches its own value only.
    e.evaluate(n({ type: 'maint', params: { host: big } }), false, T0)
    expect(e.evaluate(n({ type: 'net', params: { host: big } }), false, T0 + 1).outcome?.held?.reason).toBe(
      'inhibited',
    )
    expect(
      e.evaluate(n({ type: 'net', params: { host: `${big}y` } }), false, T0 + 1).outcome?.held,
    ).toBeUndefined()
    for (let i = 0; i < 10_050; i++) e.evaluate(n({ type: 'cpu', params: { alert_id: `a${i}` } }), false, T0)
    const state = e as unknown as { sources: Map<string, Map<string, number>>; pending: Map<string, unknown> }
    expect([...state.sources.get('quiet')!.keys()].every((k) => k.length <= 512)).toBe(true)
    expect(state.pending.size).toBe(10_000)
    e.stop()
  })
})

forEachEngine((engine) => {
  let a: TestApp
  let admin: string
  const chat = httpSink()
  beforeAll(async () => {
    a = await makeApp(engine, {
      plugins: {
        'webhook-provider': {},
        notify: { channels: { chat: { type: 'webhook', url: chat.url } } },
        rules: {},
      },
    })
    admin = await a.token('admin')
  })
  afterAll(async () => {
    await a.stop()
    chat.stop()
  })

  test('folded events are delivered as one summary when the group window closes', async () => {
    await a.req('POST', '/api/v1/rules', {
      token: admin,
      body: {
        id: 'fold',
        match: 'type == "q.depth"',
        mode: 'active',
        group_by: ['queue'],
        group_interval: '300ms',
        route: [{ channels: ['chat'] }],
      },
    })
    const send = (title: string, level = 'warning') =>
      a.req('POST', '/api/v1/notify', {
        token: admin,
        body: { type: 'q.depth', level, title, params: { queue: 'orders' } },
      })
    expect((await send('orders 1')).body.data.accepted).toEqual(['chat'])
    expect((await send('orders 2', 'critical')).body.data.held).toMatchObject({
      rule: 'fold',
      reason: 'folded',
    })
    expect((await send('orders 3')).body.data.held?.reason).toBe('folded')
    const summary = await until(() => chat.hits.find((h) => String(h.body.title).startsWith('2 more')), 5000)
    expect(summary?.body).toMatchObject({
      title: '2 more like: orders 2',
      level: 'critical',
      body: '- [critical] orders 2\n- [warning] orders 3',
    })
    expect((summary?.body.raw as { params: Record<string, unknown> }).params).toMatchObject({
      queue: 'orders',
      folded: 2,
      folded_by: 'fold',
    })
  })

  test('platform events on the bus (notify subscribes) are routed by the rules and open incidents', async () => {
    await a.req('POST', '/api/v1/rules', {
      token: admin,
      body: {
        id: 'certs',
        match: 'type == "certificate_expiring" && params.days_left < 10',
        mode: 'active',
        route: [{ channels: ['chat'] }],
      },
    })
    await a.bus.emit('certificate_expiring', {
      id: 'c9',
      domain: 'pay.example.com',
      port: 443,
      days_left: 4,
      valid_to: '2031-01-05T00:00:00Z',
    })
    const hit = await until(
      () => chat.hits.find((h) => String(h.body.title).includes('pay.example.com')),
      5000,
    )
    expect(hit?.body).toMatchObject({
      provider: 'chat',
      title: 'Certificate for pay.example.com:443 expires in 4 days',
    })
    // notify subscribes to the bus; the rules only route: one event, one delivery.
    await until(async () => (await a.req('GET', '/api/v1/queue', { token: admin })).body.data.size === 0)
    expect(chat.hits.filter((h) => String(h.body.title).includes('pay.example.com'))).toHaveLength(1)
    const inc = await a.req('GET', '/api/v1/incidents?alert_id=certificate:c9', { token: admin })
    expect(inc.body.data.incidents[0]).toMatchObject({ rule_id: 'certs', events: 1 })
  })
})
