/**
 * Notification service benchmark, on SQLite and PostgreSQL, against a real server process
 * (`bun core/main.ts --config <temp yaml>`) on 127.0.0.1:
 *
 *  1. accept: wrk POSTs /api/v1/notify with delivery switched off (workers.local false), so the
 *     figure is durable acceptance alone (notification + delivery rows committed before the answer):
 *     closed loop at saturation (wrk), then open loop at a fixed rate (--rate, default 3000/s).
 *  2. deliver: the server restarts with the local pool on and drains that backlog to a webhook
 *     sink answering in 5 ms; deliveries/s = backlog / drain time.
 *  3. faults: 20% of sink answers 5xx, 5% hang past the webhook timeout; after the queue drains,
 *     accepted must equal success + failed, nothing pending, every success seen by the sink;
 *     duplicates (an id the sink received and took more than once, from timed-out attempts) are counted.
 *
 * usage: bun scripts/bench/notify.ts [--engines=sqlite,postgres] [--seconds=10] [--connections=32] [--rate=3000]
 *                                    [--faults=3000] [--runs=1] [--phases=accept,deliver,faults]
 */
import { rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import postgres from 'postgres'
import { stringify } from 'yaml'
import { arg, dropPgDatabase, freshPgDatabase, median, tempDir, wrk } from './lib'

const engines = arg('engines', 'sqlite,postgres').split(',')
const seconds = Number(arg('seconds', '10'))
const connections = Number(arg('connections', '32'))
const faultCount = Number(arg('faults', '3000'))
const runs = Number(arg('runs', '1'))
const rate = Number(arg('rate', '3000'))
const phases = arg('phases', 'accept,deliver,faults').split(',')
const root = join(import.meta.dir, '..', '..')

// ---- the webhook sink: 5 ms answers, optional faults --------------------------------------------
const received = new Map<string, number>()
let faults = false
let hits = 0
const sink = Bun.serve({
  port: 0,
  hostname: '127.0.0.1',
  async fetch(req) {
    const { id } = (await req.json()) as { id: string }
    hits++
    const roll = Math.random()
    if (faults && roll < 0.2) {
      await Bun.sleep(5)
      return new Response('overloaded', { status: 503 })
    }
    // A receiver acts on what it got, even when the sender gave up waiting: that is a duplicate source.
    received.set(id, (received.get(id) ?? 0) + 1)
    await Bun.sleep(faults && roll < 0.25 ? 1500 : 5)
    return new Response('ok')
  },
})
const sinkUrl = `http://127.0.0.1:${sink.port}/hook`

// ---- the server process ---------------------------------------------------------------------
interface Server {
  url: string
  stop(): Promise<void>
}

async function startServer(
  dataDir: string,
  dbUrl: string,
  port: number,
  notify: Record<string, unknown>,
): Promise<Server> {
  const file = join(dataDir, 'bench.yaml')
  writeFileSync(
    file,
    stringify({
      server: { port, host: '127.0.0.1' },
      data_dir: dataDir,
      database: { url: dbUrl, pool: 10 },
      auth: { jwt_secret: 'bench-jwt-secret-0001' },
      admin: { email: 'admin@localhost', password: 'bench-password' },
      rate_limit: { requests_per_minute: 0, burst: 0 },
      log: { level: 'warn' },
      // Spec 2's `auth.enabled: false` is the notify plugin's own setting (issue 16).
      plugins: { 'webhook-provider': {}, notify: { auth: { enabled: false }, ...notify } },
    }),
  )
  const proc = Bun.spawn([process.execPath, 'core/main.ts', '--config', file], {
    cwd: root,
    // The server logs (at warn: warnings and errors only) to stdout: shown, so that a failure
    // during a run (a result not recorded, say) is seen rather than measured around.
    stdout: 'inherit',
    stderr: 'inherit',
  })
  const url = `http://127.0.0.1:${port}`
  let up = false
  for (let i = 0; i < 200 && !up; i++) {
    try {
      up = (await fetch(`${url}/api/v1/status`)).ok
    } catch {}
    if (!up) await Bun.sleep(50)
  }
  // A server that refused its configuration has exited: say so instead of measuring nothing.
  if (!up) throw new Error(`the notify server did not start on ${url} (its error is above)`)
  return {
    url,
    async stop() {
      proc.kill('SIGTERM')
      await proc.exited
    },
  }
}

const api = async <T>(url: string, path: string, body?: unknown): Promise<T> => {
  const res = await fetch(
    `${url}${path}`,
    body === undefined
      ? {}
      : { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) },
  )
  return ((await res.json()) as { data: T }).data
}

/** The deliveries still pending, by attempts, with their latest claim (PostgreSQL; SQLite: none read). */
async function leftOver(url: string): Promise<unknown[]> {
  if (!url.startsWith('postgres')) return []
  const sql = postgres(url, { max: 1 })
  try {
    return [
      ...(await sql`SELECT attempts, count(*)::int AS n, max(claimed_by) AS claimed_by, max(lease_until) AS lease_until,
      max(last_error) AS last_error FROM notify_deliveries WHERE status = 'pending' GROUP BY attempts`),
    ]
  } finally {
    await sql.end()
  }
}

async function drain(url: string, limitS: number): Promise<number> {
  const t0 = performance.now()
  while ((performance.now() - t0) / 1000 < limitS) {
    if ((await api<{ size: number }>(url, '/api/v1/queue')).size === 0) return (performance.now() - t0) / 1000
    await Bun.sleep(100)
  }
  return Number.NaN
}

const channel = (extra: Record<string, unknown> = {}) => ({
  hook: { type: 'webhook', url: sinkUrl, ...extra },
})

async function store(engine: string, name: string): Promise<{ url: string; drop(): Promise<void> }> {
  if (engine === 'sqlite') return { url: '', drop: async () => undefined }
  const url = await freshPgDatabase(name)
  return {
    url,
    drop: () => dropPgDatabase(url),
  }
}

/**
 * Open-loop load at a fixed rate (wrk is closed-loop, so its p99 is the p99 at saturation).
 * Latency counts from each request's scheduled send time, so a stalled server is not hidden.
 */
async function paced(
  url: string,
  rate: number,
  secs: number,
): Promise<{ rps: number; p50: number; p99: number; errors: number }> {
  const body = JSON.stringify({
    type: 'bench',
    level: 'info',
    channel: 'hook',
    title: 'bench',
    body: 'paced',
    params: { n: 1 },
  })
  const lat: number[] = []
  let errors = 0
  const inflight: Promise<void>[] = []
  const t0 = performance.now()
  const total = rate * secs
  let sent = 0
  while (sent < total) {
    const due = Math.min(total, Math.floor(((performance.now() - t0) / 1000) * rate))
    for (; sent < due; sent++) {
      const at = t0 + (sent / rate) * 1000
      inflight.push(
        fetch(`${url}/api/v1/notify`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body,
        })
          .then(async (r) => {
            const j = (await r.json()) as { code: number }
            if (j.code !== 0) errors++
            lat.push(performance.now() - at)
          })
          .catch(() => {
            errors++
          }),
      )
    }
    await Bun.sleep(1)
  }
  await Promise.all(inflight)
  const elapsed = (performance.now() - t0) / 1000
  lat.sort((a, b) => a - b)
  const q = (p: number) => lat[Math.min(lat.length - 1, Math.floor(p * lat.length))] ?? Number.NaN
  return { rps: lat.length / elapsed, p50: q(0.5), p99: q(0.99), errors }
}

const lua = join(tempDir('liveops-bench-lua-'), 'notify.lua')
writeFileSync(
  lua,
  `wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.body = '{"type":"bench","level":"info","channel":"hook","title":"bench","body":"hello from wrk","params":{"n":1}}'
`,
)

const report: string[] = []
for (const engine of engines) {
  const pacedRuns: { rps: number; p50: number; p99: number; errors: number }[] = []
  const accept: { rps: number; p50: number; p99: number; errors: number; requests: number }[] = []
  const deliver: { n: number; s: number; rate: number }[] = []
  for (let run = 0; run < runs; run++) {
    const dir = tempDir('liveops-bench-notify-')
    const db = await store(engine, `bench_notify_${process.pid}_${run}`)
    const port = 18_000 + Math.floor(Math.random() * 1000)
    // 1. acceptance alone
    let srv = await startServer(dir, db.url, port, { channels: channel(), workers: { local: false } })
    wrk(`${srv.url}/api/v1/notify`, { connections: 8, seconds: 2, script: lua }) // warm-up
    // The fixed rate first, on a store not yet swollen by the saturation run.
    pacedRuns.push(await paced(srv.url, rate, seconds))
    const a = wrk(`${srv.url}/api/v1/notify`, { connections, seconds, script: lua })
    accept.push({ rps: a.rps, p50: a.p50ms, p99: a.p99ms, errors: a.errors, requests: a.requests })
    const backlog = (await api<{ size: number }>(srv.url, '/api/v1/queue')).size
    await srv.stop()
    // 2. drain the backlog to the 5 ms sink
    if (!phases.includes('deliver')) {
      await db.drop()
      rmSync(dir, { recursive: true, force: true })
      continue
    }
    srv = await startServer(dir, db.url, port, {
      channels: channel(),
      workers: { local: true, concurrency: 64 },
    })
    const s = await drain(srv.url, 300)
    deliver.push({ n: backlog, s, rate: backlog / s })
    // Not drained: say what was left (a delivery stuck pending is a defect, not a slow run).
    if (Number.isNaN(s)) console.log(`${engine}: left in the queue:`, JSON.stringify(await leftOver(db.url)))
    await srv.stop()
    await db.drop()
    rmSync(dir, { recursive: true, force: true })
  }
  report.push(
    `${engine}: accept at a fixed ${rate}/s (open loop, Bun client): ${median(pacedRuns.map((x) => x.rps)).toFixed(0)} req/s, p50 ${median(pacedRuns.map((x) => x.p50)).toFixed(2)} ms, p99 ${median(pacedRuns.map((x) => x.p99)).toFixed(2)} ms, errors ${pacedRuns.map((x) => x.errors).join('/')} (p99 per run: ${pacedRuns.map((x) => x.p99.toFixed(1)).join(', ')})`,
    `${engine}: accept ${median(accept.map((x) => x.rps)).toFixed(0)} req/s, p50 ${median(accept.map((x) => x.p50)).toFixed(2)} ms, p99 ${median(accept.map((x) => x.p99)).toFixed(2)} ms, errors ${accept.map((x) => x.errors).join('/')} (runs: ${accept.map((x) => x.rps.toFixed(0)).join(', ')})`,
    `${engine}: deliver ${median(deliver.map((x) => x.rate)).toFixed(0)} webhook deliveries/s (backlog ${deliver.map((x) => x.n).join('/')} drained in ${deliver.map((x) => x.s.toFixed(1)).join('/')} s)`,
  )
  console.log(report.slice(-3).join('\n'))

  // 3. faults
  if (!phases.includes('faults')) continue
  const dir = tempDir('liveops-bench-faults-')
  const db = await store(engine, `bench_notify_faults_${process.pid}`)
  faults = true
  received.clear()
  hits = 0
  const srv = await startServer(dir, db.url, 19_000 + Math.floor(Math.random() * 1000), {
    channels: channel({ timeout_ms: 500 }),
    workers: { local: true, concurrency: 64 },
    retry: { max_attempts: 4, base_ms: 100, max_ms: 1000 },
  })
  const ids: string[] = []
  let rejected = 0
  const t0 = performance.now()
  await Promise.all(
    Array.from({ length: 16 }, async (_, w) => {
      for (let i = w; i < faultCount; i += 16) {
        const r = await fetch(`${srv.url}/api/v1/notify`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ type: 'bench', channel: 'hook', title: `f${i}` }),
        })
        const body = (await r.json()) as { code: number; data: { task_ids?: string[] } }
        if (body.code === 0 && body.data.task_ids) ids.push(...body.data.task_ids)
        else rejected++
      }
    }),
  )
  const drained = await drain(srv.url, 600)
  const stats = await api<{
    by_status: Record<string, number>
    success_rate: number
    latency_ms: { p50: number; p95: number }
  }>(srv.url, '/api/v1/logs/stats')
  const accepted = ids.length
  const ok = stats.by_status.success
  const failed = stats.by_status.failed
  const pending = stats.by_status.pending
  let neverSeen = 0
  for (const id of ids) if (!received.has(id)) neverSeen++
  const dupes = [...received.values()].filter((n) => n > 1).length
  const extra = [...received.values()].reduce((a, n) => a + Math.max(0, n - 1), 0)
  const line =
    `${engine}: faults: accepted ${accepted} (rejected ${rejected}) in ${((performance.now() - t0) / 1000).toFixed(1)} s, drained in ${drained.toFixed(1)} s; ` +
    `success ${ok} + failed ${failed} = ${ok + failed} (pending ${pending}) -> ${ok + failed === accepted && pending === 0 ? 'nothing lost' : 'MISMATCH'}; ` +
    `sink requests ${hits}; ids never received ${neverSeen}; duplicated ids ${dupes} (${extra} extra copies); success rate ${(stats.success_rate * 100).toFixed(1)}%, latency p50 ${stats.latency_ms.p50} ms p95 ${stats.latency_ms.p95} ms`
  report.push(line)
  console.log(line)
  await srv.stop()
  faults = false
  await db.drop()
  rmSync(dir, { recursive: true, force: true })
}

console.log(
  `\n== notify bench (${seconds}s x ${runs} run(s), ${connections} connections, wrk on the same 2 cores) ==\n${report.join('\n')}`,
)
sink.stop(true)
process.exit(0)
