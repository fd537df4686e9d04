import { beforeAll, describe, expect, test } from 'bun:test'
import { existsSync } from 'node:fs'
import { chromium } from 'playwright-core'
import { forEachEngine, until } from '../../../test/helpers'
import { signed } from '../../ingest/testing'
import { M, M1, M2, MINUTE, NOW, realtimeSuite, seedStream } from './realtime-fixture'
import { SseReader, rawStream } from './realtime-testing'

// `.ci/run` installs Debian's chromium; a browser test that skipped would prove nothing.
const CHROMIUM = '/usr/bin/chromium'
if (!existsSync(CHROMIUM))
  throw new Error(`${CHROMIUM} is missing: apt-get install -y chromium (.ci/run does)`)

// One app whose hub the tests drive (realtime-fixture.ts): snapshots, replays, clients, series.
forEachEngine((engine) => {
  describe('realtime stream and series', () => {
    const fx = realtimeSuite(engine, { history: 3, max_clients: 40, max_clients_per_principal: 100 })
    const path = (q = '') => `/api/v1/analytics/realtime?gameId=${fx.gameId}&env=prod${q}`
    const open = async (
      opts: { token?: string | null; q?: string; headers?: Record<string, string> } = {},
    ) => {
      const headers: Record<string, string> = { ...opts.headers }
      const token = opts.token === undefined ? fx.admin : opts.token
      if (token) headers.authorization = `Bearer ${token}`
      return fx.a.app.handle(new Request(`http://localhost${path(opts.q)}`, { headers }))
    }
    const stream = async (opts: Parameters<typeof open>[0] = {}) => {
      const res = await open(opts)
      expect(res.status).toBe(200)
      return new SseReader(res.body!)
    }

    beforeAll(async () => {
      fx.hub.clock = () => NOW
      await seedStream(fx.a, fx.gameId)
    })

    test('a snapshot carries the numbers of what was ingested', async () => {
      const res = await open()
      expect(res.headers.get('content-type')).toBe('text/event-stream; charset=utf-8')
      expect(res.headers.get('cache-control')).toContain('no-cache')
      const r = new SseReader(res.body!)
      expect((await r.next()).retry).toBe('3000')
      const s = await r.snapshot()
      // No snapshot was fresh: one was computed for this client, its id the clock.
      expect(s.id).toBe(String(NOW))
      expect(s.data).toEqual({
        gameId: fx.gameId,
        env: 'prod',
        ts: new Date(NOW).toISOString(),
        day: new Date(NOW + 9 * 3_600_000).toISOString().slice(0, 10),
        // heartbeat or session_start in M1 or M: u1, u2, u3 (u4 was in M2; login is not online).
        onlineNow: 3,
        // M1: u1's session_start, u2's heartbeat, payment p2.
        eventsPerMinute: 3,
        // M: two heartbeats, level_start, login, payments p1 and p3.
        eventsThisMinute: 6,
        // p1 4.99 + p2 10.00; p3 is a refund, p0 was yesterday.
        revenueToday: 14.99,
        // login or session_start today: u1, u4, u5.
        activeToday: 3,
      })
      await r.cancel()
    })

    test('ticks send one snapshot to every client, pings in between; ids increase', async () => {
      const r1 = await stream()
      const r2 = await stream()
      const first = await r1.snapshot()
      expect((await r2.snapshot()).id).toBe(first.id)
      fx.hub.heartbeat()
      for (const r of [r1, r2])
        expect((await r.next((f) => f.comments.includes('ping'))).comments).toEqual(['ping'])
      fx.hub.clock = () => NOW + 5000
      await fx.hub.tick()
      const [s1, s2] = [await r1.snapshot(), await r2.snapshot()]
      expect(s1.id).toBe(String(NOW + 5000))
      expect(s2).toEqual(s1)
      expect(s1.data.onlineNow).toBe(3)
      // The same clock twice: the id still moves on.
      await fx.hub.tick()
      expect((await r1.snapshot()).id).toBe(String(NOW + 5001))
      await r1.cancel()
      await r2.cancel()
    })

    test('Last-Event-ID inside the history replays what was missed; outside it, a fresh snapshot', async () => {
      const r = await stream()
      const ids: string[] = []
      for (let i = 1; i <= 4; i++) {
        fx.hub.clock = () => NOW + 10_000 * i
        await fx.hub.tick()
      }
      // Drain to the fourth tick: the history (3 snapshots) now holds the last three ticks.
      for (;;) {
        const s = await r.snapshot()
        ids.push(s.id)
        if (s.id === String(NOW + 40_000)) break
      }
      await r.cancel()
      const resumed = await stream({ headers: { 'last-event-id': String(NOW + 20_000) } })
      const note = await resumed.next((f) => f.comments.length > 0 && f.comments[0].startsWith('resumed'))
      expect(note.comments[0]).toBe(`resumed after ${NOW + 20_000}: 2 missed snapshot(s)`)
      expect((await resumed.snapshot()).id).toBe(String(NOW + 30_000))
      expect((await resumed.snapshot()).id).toBe(String(NOW + 40_000))
      await resumed.cancel()
      // Older than the history (it starts at the second tick): a comment says so, then the latest.
      const old = await stream({ q: `&lastEventId=${NOW + 10_000}` })
      const why = await old.next((f) => f.comments.some((c) => c.includes('not resumable')))
      expect(why.comments[0]).toBe(
        `Last-Event-ID ${NOW + 10_000} not resumable (the history holds ids ${NOW + 20_000} to ${NOW + 40_000}): fresh snapshot`,
      )
      expect((await old.snapshot()).id).toBe(String(NOW + 40_000))
      await old.cancel()
      // Garbage is no id at all.
      const junk = await stream({ headers: { 'last-event-id': 'abc' } })
      await junk.next((f) => f.comments.some((c) => c.includes('not resumable')))
      await junk.cancel()
    })

    test('disconnect cleanup: many streams opened and closed leave no subscriber', async () => {
      const base = fx.hub.clients()
      expect(base).toBe(0)
      const readers: SseReader[] = []
      for (let i = 0; i < 30; i++) readers.push(await stream())
      expect(fx.hub.clients()).toBe(30)
      await Promise.all(readers.map((r) => r.snapshot()))
      await Promise.all(readers.map((r) => r.cancel()))
      expect(fx.hub.clients()).toBe(0)
      // Over a real socket: the client goes away, the server notices.
      const url = fx.a.listen()
      const socks = Array.from({ length: 30 }, () =>
        rawStream(url, path(), { authorization: `Bearer ${fx.admin}` }),
      )
      await until(() => socks.every((s) => s.state.snapshots > 0), {
        what: 'a snapshot on every socket',
        ms: 20_000,
      })
      expect(fx.hub.clients()).toBe(30)
      const metrics = await fx.a.metrics.text()
      expect(metrics).toContain('svc_analytics_realtime_clients 30')
      for (const s of socks) s.close()
      await until(() => fx.hub.clients() === 0, { what: 'the subscriber count back to zero', ms: 20_000 })
      expect(await fx.a.metrics.text()).toContain('svc_analytics_realtime_clients 0')
    })

    test('beyond max_clients: 503 with Retry-After in the analytics error body', async () => {
      const readers: SseReader[] = []
      for (let i = 0; i < 40; i++) readers.push(await stream())
      const over = await open()
      expect(over.status).toBe(503)
      expect(over.headers.get('retry-after')).toBe('3')
      expect(await over.json()).toEqual({
        error: 'service_unavailable',
        message: 'this server holds its maximum of 40 realtime clients; retry later',
        details: { retry_after: 3, max_clients: 40 },
      })
      await readers[0].cancel()
      const again = await stream()
      await again.cancel()
      await Promise.all(readers.slice(1).map((r) => r.cancel()))
      expect(fx.hub.clients()).toBe(0)
    })

    test('auth: 401 without or with a bad token (before the query is read), 403 without a role; query token and cookie work', async () => {
      const noToken = await fx.a.app.handle(new Request('http://localhost/api/v1/analytics/realtime'))
      expect(noToken.status).toBe(401)
      expect(await noToken.json()).toMatchObject({ error: 'unauthorized' })
      expect((await open({ token: 'not-a-token' })).status).toBe(401)
      const roleless = fx.a.auth.accessToken({
        id: 'x1',
        username: 'nobody',
        email: 'nobody@test.local',
        roles: [],
      })
      const refused = await open({ token: roleless })
      expect(refused.status).toBe(403)
      expect(await refused.json()).toMatchObject({ error: 'forbidden' })
      const viewer = await fx.a.token('viewer')
      const byQuery = await stream({ token: null, q: `&token=${viewer}` })
      await byQuery.snapshot()
      await byQuery.cancel()
      const byCookie = await stream({ token: null, headers: { cookie: `service_token=${viewer}` } })
      await byCookie.snapshot()
      await byCookie.cancel()
      expect(fx.hub.clients()).toBe(0)
      const series = await fx.a.req('GET', `/api/v1/analytics/realtime/series?gameId=${fx.gameId}&env=prod`)
      expect(series.status).toBe(401)
      const seriesRefused = await fx.a.req(
        'GET',
        `/api/v1/analytics/realtime/series?gameId=${fx.gameId}&env=prod`,
        {
          token: roleless,
        },
      )
      expect(seriesRefused.status).toBe(403)
    })

    test('bad params 400 naming the field; unknown game or environment 404', async () => {
      const noEnv = await fx.a.app.handle(
        new Request(`http://localhost/api/v1/analytics/realtime?gameId=${fx.gameId}`, {
          headers: { authorization: `Bearer ${fx.admin}` },
        }),
      )
      expect(noEnv.status).toBe(400)
      expect((await noEnv.json()).details.field).toBe('query.env')
      const unknown = await fx.a.app.handle(
        new Request('http://localhost/api/v1/analytics/realtime?gameId=nope&env=prod', {
          headers: { authorization: `Bearer ${fx.admin}` },
        }),
      )
      expect(unknown.status).toBe(404)
      expect(await unknown.json()).toEqual({
        error: 'not_found',
        message: "game 'nope' not found",
        details: null,
      })
      const noSuchEnv = await fx.a.app.handle(
        new Request(`http://localhost/api/v1/analytics/realtime?gameId=${fx.gameId}&env=qa`, {
          headers: { authorization: `Bearer ${fx.admin}` },
        }),
      )
      expect(noSuchEnv.status).toBe(404)
      const get = (q: string) =>
        fx.a.req('GET', `/api/v1/analytics/realtime/series?${q}`, { token: fx.admin })
      for (const m of ['0', '1441', 'abc', '2.5']) {
        const r = await get(`gameId=${fx.gameId}&env=prod&minutes=${m}`)
        expect(r.status).toBe(400)
        expect(r.body.details.field).toBe('query.minutes')
      }
      expect((await get('gameId=nope&env=prod')).status).toBe(404)
      expect((await get(`gameId=${fx.gameId}&env=qa`)).status).toBe(404)
      const noEnvSeries = await get(`gameId=${fx.gameId}`)
      expect(noEnvSeries.status).toBe(400)
      expect(noEnvSeries.body.details.field).toBe('query.env')
    })

    test('series: online, events and revenue per minute, oldest first, this minute last', async () => {
      fx.hub.clock = () => NOW
      const r = await fx.a.req(
        'GET',
        `/api/v1/analytics/realtime/series?gameId=${fx.gameId}&env=prod&minutes=3`,
        {
          token: fx.admin,
        },
      )
      expect(r.status).toBe(200)
      expect(r.body).toEqual({
        minutes: 3,
        points: [
          { minute: new Date(M2).toISOString(), online: 1, events: 1, revenue: 0 },
          { minute: new Date(M1).toISOString(), online: 2, events: 3, revenue: 10 },
          { minute: new Date(M).toISOString(), online: 2, events: 6, revenue: 4.99 },
        ],
      })
      const hour = await fx.a.req('GET', `/api/v1/analytics/realtime/series?gameId=${fx.gameId}&env=prod`, {
        token: fx.admin,
      })
      expect(hour.body.minutes).toBe(60)
      expect(hour.body.points).toHaveLength(60)
      expect(hour.body.points[0]).toEqual({
        minute: new Date(M - 59 * MINUTE).toISOString(),
        online: 0,
        events: 0,
        revenue: 0,
      })
      expect(hour.body.points.at(-1).minute).toBe(new Date(M).toISOString())
    })

    test('a payment sent again by a retrying client adds its revenue once', async () => {
      const again = [
        {
          event: 'payment',
          ts: String(M + 5000),
          game_id: fx.gameId,
          env: 'prod',
          uid: 'u1',
          order_id: 'p1',
          status: 'success',
          amount_cents: 499,
          currency: 'USD',
        },
      ]
      expect((await signed(fx.a, '/api/ingest/payments', again)).status).toBe(200)
      const r = await fx.a.req(
        'GET',
        `/api/v1/analytics/realtime/series?gameId=${fx.gameId}&env=prod&minutes=1`,
        {
          token: fx.admin,
        },
      )
      expect(r.body.points[0].revenue).toBe(4.99)
      fx.hub.clock = () => NOW + 100_000
      const s = await stream()
      expect((await s.snapshot()).data.revenueToday).toBe(14.99)
      await s.cancel()
    })

    test('a deleted game ends its streams with event: end', async () => {
      expect(fx.hub.clients()).toBe(0)
      const g = await fx.a.req('POST', '/api/games', {
        token: fx.admin,
        body: {
          name: 'Short Lived',
          genre: 'ACTION',
          platforms: ['IOS'],
          timezone: 'UTC',
          defaultCurrency: 'USD',
        },
      })
      const r = await fx.a.app.handle(
        new Request(`http://localhost/api/v1/analytics/realtime?gameId=${g.body.id}&env=prod`, {
          headers: { authorization: `Bearer ${fx.admin}` },
        }),
      )
      const sse = new SseReader(r.body!)
      expect((await sse.snapshot()).data.onlineNow).toBe(0)
      expect((await fx.a.req('DELETE', `/api/games/${g.body.id}`, { token: fx.admin })).status).toBeLessThan(
        300,
      )
      fx.hub.clock = () => NOW + 200_000
      await fx.hub.tick()
      const end = await sse.next((f) => f.event === 'end')
      expect(JSON.parse(end.data!)).toMatchObject({ error: 'not_found' })
      expect(fx.hub.clients()).toBe(0)
    })
    test('an EventSource in Chromium receives snapshots with ?token= and lets go when closed', async () => {
      const base = fx.a.listen()
      const viewer = await fx.a.token('viewer')
      fx.hub.clock = () => NOW + 300_000
      const browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] })
      try {
        const page = await browser.newPage()
        // Same origin as the API: the page an operator dashboard would be.
        await page.goto(`${base}/healthz`)
        await page.evaluate(
          ([g, t]) => {
            const w = window as unknown as { got: Array<{ id: string; data: unknown }>; es: EventSource }
            w.got = []
            w.es = new EventSource(`/api/v1/analytics/realtime?gameId=${g}&env=prod&token=${t}`)
            w.es.addEventListener('snapshot', (e) => {
              const m = e as MessageEvent
              w.got.push({ id: m.lastEventId, data: JSON.parse(m.data) })
            })
          },
          [fx.gameId, viewer],
        )
        type W = { got: Array<{ id: string; data: Record<string, unknown> }>; es: EventSource }
        await page.waitForFunction(() => (window as unknown as W).got.length > 0, null, { timeout: 15_000 })
        fx.hub.clock = () => NOW + 305_000
        await fx.hub.tick()
        await page.waitForFunction(() => (window as unknown as W).got.length > 1, null, { timeout: 15_000 })
        const got = await page.evaluate(() => (window as unknown as W).got)
        expect(got.map((x) => x.id)).toEqual([String(NOW + 300_000), String(NOW + 305_000)])
        // Five minutes on: the minute M and M1 are behind, today's totals stay.
        expect(got[1].data).toMatchObject({
          gameId: fx.gameId,
          onlineNow: 0,
          eventsPerMinute: 0,
          revenueToday: 14.99,
        })
        expect(await page.evaluate(() => (window as unknown as W).es.readyState)).toBe(1)
        expect(fx.hub.clients()).toBe(1)
        await page.evaluate(() => (window as unknown as W).es.close())
        await until(() => fx.hub.clients() === 0, { what: 'the closed EventSource to leave', ms: 20_000 })
      } finally {
        await browser.close()
      }
    })
  })
})
