import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { stringify } from 'yaml'
import { type LiveopsApp, createApp } from '../core/app'
import { loadConfig } from '../core/config'
import { createLogger } from '../core/log'
import { plugins } from '../plugins'
import { httpSink, ownStore } from '../plugins/notify/testing'
import { type Engine, engines, hashOnce, until } from './helpers'
import { ownRedis } from './own-redis'

/**
 * Issue 21 point 2: the platform rate limit, login throttling, notify's idempotency keys and the
 * rate-limits gateway bucket hold across instances (Redis when configured, else the database) and
 * across restarts; with Redis down each instance counts alone, says so, and refuses nothing for it.
 */
const REDIS = process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379'
const ADMIN = 'shared-admin-token'
const PASSWORD = 'correct-horse-21'
const sink = httpSink()
afterAll(() => sink.stop())

type Store = Awaited<ReturnType<typeof ownStore>>
type Options = { redis?: string; gateway?: boolean; name: string }

async function instance(store: Store, o: Options) {
  const lines: string[] = []
  const yaml = stringify({
    data_dir: `${store.dataDir}/${o.name}`,
    database: { url: store.url, pool: 4 },
    auth: { jwt_secret: 'shared-jwt-secret-0001', admin_token: ADMIN },
    admin: { email: 'admin@localhost', password: 'admin-password' },
    rate_limit: { requests_per_minute: 4, burst: 0 },
    redis: { url: o.redis ?? '' },
    server: { trust_forwarded_for: true },
    log: { level: 'info', requests: false },
    plugins: {
      'webhook-provider': {},
      notify: {
        auth: { enabled: true },
        queue: { poll_ms: 20 },
        channels: { hook: { type: 'webhook', url: sink.url } },
      },
      ...(o.gateway
        ? {
            games: {},
            ingest: {},
            agents: {},
            'rate-limits': { rateLimit: { requestsPerMinute: 6, burstSize: 3 } },
          }
        : {}),
    },
  })
  const config = loadConfig(yaml, plugins, {})
  const app: LiveopsApp = await createApp(config, {
    plugins,
    pgSchema: store.schema,
    log: createLogger(config.core.log, (l) => lines.push(l)),
    hashPassword: hashOnce,
    clock,
  })
  const req = async (
    method: string,
    path: string,
    opts: { body?: unknown; token?: string; admin?: boolean; ip?: string } = {},
  ) => {
    const headers: Record<string, string> = {}
    if (opts.body !== undefined) headers['content-type'] = 'application/json'
    if (opts.token) headers.authorization = `Bearer ${opts.token}`
    if (opts.admin) headers['x-admin-token'] = ADMIN
    if (opts.ip) headers['x-forwarded-for'] = opts.ip
    const res = await app.app.handle(
      new Request(`http://localhost${path}`, {
        method,
        headers,
        body: opts.body === undefined ? undefined : JSON.stringify(opts.body),
      }),
    )
    const text = await res.text()
    return {
      status: res.status,
      headers: res.headers,
      // biome-ignore lint/suspicious/noExplicitAny: test bodies are read loosely
      body: (text ? JSON.parse(text) : undefined) as any,
    }
  }
  return { app, req, lines, stop: () => app.stop() }
}
type Instance = Awaited<ReturnType<typeof instance>>

const unique = () => crypto.randomUUID().slice(0, 8)
const randomIp = () =>
  `10.${Math.floor(Math.random() * 250)}.${Math.floor(Math.random() * 250)}.${Math.floor(Math.random() * 250) + 1}`

/** A fresh operator (a fresh budget); any instance signs tokens every instance accepts. */
async function operator(on: Instance) {
  const name = `op-${unique()}`
  const user = await on.app.auth.createUser(
    { email: `${name}@example.org`, username: name, password: PASSWORD, roles: ['operator'] },
    hashOnce(PASSWORD),
  )
  return { user, token: on.app.auth.accessToken(user) }
}

/**
 * The minute windows are fixed: a budget test starts at second 5 of a minute by the apps' clock
 * (never near the edge, where its counts would split over two windows), without waiting for it.
 */
let offset = 0
const clock = () => Date.now() + offset
function midMinute() {
  offset = 5_000 - (Date.now() % 60_000)
}

/** An authenticated request through the guard: its status and what remains of the budget. */
const spend = async (on: Instance, token: string) => {
  const r = await on.req('GET', '/api/v1/queue', { token })
  return r.status === 200 ? Number(r.headers.get('x-ratelimit-remaining')) : r.status
}

/** The checks of the budget, the lockout and the idempotency key, on any pair of instances. */
function sharedBehaviour(pair: () => { a: Instance; b: Instance }) {
  test('the platform budget spent on A counts on B', async () => {
    const { a, b } = pair()
    midMinute()
    const { token } = await operator(a)
    expect([
      await spend(a, token),
      await spend(b, token),
      await spend(a, token),
      await spend(b, token),
    ]).toEqual([3, 2, 1, 0])
    const over = await b.req('GET', '/api/v1/queue', { token })
    expect(over.status).toBe(429)
    expect(over.body).toMatchObject({ code: 429, data: { limit: 4 } })
    expect(Number(over.headers.get('retry-after'))).toBeGreaterThan(0)
    expect(await spend(a, token)).toBe(429)
    // Refused requests gave their count back; another user's budget is whole.
    expect(await spend(b, (await operator(b)).token)).toBe(3)
  })

  test('a login lockout started on A holds on B; another address is not held', async () => {
    const { a, b } = pair()
    const { user } = await operator(a)
    const ip = randomIp()
    const login = (on: Instance, password: string, from = ip) =>
      on.req('POST', '/api/auth/login', { body: { email: user.email, password }, ip: from })
    for (let i = 0; i < 5; i++) expect((await login(i % 2 ? b : a, `guess-${i}`)).status).toBe(401)
    const held = await login(b, PASSWORD)
    expect(held.status).toBe(429)
    expect(held.body.error).toBe('too_many_attempts')
    expect((await login(a, PASSWORD)).status).toBe(429)
    // The account's own lock (from any address that never logged in) is shared as well; the
    // address is not held for another account (its threshold is 20).
    const stranger = await login(a, PASSWORD, randomIp())
    expect(stranger.status).toBe(429)
    expect(Number(stranger.headers.get('retry-after'))).toBeLessThanOrEqual(60)
    const other = await operator(b)
    expect(
      (await b.req('POST', '/api/auth/login', { body: { email: other.user.email, password: PASSWORD }, ip }))
        .status,
    ).toBe(200)
  }, 60_000)

  test('an idempotency key accepted on A answers the same on B and sends once, concurrent twins too', async () => {
    const { a, b } = pair()
    const title = `once-${unique()}`
    const body = { type: 'x', channel: 'hook', title, idempotency_key: `key-${title}` }
    const first = await a.req('POST', '/api/v1/notify', { body, admin: true })
    expect(first.body.code).toBe(0)
    const again = await b.req('POST', '/api/v1/notify', { body, admin: true })
    expect(again.body).toEqual(first.body)

    const raced = `raced-${unique()}`
    const twin = { type: 'x', channel: 'hook', title: raced, idempotency_key: `key-${raced}` }
    const answers = await Promise.all(
      [a, b, a, b].map((on) => on.req('POST', '/api/v1/notify', { body: twin, admin: true })),
    )
    expect(answers.map((r) => r.body.code)).toEqual([0, 0, 0, 0])
    expect(new Set(answers.map((r) => r.body.data.notification_id)).size).toBe(1)

    const sent = (t: string) => sink.hits.filter((h) => JSON.stringify(h.body).includes(t)).length
    expect(await until(async () => sent(title) >= 1 && sent(raced) >= 1, 10_000)).toBe(true)
    // Every delivery is finished on both instances before counting: nothing else is on its way.
    expect(
      await until(
        async () =>
          (await a.req('GET', '/api/v1/queue', { admin: true })).body.data.size === 0 &&
          (await b.req('GET', '/api/v1/queue', { admin: true })).body.data.size === 0,
        10_000,
      ),
    ).toBe(true)
    expect([sent(title), sent(raced)]).toEqual([1, 1])
  })
}

for (const engine of (['postgres', 'mysql'] as const).filter((e) => engines.includes(e)))
  for (const shared of ['database', 'redis'] as const)
    describe(`[${engine}, ${shared}] two instances`, () => {
      let store: Store
      let a: Instance
      let b: Instance
      beforeAll(async () => {
        store = await ownStore(engine)
        const redis = shared === 'redis' ? REDIS : undefined
        a = await instance(store, { name: 'a', redis })
        b = await instance(store, { name: 'b', redis })
      })
      afterAll(async () => {
        await a?.stop()
        await b?.stop()
        await store?.drop()
      })

      sharedBehaviour(() => ({ a, b }))

      test('the rate-limits gateway bucket is one bucket for both', async () => {
        const ga = await instance(store, {
          name: 'ga',
          redis: shared === 'redis' ? REDIS : undefined,
          gateway: true,
        })
        const gb = await instance(store, {
          name: 'gb',
          redis: shared === 'redis' ? REDIS : undefined,
          gateway: true,
        })
        try {
          const { token } = await operator(ga)
          // Three tokens in all (refilled at one per 10 s), whichever instance takes them.
          expect([await spend(ga, token), await spend(gb, token), await spend(ga, token)]).toEqual([2, 1, 0])
          const over = await gb.req('GET', '/api/v1/queue', { token })
          expect(over.status).toBe(429)
          expect(over.body.data).toMatchObject({ limit: 6, burst: 3 })
          expect(await spend(ga, token)).toBe(429)
        } finally {
          await ga.stop()
          await gb.stop()
        }
      })
    })

describe.if(engines.includes('postgres'))('[postgres] Redis stopped and started again', () => {
  let store: Store
  let a: Instance
  let b: Instance
  const redis = ownRedis()
  beforeAll(async () => {
    store = await ownStore('postgres')
    await redis.start()
    a = await instance(store, { name: 'a', redis: redis.url })
    b = await instance(store, { name: 'b', redis: redis.url })
  })
  afterAll(async () => {
    await a?.stop()
    await b?.stop()
    await redis.stop()
    await store?.drop()
  })

  test('down: each instance counts alone, warns, fails the redis check (not readiness), refuses nothing for it; back: shared again', async () => {
    midMinute()
    const shared = await operator(a)
    expect([await spend(a, shared.token), await spend(b, shared.token)]).toEqual([3, 2])

    await redis.stop()
    const { token } = await operator(a)
    // Per process now: A's four requests do not touch B's budget, and nothing is refused early.
    expect([
      await spend(a, token),
      await spend(a, token),
      await spend(a, token),
      await spend(a, token),
    ]).toEqual([3, 2, 1, 0])
    expect(await spend(a, token)).toBe(429)
    expect(await spend(b, token)).toBe(3)
    expect(a.lines.join('\n')).toContain('redis unavailable')
    const health = await a.req('GET', '/healthz')
    expect(health.body.checks.redis.status).toBe('down')
    expect((await a.req('GET', '/readyz')).status).toBe(200)
    // Logins and idempotent notifications go on as well.
    expect(
      (
        await b.req('POST', '/api/auth/login', {
          body: { email: shared.user.email, password: PASSWORD },
          ip: randomIp(),
        })
      ).status,
    ).toBe(200)
    const title = `outage-${unique()}`
    const sent = await a.req('POST', '/api/v1/notify', {
      body: { type: 'x', channel: 'hook', title, idempotency_key: title },
      admin: true,
    })
    expect(sent.body.code).toBe(0)

    await redis.start()
    // Shared again once Redis answers: a fresh budget spent on A counts on B.
    const again = await until(async () => {
      const t = (await operator(a)).token
      return (await spend(a, t)) === 3 && (await spend(b, t)) === 2 && (await spend(a, t)) === 1
    }, 15_000)
    expect(again).toBe(true)
    expect(
      await until(async () => (await a.req('GET', '/healthz')).body.checks.redis.status === 'up', 10_000),
    ).toBe(true)
    expect(a.lines.join('\n')).toContain('redis answers again')
  }, 60_000)
})

/**
 * One SQLite instance (one file serves one instance): lockouts and idempotency keys are kept in
 * the database and hold across a restart; request budgets stay in memory (no write per request
 * through SQLite's one writer), so a restart starts them afresh.
 */
describe.if(engines.includes('sqlite'))('[sqlite] one instance restarted', () => {
  let store: Store
  const engine: Engine = 'sqlite'
  beforeAll(async () => {
    store = await ownStore(engine)
  })
  afterAll(async () => {
    await store?.drop()
  })

  test('a lockout and an idempotency key outlive a restart; the budget and the gateway bucket start afresh', async () => {
    midMinute()
    let a = await instance(store, { name: 'a' })
    const { user, token } = await operator(a)
    expect([await spend(a, token), await spend(a, token)]).toEqual([3, 2])
    const ip = randomIp()
    for (let i = 0; i < 5; i++)
      expect(
        (await a.req('POST', '/api/auth/login', { body: { email: user.email, password: `g${i}` }, ip }))
          .status,
      ).toBe(401)
    const title = `restart-${unique()}`
    const body = { type: 'x', channel: 'hook', title, idempotency_key: title }
    const first = await a.req('POST', '/api/v1/notify', { body, admin: true })
    expect(first.body.code).toBe(0)
    await a.stop()

    a = await instance(store, { name: 'a' })
    try {
      expect([await spend(a, token), await spend(a, token), await spend(a, token)]).toEqual([3, 2, 1])
      expect(
        (await a.req('POST', '/api/auth/login', { body: { email: user.email, password: PASSWORD }, ip }))
          .status,
      ).toBe(429)
      expect((await a.req('POST', '/api/v1/notify', { body, admin: true })).body).toEqual(first.body)
      expect(
        await until(async () => sink.hits.some((h) => JSON.stringify(h.body).includes(title)), 10_000),
      ).toBe(true)
      expect(
        await until(
          async () => (await a.req('GET', '/api/v1/queue', { admin: true })).body.data.size === 0,
          10_000,
        ),
      ).toBe(true)
      expect(sink.hits.filter((h) => JSON.stringify(h.body).includes(title))).toHaveLength(1)
    } finally {
      await a.stop()
    }

    const g = await instance(store, { name: 'g', gateway: true })
    const gate = await operator(g)
    expect([await spend(g, gate.token), await spend(g, gate.token)]).toEqual([2, 1])
    await g.stop()
    const g2 = await instance(store, { name: 'g', gateway: true })
    try {
      expect([await spend(g2, gate.token), await spend(g2, gate.token)]).toEqual([2, 1])
    } finally {
      await g2.stop()
    }
  }, 60_000)
})
