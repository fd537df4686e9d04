/**
 * The signed-ingestion load generator of the ingestion benchmarks (`ingest.ts`,
 * `analytics-realtime.ts`): a bootstrap (admin login, one game), request signing, and
 * connection loops posting signed batches whose event times replay 30 days over the run.
 */
import { join } from 'node:path'
import { USERS, eventsBody, shapes } from './events'

export const SECRET = 'bench-signing-secret'
const DAY = 86_400_000

/**
 * The YAML of a benchmark server with signed ingestion (no rate limit, no purge) and `plugins`
 * besides games and ingest (a YAML flow mapping's entries); returns its path. Log level info:
 * `startServer` waits for the "listening" line.
 */
export async function benchConfig(
  dir: string,
  plugins: string,
  ingest = '',
  top: string[] = [],
): Promise<string> {
  const config = join(dir, 'bench.yaml')
  await Bun.write(
    config,
    [
      `data_dir: ${dir}`,
      'rate_limit: { requests_per_minute: 0, burst: 0 }',
      'log: { level: info }',
      ...top,
      // Requests are signed before the run: on a loaded machine the signing and the warm-up took
      // minutes, past the default 300 s timestamp skew, and most requests answered 401. The HMAC
      // is still checked; only the freshness window is wider (the bare server checks none).
      `plugins: { games: {}, ingest: { signing_secret: ${SECRET}, purge_interval_minutes: 0, max_skew_s: 3600, nonce_window_s: 7200${ingest} }, ${plugins} }`,
      '',
    ].join('\n'),
  )
  return config
}

/** Logs in as the bootstrap admin (ADMIN_PASSWORD bench-password) and creates the game the load writes to. */
export async function bootstrap(base: string): Promise<{ token: string; gameId: string }> {
  const post = async (path: string, body: unknown, token?: string) =>
    (
      await fetch(`${base}${path}`, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          ...(token ? { authorization: `Bearer ${token}` } : {}),
        },
        body: JSON.stringify(body),
      })
    ).json()
  const { token } = await post('/api/auth/login', { email: 'admin@localhost', password: 'bench-password' })
  const game = await post(
    '/api/games',
    { name: 'Bench', genre: 'RPG', platforms: ['IOS'], timezone: 'UTC', defaultCurrency: 'USD' },
    token,
  )
  return { token, gameId: game.id }
}

/**
 * Seconds until every consumer of the event log has taken in all that is committed, asked of
 * `/api/v1/analytics/consumers` every 200 ms; a 503 (the store slow to answer on a loaded
 * machine) is asked again.
 */
export async function consumersCaughtUp(base: string, token: string): Promise<number> {
  const t0 = performance.now()
  for (;;) {
    const r = await fetch(`${base}/api/v1/analytics/consumers`, {
      headers: { authorization: `Bearer ${token}` },
    })
    const items = r.ok ? ((await r.json()).items as Array<{ lagEvents: number }>) : undefined
    if (!r.ok) await r.arrayBuffer()
    if (items?.every((c) => c.lagEvents === 0)) return Math.round((performance.now() - t0) / 100) / 10
    await Bun.sleep(200)
  }
}

export function sign(body: string): Record<string, string> {
  const ts = String(Math.floor(Date.now() / 1000))
  const nonce = crypto.randomUUID()
  const digest = new Bun.CryptoHasher('sha256').update(body).digest('hex')
  const sig = new Bun.CryptoHasher('sha256', SECRET).update(`${ts}\n${nonce}\n${digest}`).digest('base64')
  return { 'content-type': 'application/json', 'x-timestamp': ts, 'x-nonce': nonce, 'x-signature': sig }
}

export function paymentsBody(gameId: string, n: number, t: number, seq: { order: number }): string {
  const out: object[] = []
  for (let i = 0; i < n; i++)
    out.push({
      ts: String(Math.round(t + i)),
      game_id: gameId,
      env: 'prod',
      uid: `u${Math.floor(Math.random() * USERS)}`,
      event: 'payment',
      order_id: `o${++seq.order}`,
      status: Math.random() < 0.9 ? 'success' : 'refunded',
      amount_cents: 99 + Math.floor(Math.random() * 1000),
      currency: 'USD',
    })
  return JSON.stringify(out)
}

export interface LoadResult {
  requests: number
  acked: number
  /** Of `acked`, the payments (stored in their own table). */
  ackedPayments: number
  errors: number
  latencies: number[]
  seconds: number
  statuses: Record<string, number>
}

/** `connections` loops posting signed batches until `until`; counts the events each 200 acknowledged. */
export async function load(
  base: string,
  gameId: string,
  size: number,
  runSeconds: number,
  connections: number,
  stopAt?: number,
  /** Events of now instead of a 30-day replay (what a live game sends; realtime reads them). */
  live = false,
  /** Shapes made beforehand, so a run of several windows does not rebuild them inside each. */
  prebuilt?: string[],
  /** The first order id less one (windows against one store need order ids of their own). */
  orderBase?: number,
): Promise<LoadResult> {
  const t0 = performance.now()
  const until = t0 + runSeconds * 1000
  const simStart = Date.now() - 30 * DAY
  // Live runs follow one another against one store: their order ids must not repeat.
  const seq = { order: orderBase ?? (live ? Date.now() * 1000 : 0) }
  const res: LoadResult = {
    requests: 0,
    acked: 0,
    ackedPayments: 0,
    errors: 0,
    latencies: [],
    seconds: 0,
    statuses: {},
  }
  const pool = prebuilt ?? shapes(gameId)
  const loop = async () => {
    let k = 0
    while (performance.now() < (stopAt ?? until)) {
      const sim = live
        ? Date.now()
        : Math.min(Date.now(), simStart + ((performance.now() - t0) / (runSeconds * 1000)) * 30 * DAY)
      // One request in 100 carries 10 payments; the rest carry events.
      const payments = size > 1 && ++k % 100 === 0
      const path = payments ? '/api/ingest/payments' : '/api/ingest/events'
      const n = payments ? 10 : size
      const body = payments ? paymentsBody(gameId, n, sim, seq) : eventsBody(pool, n, sim)
      const s = performance.now()
      try {
        const r = await fetch(`${base}${path}`, { method: 'POST', headers: sign(body), body })
        await r.arrayBuffer()
        res.statuses[r.status] = (res.statuses[r.status] ?? 0) + 1
        if (r.status === 200) res.acked += n
        if (r.status === 200 && payments) res.ackedPayments += n
        else res.errors++
      } catch {
        res.errors++
        if (stopAt) return
      }
      res.requests++
      res.latencies.push(performance.now() - s)
    }
  }
  await Promise.all(Array.from({ length: connections }, loop))
  res.seconds = (performance.now() - t0) / 1000
  return res
}

export function summary(r: LoadResult) {
  const lat = [...r.latencies].sort((a, b) => a - b)
  return {
    eventsPerSec: Math.round(r.acked / r.seconds),
    requestsPerSec: Math.round(r.requests / r.seconds),
    p50ms: Math.round(lat[Math.floor(lat.length * 0.5)] * 10) / 10,
    p99ms: Math.round(lat[Math.floor(lat.length * 0.99)] * 10) / 10,
    errors: r.errors,
    acked: r.acked,
    statuses: r.statuses,
  }
}
