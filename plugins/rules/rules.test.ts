import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { type TestApp, forEachEngine, makeApp, until } from '../../test/helpers'
import { httpSink } from '../notify/testing'

forEachEngine((engine) => {
  let a: TestApp
  let admin: string
  const pager = httpSink()
  const chat = httpSink()
  beforeAll(async () => {
    a = await makeApp(engine, {
      plugins: {
        'webhook-provider': {},
        notify: {
          channels: {
            pager: { type: 'webhook', url: pager.url },
            chat: { type: 'webhook', url: chat.url },
          },
          routes: [{ levels: ['critical'], channels: ['chat'] }],
          retry: { base_ms: 10, max_ms: 50 },
        },
        rules: {},
      },
    })
    admin = await a.token('admin')
  })
  afterAll(async () => {
    await a.stop()
    pager.stop()
    chat.stop()
  })
  const as = (method: string, path: string, body?: unknown, token: string | null = admin) =>
    a.req(method, path, { token, body })
  const notify = (body: Record<string, unknown>, q = '') => as('POST', `/api/v1/notify${q}`, body)

  describe('rules CRUD', () => {
    test('create fills mode shadow, action route, priority; read, list, update (URL id wins), delete', async () => {
      const r = await as('POST', '/api/v1/rules', { id: 'db-lag', match: 'type == "db.lag"' })
      expect(r.status).toBe(200)
      expect(r.body.code).toBe(0)
      expect(r.body.data).toMatchObject({
        id: 'db-lag',
        match: 'type == "db.lag"',
        mode: 'shadow',
        action: 'route',
        shadow_hits: 0,
      })
      expect(r.body.data.priority).toBeUndefined()
      const one = await as('GET', '/api/v1/rules/db-lag')
      expect(one.body.data.shadow_stats).toEqual({
        total: 0,
        last_24h: 0,
        last_7d: 0,
        held: {},
        evaluation_errors: 0,
      })
      const list = await as('GET', '/api/v1/rules')
      expect(list.body.data.count).toBe(list.body.data.rules.length)
      expect(list.body.data.rules.map((x: { id: string }) => x.id)).toContain('db-lag')
      expect(list.body.data.rules[0].shadow_stats).toBeUndefined()
      const up = await as('PUT', '/api/v1/rules/db-lag', {
        id: 'other-id',
        match: 'type == "db.lag" && level == "error"',
        mode: 'off',
        priority: 7,
        route: [{ channels: ['pager'] }],
      })
      expect(up.status).toBe(200)
      expect(up.body.data).toMatchObject({ id: 'db-lag', mode: 'off', priority: 7 })
      expect((await as('GET', '/api/v1/rules/other-id')).status).toBe(404)
      const gen = await as('POST', '/api/v1/rules', { match: 'true', mode: 'off' })
      expect(gen.body.data.id).toMatch(/^[0-9a-f-]{36}$/)
      expect((await as('DELETE', `/api/v1/rules/${gen.body.data.id}`)).body).toMatchObject({
        code: 0,
        data: { id: gen.body.data.id },
      })
      expect((await as('DELETE', `/api/v1/rules/${gen.body.data.id}`)).status).toBe(404)
      expect((await as('GET', '/api/v1/rules/db-lag')).body.data.created_at).toBe(r.body.data.created_at)
    })

    test('an illegal expression answers 400 with its position and nothing is stored; a duplicate id 409', async () => {
      const before = (await as('GET', '/api/v1/rules')).body.data.count
      const bad = await as('POST', '/api/v1/rules', { id: 'bad-1', match: 'level == "x" && foo' })
      expect(bad.status).toBe(400)
      expect(bad.body.code).toBe(400)
      expect(bad.body.data).toMatchObject({ field: 'body.match', position: 16 })
      expect(bad.body.message).toContain('body.match')
      const cases: Array<[Record<string, unknown>, string]> = [
        [{ id: 'bad-2', match: 'true', action: 'suppress', route: [{ channels: ['pager'] }] }, 'body.route'],
        [
          { id: 'bad-3', match: 'true', route: [{ match: 'level ==', channels: ['pager'] }] },
          'body.route[0].match',
        ],
        [{ id: 'bad-4', match: 'true', mode: 'loud' }, 'body.mode'],
        [{ id: 'bad 5', match: 'true' }, 'body.id'],
        [{ id: 'bad-6', match: 'true', for: '25h' }, 'body.for'],
        [{ id: 'bad-7', match: 'true', group_interval: '1m' }, 'body.group_interval'],
        [{ id: 'bad-8', match: 'true', colour: 'red' }, 'body.colour'],
        [{ id: 'bad-9', match: 42 }, 'body.match'],
        [{ id: 'bad-10', match: 'true', inhibit: { source: 'nope(' } }, 'body.inhibit.source'],
        [{ id: 'bad-11', match: `title == "${'x'.repeat(2100)}"` }, 'body.match'],
      ]
      for (const [body, field] of cases) {
        const res = await as('POST', '/api/v1/rules', body)
        expect(res.status, JSON.stringify(body).slice(0, 80)).toBe(400)
        expect(res.body.message).toContain(field)
      }
      const arr = await a.req('POST', '/api/v1/rules', { token: admin, body: [{ match: 'true' }] })
      expect(arr.status).toBe(400)
      expect((await as('GET', '/api/v1/rules')).body.data.count).toBe(before)
      expect((await as('POST', '/api/v1/rules', { id: 'dup', match: 'true', mode: 'off' })).status).toBe(200)
      const dup = await as('POST', '/api/v1/rules', { id: 'dup', match: 'false' })
      expect(dup.status).toBe(409)
      expect((await as('GET', '/api/v1/rules/dup')).body.data.match).toBe('true')
      expect((await as('PUT', '/api/v1/rules/nope', { match: 'true' })).status).toBe(404)
    })

    test('no token 401, a viewer may read but not write 403, unknown 404', async () => {
      expect((await as('GET', '/api/v1/rules', undefined, null)).status).toBe(401)
      expect((await as('POST', '/api/v1/rules', { match: 'true' }, null)).status).toBe(401)
      const viewer = await a.token('viewer')
      expect((await as('GET', '/api/v1/rules', undefined, viewer)).status).toBe(200)
      expect((await as('POST', '/api/v1/rules', { match: 'true' }, viewer)).status).toBe(403)
      expect((await as('DELETE', '/api/v1/rules/dup', undefined, viewer)).status).toBe(403)
      const op = await a.token('operator')
      const made = await as('POST', '/api/v1/rules', { id: 'by-op', match: 'false', mode: 'off' }, op)
      expect(made.status).toBe(200)
      expect((await as('GET', '/api/v1/rules/ghost')).status).toBe(404)
      expect((await as('DELETE', '/api/v1/rules/ghost')).status).toBe(404)
    })
  })

  describe('evaluation', () => {
    test('the first active match decides, higher priority first, equal priority in write order; delivered to the route', async () => {
      await as('POST', '/api/v1/rules', {
        id: 'ev-low',
        match: 'type == "ev.a"',
        mode: 'active',
        route: [{ channels: ['chat'] }],
      })
      await as('POST', '/api/v1/rules', {
        id: 'ev-tie-1',
        match: 'type == "ev.a"',
        mode: 'active',
        priority: 5,
        route: [{ channels: ['pager'] }],
      })
      await as('POST', '/api/v1/rules', {
        id: 'ev-tie-2',
        match: 'type == "ev.a"',
        mode: 'active',
        priority: 5,
        route: [{ channels: ['chat'] }],
      })
      const r = await notify({ type: 'ev.a', level: 'info', title: 'first', params: { n: 1 } })
      expect(r.body).toMatchObject({ code: 0, data: { accepted: ['pager'] } })
      const hit = await until(() => pager.hits.find((h) => h.body.title === 'first'))
      expect(hit?.body.level).toBe('info')
      const dry = await notify({ type: 'ev.a', title: 'x' }, '?dry_run=true')
      expect(dry.body.data).toMatchObject({
        dry_run: true,
        explicit: false,
        rule: 'ev-tie-1',
        channels: ['pager'],
      })
      await as('PUT', '/api/v1/rules/ev-tie-1', {
        match: 'type == "ev.a"',
        mode: 'off',
        priority: 5,
        route: [{ channels: ['pager'] }],
      })
      expect((await notify({ type: 'ev.a', title: 'x' }, '?dry_run=true')).body.data.rule).toBe('ev-tie-2')
      await as('PUT', '/api/v1/rules/ev-tie-2', {
        match: 'type == "ev.a"',
        mode: 'active',
        priority: -1,
        route: [{ channels: ['chat'] }],
      })
      expect((await notify({ type: 'ev.a', title: 'x' }, '?dry_run=true')).body.data.rule).toBe('ev-low')
    })

    test('route steps: the first step whose match holds; groups of a step; no step holds: static routes', async () => {
      await as('POST', '/api/v1/rules', {
        id: 'steps',
        match: 'type == "ev.steps"',
        mode: 'active',
        route: [
          { match: 'params.region == "eu"', channels: ['pager'] },
          { match: 'level == "warning"', channels: ['chat', 'pager'] },
        ],
      })
      const d = (body: Record<string, unknown>) =>
        notify({ type: 'ev.steps', title: 't', ...body }, '?dry_run=true')
      expect((await d({ params: { region: 'eu' } })).body.data.channels).toEqual(['pager'])
      expect((await d({ level: 'warning' })).body.data.channels).toEqual(['chat', 'pager'])
      expect((await d({ level: 'critical' })).body.data.channels).toEqual(['chat'])
      expect((await d({ level: 'info' })).body.data).toMatchObject({
        rule: 'steps',
        channels: [],
        failed: [{ channel: '*' }],
      })
    })

    test('suppress holds the notification back; channels named in the request are never suppressed', async () => {
      await as('POST', '/api/v1/rules', {
        id: 'quiet',
        match: 'type == "ev.noise"',
        mode: 'active',
        action: 'suppress',
        priority: 100,
      })
      const before = pager.hits.length + chat.hits.length
      const r = await notify({ type: 'ev.noise', level: 'critical', title: 'noise' })
      expect(r.body).toMatchObject({
        code: 0,
        data: { accepted: [], task_ids: [], held: { rule: 'quiet', reason: 'suppressed' } },
      })
      const named = await notify({ type: 'ev.noise', level: 'critical', title: 'named', channels: ['pager'] })
      expect(named.body.data.accepted).toEqual(['pager'])
      expect(named.body.data.held).toBeUndefined()
      await until(() => pager.hits.find((h) => h.body.title === 'named'))
      expect(pager.hits.length + chat.hits.length).toBe(before + 1)
      const dry = await notify({ type: 'ev.noise', channels: ['chat'], title: 'x' }, '?dry_run=true')
      expect(dry.body.data).toMatchObject({ explicit: true, channels: ['chat'] })
      expect(dry.body.data.rule).toBeUndefined()
    })

    test('allow stops evaluation and lets the static routes decide', async () => {
      await as('POST', '/api/v1/rules', {
        id: 'allow-hi',
        match: 'type == "ev.allow"',
        mode: 'active',
        action: 'allow',
        priority: 50,
      })
      await as('POST', '/api/v1/rules', {
        id: 'allow-lo',
        match: 'type == "ev.allow"',
        mode: 'active',
        action: 'suppress',
        priority: 10,
      })
      const dry = await notify({ type: 'ev.allow', level: 'critical', title: 'x' }, '?dry_run=true')
      expect(dry.body.data).toMatchObject({
        rule: 'allow-hi',
        channels: ['chat'],
        explain: { action: 'allow' },
      })
    })

    test('shadow rules count hits and samples without deciding; active mode stops the count; a failing rule is skipped', async () => {
      await as('POST', '/api/v1/rules', {
        id: 'sh',
        match: 'type == "ev.sh" && params.n >= 2',
        route: [{ channels: ['pager'] }],
      })
      await as('POST', '/api/v1/rules', {
        id: 'sh-broken',
        match: 'type == "ev.sh" && params.obj > 1',
        mode: 'active',
        priority: 99,
      })
      for (const n of [1, 2, 3]) {
        const r = await notify({
          type: 'ev.sh',
          level: 'critical',
          title: `sh ${n}`,
          params: { n, obj: { x: 1 } },
        })
        expect(r.body.data.accepted).toEqual(['chat'])
      }
      const one = (await as('GET', '/api/v1/rules/sh')).body.data
      expect(one.shadow_hits).toBe(2)
      expect(one.shadow_stats).toMatchObject({ total: 2, last_24h: 2, last_7d: 2 })
      expect(one.shadow_stats.samples.map((s: { title: string }) => s.title)).toEqual(['sh 3', 'sh 2'])
      expect(one.shadow_stats.samples[0]).toMatchObject({
        type: 'ev.sh',
        level: 'critical',
        channels: ['pager'],
      })
      expect(Date.parse(one.shadow_stats.samples[0].at)).toBeGreaterThan(0)
      expect((await as('GET', '/api/v1/rules/sh-broken')).body.data.shadow_stats.evaluation_errors).toBe(3)
      const dry = await notify(
        { type: 'ev.sh', level: 'critical', title: 'd', params: { n: 5 } },
        '?dry_run=true',
      )
      expect(dry.body.data.explain).toEqual({ matched: false, shadow_matches: ['sh'] })
      expect((await as('GET', '/api/v1/rules/sh')).body.data.shadow_hits).toBe(2)
      await as('PUT', '/api/v1/rules/sh', {
        match: 'type == "ev.sh" && params.n >= 2',
        mode: 'active',
        route: [{ channels: ['pager'] }],
      })
      const routed = await notify({ type: 'ev.sh', level: 'critical', title: 'sh 4', params: { n: 4 } })
      expect(routed.body.data.accepted).toEqual(['pager'])
      expect((await as('GET', '/api/v1/rules/sh')).body.data.shadow_hits).toBe(2)
      const list = (await as('GET', '/api/v1/rules')).body.data.rules
      expect(list.find((r: { id: string }) => r.id === 'sh').shadow_hits).toBe(2)
    })

    test('a rule routing to an unknown group fails explicitly at dispatch', async () => {
      await as('POST', '/api/v1/rules', {
        id: 'to-ghost',
        match: 'type == "ev.ghost"',
        mode: 'active',
        route: [{ channels: ['group:ghosts', 'pager'] }],
      })
      const r = await notify({ type: 'ev.ghost', title: 'boo' })
      expect(r.body.data.accepted).toEqual(['pager'])
      expect(r.body.data.failed).toEqual([{ channel: 'group:ghosts', error: 'group not found: ghosts' }])
    })

    test('dry run: bad flag 400; nothing stored or sent', async () => {
      expect((await notify({ type: 'x', title: 't' }, '?dry_run=maybe')).status).toBe(400)
      await until(async () => (await as('GET', '/api/v1/queue')).body.data.size === 0)
      const before = (await as('GET', '/api/v1/logs?limit=500')).body.data.total
      const sent = pager.hits.length
      const d = await notify({ type: 'ev.a', title: 'dry' }, '?dry_run=true')
      expect(d.body.data.channels.length).toBeGreaterThan(0)
      expect((await as('GET', '/api/v1/logs?limit=500')).body.data.total).toBe(before)
      expect(pager.hits.length).toBe(sent)
      expect((await notify({ type: 'x', title: 't' }, '?dry_run=true')).status).toBe(200)
    })
  })
})
