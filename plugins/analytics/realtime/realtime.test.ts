import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { existsSync } from 'node:fs'
import { Elysia } from 'elysia'
import { chromium } from 'playwright-core'
import { definePlugin } from '../../../core/plugin'
import { type TestApp, forEachEngine, makeApp, until } from '../../../test/helpers'
import { SECRET, signed } from '../../ingest/testing'
import type { RealtimeHub } from './realtime'
import { SseReader, rawStream } from './realtime-testing'

// `.ci/run` installs Debian's chromium; a browser test that skipped would prove nothing.
const CHROMIUM = '/usr/bin/chromium'
if (!existsSync(CHROMIUM))
  throw new Error(`${CHROMIUM} is missing: apt-get install -y chromium (.ci/run does)`)

const MINUTE = 60_000
const DAY = 86_400_000

/** Hands the test the app's realtime hub: its clock and ticks are driven by the tests. */
function probe() {
  const got: { hub?: RealtimeHub } = {}
  const plugin = definePlugin({
    name: 'realtime_probe',
    dependsOn: ['analytics'],
    setup(ctx) {
      got.hub = ctx.service('realtime')
      return new Elysia({ name: 'realtime_probe' })
    },
  })
  return { got, plugin }
}

async function realtimeApp(
  engine: Parameters<typeof makeApp>[0],
  realtime: Record<string, unknown>,
  driven = true,
) {
  const p = probe()
  const a = await makeApp(engine, {
    plugins: {
      games: {},
      ingest: { signing_secret: SECRET, purge_interval_minutes: 0 },
      analytics: { realtime },
      realtime_probe: {},
    },
    extraPlugins: { realtime_probe: p.plugin },
  })
  const admin = await a.token('admin')
  const g = await a.req('POST', '/api/games', {
    token: admin,
    body: {
      name: 'Neon Arena',
      genre: 'ACTION',
      platforms: ['IOS'],
      timezone: 'Asia/Tokyo',
      defaultCurrency: 'USD',
    },
  })
  expect(g.status).toBe(201)
  const hub = p.got.hub!
  // Tests that drive ticks and pings themselves keep the timers from interleaving their own.
  if (driven) hub.stop()
  return { a, admin, gameId: String(g.body.id), hub }
}

/**
 * The clock of the stream: 12:30:20 in Tokyo (UTC+9) two days ago, far from a local midnight and
 * within the environment's retention. M is its minute (12:30), M1 and M2 the two before.
 */
const NOW = Math.floor(Date.now() / DAY) * DAY - 2 * DAY + 3 * 3_600_000 + 30 * MINUTE + 20_000
const M = NOW - 20_000
const M1 = M - MINUTE
const M2 = M - 2 * MINUTE

forEachEngine((engine) => {
  describe('realtime stream and series', () => {
    let a: TestApp
    let admin: string
    let gameId: string
    let hub: RealtimeHub
    const path = (q = '') => `/api/v1/analytics/realtime?gameId=${gameId}&env=prod${q}`
    const open = async (
      opts: { token?: string | null; q?: string; headers?: Record<string, string> } = {},
    ) => {
      const headers: Record<string, string> = { ...opts.headers }
      const token = opts.token === undefined ? admin : opts.token
      if (token) headers.authorization = `Bearer ${token}`
      return a.app.handle(new Request(`http://localhost${path(opts.q)}`, { headers }))
    }
    const stream = async (opts: Parameters<typeof open>[0] = {}) => {
      const res = await open(opts)
      expect(res.status).toBe(200)
      return new SseReader(res.body!)
    }

    beforeAll(async () => {
      ;({ a, admin, gameId, hub } = await realtimeApp(engine, {
        history: 3,
        max_clients: 40,
      }))
      hub.clock = () => NOW
      const ev = (event: string, uid: string, ts: number, attrs: Record<string, unknown> = {}) => ({
        event,
        ts: String(ts),
        game_id: gameId,
        env: 'prod',
        uid,
        ...attrs,
      })
      const events = [
        ev('session_start', 'u4', M2 + 1000, { session_id: 's4' }),
        ev('session_start', 'u1', M1 + 5000, { session_id: 's1' }),
        ev('heartbeat', 'u2', M1 + 10_000),
        ev('heartbeat', 'u1', M + 1000),
        ev('heartbeat', 'u3', M + 2000),
        ev('level_start', 'u1', M + 3000, { level: 1 }),
        ev('login', 'u5', M + 4000),
        // In the staging environment: never in prod's numbers.
        { ...ev('heartbeat', 'u9', M + 5000), env: 'staging' },
      ]
      expect((await signed(a, '/api/ingest/events', events)).status).toBe(200)
      const pay = (order: string, uid: string, status: string, cents: number, ts: number) =>
        ev('payment', uid, ts, { order_id: order, status, amount_cents: cents, currency: 'USD' })
      const payments = [
        pay('p1', 'u1', 'success', 499, M + 5000),
        pay('p2', 'u2', 'success', 1000, M1 + 20_000),
        pay('p3', 'u3', 'refunded', 300, M + 6000),
        // Yesterday in Tokyo: not today's revenue.
        pay('p0', 'u2', 'success', 700, NOW - DAY),
      ]
      expect((await signed(a, '/api/ingest/payments', payments)).status).toBe(200)
    })
    afterAll(() => a.stop())

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
        gameId,
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
      hub.heartbeat()
      for (const r of [r1, r2])
        expect((await r.next((f) => f.comments.includes('ping'))).comments).toEqual(['ping'])
      hub.clock = () => NOW + 5000
      await hub.tick()
      const [s1, s2] = [await r1.snapshot(), await r2.snapshot()]
      expect(s1.id).toBe(String(NOW + 5000))
      expect(s2).toEqual(s1)
      expect(s1.data.onlineNow).toBe(3)
      // The same clock twice: the id still moves on.
      await hub.tick()
      expect((await r1.snapshot()).id).toBe(String(NOW + 5001))
      await r1.cancel()
      await r2.cancel()
    })

    test('Last-Event-ID inside the history replays what was missed; outside it, a fresh snapshot', async () => {
      const r = await stream()
      const ids: string[] = []
      for (let i = 1; i <= 4; i++) {
        hub.clock = () => NOW + 10_000 * i
        await hub.tick()
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
      const base = hub.clients()
      expect(base).toBe(0)
      const readers: SseReader[] = []
      for (let i = 0; i < 30; i++) readers.push(await stream())
      expect(hub.clients()).toBe(30)
      await Promise.all(readers.map((r) => r.snapshot()))
      await Promise.all(readers.map((r) => r.cancel()))
      expect(hub.clients()).toBe(0)
      // Over a real socket: the client goes away, the server notices.
      const url = a.listen()
      const socks = Array.from({ length: 30 }, () =>
        rawStream(url, path(), { authorization: `Bearer ${admin}` }),
      )
      await until(() => socks.every((s) => s.state.snapshots > 0), {
        what: 'a snapshot on every socket',
        ms: 20_000,
      })
      expect(hub.clients()).toBe(30)
      const metrics = await a.metrics.text()
      expect(metrics).toContain('svc_analytics_realtime_clients 30')
      for (const s of socks) s.close()
      await until(() => hub.clients() === 0, { what: 'the subscriber count back to zero', ms: 20_000 })
      expect(await a.metrics.text()).toContain('svc_analytics_realtime_clients 0')
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
      expect(hub.clients()).toBe(0)
    })

    test('auth: 401 without or with a bad token (before the query is read), 403 without a role; query token and cookie work', async () => {
      const noToken = await a.app.handle(new Request('http://localhost/api/v1/analytics/realtime'))
      expect(noToken.status).toBe(401)
      expect(await noToken.json()).toMatchObject({ error: 'unauthorized' })
      expect((await open({ token: 'not-a-token' })).status).toBe(401)
      const roleless = a.auth.accessToken({
        id: 'x1',
        username: 'nobody',
        email: 'nobody@test.local',
        roles: [],
      })
      const refused = await open({ token: roleless })
      expect(refused.status).toBe(403)
      expect(await refused.json()).toMatchObject({ error: 'forbidden' })
      const viewer = await a.token('viewer')
      const byQuery = await stream({ token: null, q: `&token=${viewer}` })
      await byQuery.snapshot()
      await byQuery.cancel()
      const byCookie = await stream({ token: null, headers: { cookie: `service_token=${viewer}` } })
      await byCookie.snapshot()
      await byCookie.cancel()
      expect(hub.clients()).toBe(0)
      const series = await a.req('GET', `/api/v1/analytics/realtime/series?gameId=${gameId}&env=prod`)
      expect(series.status).toBe(401)
      const seriesRefused = await a.req(
        'GET',
        `/api/v1/analytics/realtime/series?gameId=${gameId}&env=prod`,
        {
          token: roleless,
        },
      )
      expect(seriesRefused.status).toBe(403)
    })

    test('bad params 400 naming the field; unknown game or environment 404', async () => {
      const noEnv = await a.app.handle(
        new Request(`http://localhost/api/v1/analytics/realtime?gameId=${gameId}`, {
          headers: { authorization: `Bearer ${admin}` },
        }),
      )
      expect(noEnv.status).toBe(400)
      expect((await noEnv.json()).details.field).toBe('query.env')
      const unknown = await a.app.handle(
        new Request('http://localhost/api/v1/analytics/realtime?gameId=nope&env=prod', {
          headers: { authorization: `Bearer ${admin}` },
        }),
      )
      expect(unknown.status).toBe(404)
      expect(await unknown.json()).toEqual({
        error: 'not_found',
        message: "game 'nope' not found",
        details: null,
      })
      const noSuchEnv = await a.app.handle(
        new Request(`http://localhost/api/v1/analytics/realtime?gameId=${gameId}&env=qa`, {
          headers: { authorization: `Bearer ${admin}` },
        }),
      )
      expect(noSuchEnv.status).toBe(404)
      const get = (q: string) => a.req('GET', `/api/v1/analytics/realtime/series?${q}`, { token: admin })
      for (const m of ['0', '1441', 'abc', '2.5']) {
        const r = await get(`gameId=${gameId}&env=prod&minutes=${m}`)
        expect(r.status).toBe(400)
        expect(r.body.details.field).toBe('query.minutes')
      }
      expect((await get('gameId=nope&env=prod')).status).toBe(404)
      expect((await get(`gameId=${gameId}&env=qa`)).status).toBe(404)
      const noEnvSeries = await get(`gameId=${gameId}`)
      expect(noEnvSeries.status).toBe(400)
      expect(noEnvSeries.body.details.field).toBe('query.env')
    })

    test('series: online, events and revenue per minute, oldest first, this minute last', async () => {
      hub.clock = () => NOW
      const r = await a.req('GET', `/api/v1/analytics/realtime/series?gameId=${gameId}&env=prod&minutes=3`, {
        token: admin,
      })
      expect(r.status).toBe(200)
      expect(r.body).toEqual({
        minutes: 3,
        points: [
          { minute: new Date(M2).toISOString(), online: 1, events: 1, revenue: 0 },
          { minute: new Date(M1).toISOString(), online: 2, events: 3, revenue: 10 },
          { minute: new Date(M).toISOString(), online: 2, events: 6, revenue: 4.99 },
        ],
      })
      const hour = await a.req('GET', `/api/v1/analytics/realtime/series?gameId=${gameId}&env=prod`, {
        token: admin,
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
          game_id: gameId,
          env: 'prod',
          uid: 'u1',
          order_id: 'p1',
          status: 'success',
          amount_cents: 499,
          currency: 'USD',
        },
      ]
      expect((await signed(a, '/api/ingest/payments', again)).status).toBe(200)
      const r = await a.req('GET', `/api/v1/analytics/realtime/series?gameId=${gameId}&env=prod&minutes=1`, {
        token: admin,
      })
      expect(r.body.points[0].revenue).toBe(4.99)
      hub.clock = () => NOW + 100_000
      const s = await stream()
      expect((await s.snapshot()).data.revenueToday).toBe(14.99)
      await s.cancel()
    })

    test('a deleted game ends its streams with event: end', async () => {
      expect(hub.clients()).toBe(0)
      const g = await a.req('POST', '/api/games', {
        token: admin,
        body: {
          name: 'Short Lived',
          genre: 'ACTION',
          platforms: ['IOS'],
          timezone: 'UTC',
          defaultCurrency: 'USD',
        },
      })
      const r = await a.app.handle(
        new Request(`http://localhost/api/v1/analytics/realtime?gameId=${g.body.id}&env=prod`, {
          headers: { authorization: `Bearer ${admin}` },
        }),
      )
      const sse = new SseReader(r.body!)
      expect((await sse.snapshot()).data.onlineNow).toBe(0)
      expect((await a.req('DELETE', `/api/games/${g.body.id}`, { token: admin })).status).toBeLessThan(300)
      hub.clock = () => NOW + 200_000
      await hub.tick()
      const end = await sse.next((f) => f.event === 'end')
      expect(JSON.parse(end.data!)).toMatchObject({ error: 'not_found' })
      expect(hub.clients()).toBe(0)
    })
    test('an EventSource in Chromium receives snapshots with ?token= and lets go when closed', async () => {
      const base = a.listen()
      const viewer = await a.token('viewer')
      hub.clock = () => NOW + 300_000
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
          [gameId, viewer],
        )
        type W = { got: Array<{ id: string; data: Record<string, unknown> }>; es: EventSource }
        await page.waitForFunction(() => (window as unknown as W).got.length > 0, null, { timeout: 15_000 })
        hub.clock = () => NOW + 305_000
        await hub.tick()
        await page.waitForFunction(() => (window as unknown as W).got.length > 1, null, { timeout: 15_000 })
        const got = await page.evaluate(() => (window as unknown as W).got)
        expect(got.map((x) => x.id)).toEqual([String(NOW + 300_000), String(NOW + 305_000)])
        // Five minutes on: the minute M and M1 are behind, today's totals stay.
        expect(got[1].data).toMatchObject({ gameId, onlineNow: 0, eventsPerMinute: 0, revenueToday: 14.99 })
        expect(await page.evaluate(() => (window as unknown as W).es.readyState)).toBe(1)
        expect(hub.clients()).toBe(1)
        await page.evaluate(() => (window as unknown as W).es.close())
        await until(() => hub.clients() === 0, { what: 'the closed EventSource to leave', ms: 20_000 })
      } finally {
        await browser.close()
      }
    })
  })

  describe('1,000 streams at once', () => {
    let a: TestApp
    let admin: string
    let gameId: string
    let hub: RealtimeHub
    beforeAll(async () => {
      ;({ a, admin, gameId, hub } = await realtimeApp(engine, { max_clients: 2000 }))
    })
    afterAll(() => a.stop())

    test('every one of 1,000 clients receives a snapshot and the server still answers', async () => {
      const base = a.listen()
      const socks = Array.from({ length: 1000 }, () =>
        rawStream(base, `/api/v1/analytics/realtime?gameId=${gameId}&env=prod`, {
          authorization: `Bearer ${admin}`,
        }),
      )
      try {
        await until(() => socks.every((s) => s.state.status === 200), {
          what: 'every stream answered 200',
          ms: 60_000,
        })
        await until(() => hub.clients() === 1000, { what: '1,000 subscribers', ms: 60_000 })
        await hub.tick()
        await until(() => socks.every((s) => s.state.snapshots >= 1), {
          what: 'a snapshot on every stream',
          ms: 60_000,
        })
        expect(socks.filter((s) => s.state.error || s.state.closed)).toHaveLength(0)
        const health = await fetch(`${base}/healthz`)
        expect(health.status).toBe(200)
        const ingest = await signed(a, '/api/ingest/events', [
          { event: 'heartbeat', ts: String(Date.now()), game_id: gameId, env: 'prod', uid: 'u1' },
        ])
        expect(ingest.status).toBe(200)
      } finally {
        for (const s of socks) s.close()
      }
      await until(() => hub.clients() === 0, { what: 'every subscriber gone', ms: 60_000 })
    })
  })

  test('on its own timers a stream gets a snapshot every interval_ms and pings between', async () => {
    const { a, admin, gameId, hub } = await realtimeApp(engine, { interval_ms: 200, heartbeat_ms: 50 }, false)
    try {
      const res = await a.app.handle(
        new Request(`http://localhost/api/v1/analytics/realtime?gameId=${gameId}&env=prod`, {
          headers: { authorization: `Bearer ${admin}` },
        }),
      )
      const r = new SseReader(res.body!)
      const first = await r.snapshot()
      await r.next((f) => f.comments.includes('ping'))
      const second = await r.snapshot()
      expect(Number(second.id)).toBeGreaterThan(Number(first.id))
      await r.cancel()
      expect(hub.clients()).toBe(0)
    } finally {
      await a.stop()
    }
  })
})
