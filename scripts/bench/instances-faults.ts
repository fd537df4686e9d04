/**
 * The bad days of three instances on one PostgreSQL and Redis (issue 36), each part with a
 * PostgreSQL and a redis-server of its own (the shared servers are never stopped):
 *
 *  - outage: signed ingestion, notifications and reads from 24 clients while PostgreSQL is stopped
 *    for 3 s and started again: the longest wait, and every answer 2xx or 503 with Retry-After;
 *  - burst: 450 concurrent requests of one user over the three instances against the rate-limits
 *    gateway bucket (100 tokens) in Redis: how many got through;
 *  - takeover: one instance killed (SIGKILL) with deliveries in flight to a slow webhook: how long
 *    until each delivery it was sending reached the receiver from another instance.
 */
import { type OwnPostgres, ownPostgres } from '../../test/own-postgres'
import { ownRedis } from '../../test/own-redis'
import { type Fleet, SIGNING_SECRET, createGame, ingestRequest, startFleet } from './fleet'

const NAMES = ['a', 'b', 'c']

/** Three instances with `plugins` on a PostgreSQL and a redis-server of their own, for `fn`. */
async function withFleet<T>(
  plugins: Record<string, unknown>,
  fn: (fleet: Fleet, pg: OwnPostgres) => Promise<T>,
): Promise<T> {
  const pg = ownPostgres()
  const redis = ownRedis()
  await redis.start()
  try {
    const fleet = await startFleet({ names: NAMES, databaseUrl: pg.url, redisUrl: redis.url, plugins })
    try {
      return await fn(fleet, pg)
    } finally {
      await fleet.stop()
    }
  } finally {
    await redis.stop()
    pg.destroy()
  }
}

/** A sink answering every webhook after `holdMs`; it notes each arrival and each sender that hung up. */
function slowSink(holdMs: number) {
  const arrivals = new Map<string, number[]>()
  const abandoned = new Map<string, number>()
  /** Arrivals whose X-Liveops-Delivery was not the delivery's id. */
  let mislabelled = 0
  const server = Bun.serve({
    port: 0,
    hostname: '127.0.0.1',
    idleTimeout: 60,
    async fetch(req) {
      const id = String(((await req.json()) as { id: string }).id)
      if (req.headers.get('x-liveops-delivery') !== id) mislabelled++
      arrivals.set(id, [...(arrivals.get(id) ?? []), performance.now()])
      const hung = new Promise<void>((r) => req.signal.addEventListener('abort', () => r()))
      const done = await Promise.race([Bun.sleep(holdMs).then(() => 'held'), hung.then(() => 'hung')])
      if (done === 'hung') abandoned.set(id, performance.now())
      return new Response('ok')
    },
  })
  return {
    url: `http://127.0.0.1:${server.port}/hook`,
    arrivals,
    abandoned,
    mislabelled: () => mislabelled,
    stop: () => server.stop(true),
  }
}

export async function outage(): Promise<string> {
  const sink = slowSink(0)
  const plugins = {
    games: {},
    ingest: { signing_secret: SIGNING_SECRET, purge_interval_minutes: 0 },
    'webhook-provider': {},
    notify: { auth: { enabled: false }, channels: { hook: { type: 'webhook', url: sink.url } } },
  }
  return withFleet(plugins, async (fleet, pg) => {
    try {
      const gameId = await createGame(fleet.servers[0]!.base, fleet.token)
      type Answer = { kind: string; status: number; ms: number; retryAfter: boolean; at: number }
      const answers: Answer[] = []
      let going = true
      let n = 0
      const send = async (i: number) => {
        const base = fleet.servers[i % 3]!.base
        const kind = ['ingest', 'notify', 'read'][n++ % 3]!
        const req =
          kind === 'ingest'
            ? await ingestRequest(base, gameId, `u${n}`)
            : kind === 'notify'
              ? new Request(`${base}/api/v1/notify`, {
                  method: 'POST',
                  headers: { 'content-type': 'application/json' },
                  body: JSON.stringify({ type: 'bench', channel: 'hook', title: `n${n}` }),
                })
              : new Request(`${base}/api/games`, { headers: { authorization: `Bearer ${fleet.token}` } })
        const t0 = performance.now()
        let status = 0
        let retryAfter = false
        try {
          const r = await fetch(req, { signal: AbortSignal.timeout(30_000) })
          await r.arrayBuffer()
          status = r.status
          retryAfter = Number(r.headers.get('retry-after')) > 0
        } catch {
          status = -1
        }
        answers.push({ kind, status, ms: performance.now() - t0, retryAfter, at: t0 })
      }
      const clients = Array.from({ length: 24 }, async (_, i) => {
        while (going) await send(i)
      })
      await Bun.sleep(3000)
      const down = performance.now()
      pg.stop('fast')
      await Bun.sleep(3000)
      pg.start()
      const up = performance.now()
      await Bun.sleep(7000)
      going = false
      await Promise.all(clients)
      const fine = (a: Answer) => (a.status >= 200 && a.status < 300) || (a.status === 503 && a.retryAfter)
      const during = answers.filter((a) => a.at >= down - 100 && a.at <= up + 3000)
      const statuses = new Map<number, number>()
      for (const a of answers) statuses.set(a.status, (statuses.get(a.status) ?? 0) + 1)
      const max = Math.max(...answers.map((a) => a.ms))
      const bad = answers.filter((a) => !fine(a))
      const after = answers.filter((a) => a.at > up + 3000)
      return [
        `outage: ${answers.length} answers (${[...statuses].map(([s, c]) => `${s}: ${c}`).join(', ')})`,
        `  longest wait ${Math.round(max)} ms (during the outage and the 3 s after: ${Math.round(Math.max(...during.map((a) => a.ms)))} ms, target <= 3000)`,
        `  2xx or 503 with Retry-After: ${(((answers.length - bad.length) / answers.length) * 100).toFixed(2)}% (${bad.length} other, target 0)`,
        `  from 3 s after the restart: ${after.filter((a) => a.status < 300).length} of ${after.length} 2xx`,
      ].join('\n')
    } finally {
      sink.stop()
    }
  })
}

export async function burst(): Promise<string> {
  const budget = 100
  const plugins = {
    games: {},
    ingest: { purge_interval_minutes: 0 },
    agents: {},
    'rate-limits': { rateLimit: { requestsPerMinute: 60, burstSize: budget } },
  }
  return withFleet(plugins, async (fleet) => {
    const lines: string[] = []
    for (let run = 1; run <= 3; run++) {
      // A fresh user each run: a fresh bucket (the gateway counts per user).
      const email = `burst-${run}-${crypto.randomUUID().slice(0, 6)}@bench.local`
      const made = await fetch(`${fleet.servers[0]!.base}/api/users`, {
        method: 'POST',
        headers: { authorization: `Bearer ${fleet.token}`, 'content-type': 'application/json' },
        body: JSON.stringify({ email, password: 'burst-password', roles: ['viewer'] }),
      })
      if (made.status >= 300) throw new Error(`creating a user answered ${made.status}: ${await made.text()}`)
      const login = await fetch(`${fleet.servers[1]!.base}/api/auth/login`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ email, password: 'burst-password' }),
      })
      const { token } = (await login.json()) as { token: string }
      const statuses = await Promise.all(
        Array.from({ length: 450 }, (_, i) =>
          fetch(`${fleet.servers[i % 3]!.base}/api/games`, {
            headers: { authorization: `Bearer ${token}` },
          }).then(async (r) => {
            await r.arrayBuffer()
            return r.status
          }),
        ),
      )
      const through = statuses.filter((s) => s === 200).length
      const other = statuses.filter((s) => s !== 200 && s !== 429).length
      lines.push(
        `  run ${run}: ${through} of 450 through (budget ${budget}, target <= ${budget + 3}); ${other} neither 200 nor 429`,
      )
    }
    return `burst (gateway bucket of ${budget} in Redis, 150 concurrent per instance):\n${lines.join('\n')}`
  })
}

export async function takeover(): Promise<string> {
  const sink = slowSink(1500)
  const plugins = {
    'webhook-provider': {},
    notify: {
      auth: { enabled: false },
      channels: { hook: { type: 'webhook', url: sink.url, timeout_ms: 10_000 } },
      workers: { local: true, concurrency: 8 },
    },
  }
  return withFleet(plugins, async (fleet) => {
    try {
      const [a] = fleet.servers
      for (let i = 0; i < 120; i++)
        await fetch(`${fleet.servers[i % 3]!.base}/api/v1/notify`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ type: 'bench', channel: 'hook', title: `t${i}` }),
        })
      // Every instance is sending (each holds up to 8 sends the sink keeps for 1.5 s).
      const deadline = Date.now() + 10_000
      while (sink.arrivals.size < 20 && Date.now() < deadline) await Bun.sleep(10)
      await Bun.sleep(200)
      const killed = performance.now()
      a!.proc.kill('SIGKILL')
      await a!.proc.exited
      // The sends A had open hang up; each must arrive again from B or C.
      await Bun.sleep(500)
      const orphans = [...sink.abandoned.keys()]
      const until = Date.now() + 30_000
      const again = (id: string) => sink.arrivals.get(id)?.find((t) => t > killed)
      while (orphans.some((id) => again(id) === undefined) && Date.now() < until) await Bun.sleep(20)
      const waits = orphans.map((id) => (again(id) ?? Number.POSITIVE_INFINITY) - killed)
      const repeats = [...sink.arrivals.values()].filter((ts) => ts.length > 1).length
      return [
        `takeover: ${orphans.length} deliveries in flight on the killed instance`,
        `  sent again from another instance after ${Math.round(Math.min(...waits))}-${Math.round(Math.max(...waits))} ms (target < 5000; lease 3 s, poll 0.5 s)`,
        `  ${repeats} deliveries arrived more than once; arrivals whose X-Liveops-Delivery was not the delivery id: ${sink.mislabelled()}`,
      ].join('\n')
    } finally {
      sink.stop()
    }
  })
}
