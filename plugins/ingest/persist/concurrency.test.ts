import { afterAll, beforeAll, expect, test } from 'bun:test'
import { signRequest } from '../../../sdk/sign'
import { type TestApp, forEachEngine, makeApp } from '../../../test/helpers'

const SECRET = 'concurrency-secret'

// Group commit under parallel requests (several commits in flight on PostgreSQL): rollups stay
// exact, repeated orders are stored once, and every acknowledged event is stored.
forEachEngine((engine) => {
  let a: TestApp
  let admin: string
  let gameId: string
  beforeAll(async () => {
    a = await makeApp(engine, {
      plugins: { games: {}, ingest: { signing_secret: SECRET, purge_interval_minutes: 0 }, analytics: {} },
      config: { telemetry: { prometheus: { enabled: true, path: '/metrics/prometheus' } } },
    })
    admin = await a.token('admin')
    const g = await a.req('POST', '/api/games', {
      token: admin,
      body: { name: 'Parallel', genre: 'RPG', platforms: ['IOS'], timezone: 'UTC', defaultCurrency: 'USD' },
    })
    gameId = g.body.id
  })
  afterAll(() => a.stop())

  const post = async (path: string, list: unknown[]) => {
    const body = JSON.stringify(list)
    return a.req('POST', path, {
      raw: body,
      headers: { 'content-type': 'application/json', ...(await signRequest(SECRET, body)) },
    })
  }

  test('40 parallel requests: exact DAU, new users and revenue, online within 5%, acknowledged == stored', async () => {
    const ts = String(Date.now())
    const requests = Array.from({ length: 40 }, (_, r) => {
      // Users 0..59 overlap across requests; order ids repeat across requests.
      const events = Array.from({ length: 25 }, (_, i) => ({
        event: i % 2 ? 'login' : 'heartbeat',
        ts,
        game_id: gameId,
        env: 'prod',
        uid: `p${(r * 7 + i) % 60}`,
      }))
      const payments = [
        {
          event: 'payment',
          ts,
          game_id: gameId,
          env: 'prod',
          order_id: `ord-${r % 10}`,
          status: 'success',
          amount_cents: 100,
        },
      ]
      return [post('/api/ingest/events', events), post('/api/ingest/payments', payments)]
    }).flat()
    const answers = await Promise.all(requests)
    expect(answers.map((r) => r.status)).toEqual(answers.map(() => 200))
    const stored = await a.db.get<{ n: number }>(
      'SELECT COUNT(*) AS n FROM ingest_events WHERE game_id = ?',
      [gameId],
    )
    // A repeated order and status is one row of the log: 10 orders, each once.
    expect(Number(stored?.n)).toBe(40 * 25 + 10)

    // The plugin's metrics: every stored event counted once, in fewer commits than requests.
    const metrics = String((await a.req('GET', '/metrics/prometheus')).body)
    const value = (series: string) => Number(metrics.match(new RegExp(`^${series} (\\S+)$`, 'm'))?.[1])
    expect(value('svc_ingest_events_total\\{outcome="committed"\\}')).toBe(40 * 26)
    const commits = value('svc_ingest_commit_duration_seconds_count\\{outcome="committed"\\}')
    expect(commits).toBeGreaterThan(0)
    expect(commits).toBeLessThan(80)
    expect(value('svc_ingest_persist_thread_restarts_total')).toBe(0)

    const logins = new Set<string>()
    const all = new Set<string>()
    const beats = new Set<string>()
    for (let r = 0; r < 40; r++)
      for (let i = 0; i < 25; i++) {
        const u = `p${(r * 7 + i) % 60}`
        all.add(u)
        ;(i % 2 ? logins : beats).add(u)
      }
    const q = `gameId=${gameId}&env=prod&days=1`
    const dau = await a.req('GET', `/api/v1/analytics/warehouse/dau?${q}`, { token: admin })
    expect(dau.body.points[0]).toMatchObject({ dau: logins.size, newUsers: all.size })
    const rev = await a.req('GET', `/api/v1/analytics/warehouse/revenue?${q}`, { token: admin })
    expect(rev.body.points[0]).toMatchObject({ revenueCents: 1000, refundsCents: 0, failed: 0 })
    const online = await a.req('GET', `/api/v1/analytics/warehouse/online?gameId=${gameId}&minutes=5`, {
      token: admin,
    })
    const minute = new Date(Math.floor(Number(ts) / 60_000) * 60_000).toISOString()
    const point = online.body.points.find((p: { minute: string }) => p.minute === minute)
    // A HyperLogLog estimate: within 5% of the distinct heartbeat senders.
    expect(Math.abs(point.online - beats.size)).toBeLessThanOrEqual(Math.ceil(beats.size * 0.05))
  })
})
