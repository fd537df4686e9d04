import { afterAll, beforeAll, expect, test } from 'bun:test'
import { SECRET } from '../../plugins/ingest/testing'
import { type TestApp, clearOfMinute, forEachEngine, makeApp, until } from '../helpers'
import { GAME } from './lib'

/*
 * The eighteenth session's analytics audit, replayed as its attacker made it: one viewer opened
 * 10,000 realtime streams (each authorized in the route's own hook, so the rate limit never
 * counted one), took every `max_clients` slot of the process, and the admin's dashboard got 503.
 * The in-app message stream was open to the same.
 */
const LIMIT = 20
forEachEngine((engine) => {
  let a: TestApp
  let gameId: string
  let admin: string
  beforeAll(async () => {
    a = await makeApp(engine, {
      plugins: {
        games: {},
        ingest: { signing_secret: SECRET, purge_interval_minutes: 0 },
        analytics: {},
        notify: {},
        site: {},
      },
      config: { rate_limit: { requests_per_minute: LIMIT, burst: 0 } },
    })
    admin = await a.token('admin')
    gameId = String(
      (await a.req('POST', '/api/games', { token: admin, body: { ...GAME, name: 'Streams' } })).body.id,
    )
  })
  afterAll(() => a.stop())

  // EventSource sends no headers: the attacker's streams carried ?token=, as the dashboard's do.
  const streams = {
    realtime: {
      path: (token: string) => `/api/v1/analytics/realtime?gameId=${gameId}&env=prod&token=${token}`,
      gauge: 'svc_analytics_realtime_clients',
    },
    'in-app message': {
      path: (token: string) => `/api/v1/site/messages/stream?token=${token}`,
      gauge: 'svc_site_message_streams',
    },
  }
  const open = (path: string) => a.app.handle(new Request(`http://localhost${path}`))
  /** A stream that answered 200 and sent its first bytes: it is subscribed. */
  const live = async (path: string) => {
    const res = await open(path)
    expect(res.status).toBe(200)
    const reader = res.body!.getReader()
    await reader.read()
    return reader
  }
  const gauge = async (name: string) =>
    Number((await a.metrics.text()).match(new RegExp(`^${name} (\\d+)$`, 'm'))?.[1] ?? -1)

  for (const [what, s] of Object.entries(streams)) {
    const [holder, counted] = what === 'realtime' ? ['viewer', 'developer'] : ['analyst', 'operator']

    test(`one caller holds at most 16 ${what} streams: the 17th is 429 naming the cap, others still get in`, async () => {
      const token = await a.token(holder)
      const held: Array<Awaited<ReturnType<typeof live>>> = []
      for (let i = 0; i < 16; i++) held.push(await live(s.path(token)))
      const over = await open(s.path(token))
      expect(over.status).toBe(429)
      expect(JSON.stringify(await over.json())).toContain(
        `at most 16 ${what} streams open at once per caller`,
      )
      // Another user is not refused for it (the admin's dashboard got 503).
      const other = await live(s.path(admin))
      await other.cancel()
      // A closed stream gives its slot back.
      await held[0].cancel()
      await until(async () => (await gauge(s.gauge)) === 15, { what: `${s.gauge} at 15` })
      held[0] = await live(s.path(token))
      await Promise.all(held.map((r) => r.cancel()))
      await until(async () => (await gauge(s.gauge)) === 0, { what: `${s.gauge} at 0` })
    })

    test(`opening a ${what} stream counts against the caller's rate limit`, async () => {
      const token = await a.token(counted)
      await clearOfMinute(15_000)
      for (let i = 0; i < LIMIT; i++) await (await live(s.path(token))).cancel()
      const over = await open(s.path(token))
      expect(over.status).toBe(429)
      expect(JSON.stringify(await over.json())).toContain(
        `rate limit of ${LIMIT} requests per minute exceeded`,
      )
    })
  }
})
