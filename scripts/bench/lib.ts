import { mkdtempSync, readFileSync, readdirSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import postgres from 'postgres'
import { PURGE_DELAY } from '../../core/allocator'

export const PG_URL = process.env.BENCH_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres'

export function arg(name: string, fallback: string): string {
  const hit = process.argv.find((a) => a.startsWith(`--${name}=`))
  return hit ? hit.slice(name.length + 3) : fallback
}

/** A fresh PostgreSQL database for one run; returns its URL. */
/**
 * A new database on PG_URL's server, its URL: `name` with a suffix of this run's own, since other
 * runs (other sessions' benches and tests) use the same server at the same time and must never
 * lose their database to this one. `dropPgDatabase` removes it.
 */
export async function freshPgDatabase(name: string): Promise<string> {
  const unique = `${name}_${process.pid}_${Math.random().toString(36).slice(2, 8)}`
  const sql = postgres(PG_URL, { max: 1, onnotice: () => undefined })
  await sql.unsafe(`CREATE DATABASE ${unique}`)
  await sql.end()
  return PG_URL.replace(/\/[^/]*$/, `/${unique}`)
}

/** Drops the database of a URL `freshPgDatabase` made. */
export async function dropPgDatabase(url: string): Promise<void> {
  const name = new URL(url).pathname.slice(1)
  const sql = postgres(PG_URL, { max: 1, onnotice: () => undefined })
  await sql.unsafe(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)
  await sql.end()
}

export function tempDir(prefix: string): string {
  return mkdtempSync(join(tmpdir(), prefix))
}

export interface WrkResult {
  rps: number
  p50ms: number
  p99ms: number
  errors: number
  requests: number
}

function toMs(v: string): number {
  const m = v.match(/^([\d.]+)(us|ms|s)$/)
  if (!m) return Number.NaN
  const n = Number(m[1])
  return m[2] === 'us' ? n / 1000 : m[2] === 's' ? n * 1000 : n
}

/** Runs wrk (Debian package `wrk`) and parses throughput, latency percentiles and errors. */
export function wrk(
  url: string,
  opts: {
    connections: number
    seconds: number
    threads?: number
    headers?: Record<string, string>
    script?: string
  },
): WrkResult {
  const args = ['wrk', `-t${opts.threads ?? 2}`, `-c${opts.connections}`, `-d${opts.seconds}s`, '--latency']
  for (const [k, v] of Object.entries(opts.headers ?? {})) args.push('-H', `${k}: ${v}`)
  if (opts.script) args.push('-s', opts.script)
  args.push(url)
  const out = Bun.spawnSync(args, { stdout: 'pipe', stderr: 'pipe' })
  const text = out.stdout.toString()
  if (out.exitCode !== 0) throw new Error(`wrk failed: ${out.stderr.toString()}`)
  const errLine = text.match(/Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)/)
  const non2xx = Number(text.match(/Non-2xx or 3xx responses: (\d+)/)?.[1] ?? 0)
  return {
    rps: Number(text.match(/Requests\/sec:\s+([\d.]+)/)?.[1] ?? 0),
    p50ms: toMs(text.match(/\s50%\s+(\S+)/)?.[1] ?? ''),
    p99ms: toMs(text.match(/\s99%\s+(\S+)/)?.[1] ?? ''),
    errors: non2xx + (errLine ? errLine.slice(1).reduce((s, x) => s + Number(x), 0) : 0),
    requests: Number(text.match(/(\d+) requests in/)?.[1] ?? 0),
  }
}

/** The share of wrk's requests answered 2xx (the rest are errors: a 429 for a replayed nonce is one). */
export const okShare = (w: WrkResult): number => (w.requests ? (w.requests - w.errors) / w.requests : 0)

export function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b)
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2
}

/**
 * CPU seconds a process has used so far, all its threads, from /proc (Linux). Divided by the
 * requests served in between it gives the server's cost per request, which moves far less with
 * the machine's noise than requests per second do.
 */
export function cpuSeconds(pid: number): number {
  const { user, sys } = statTicks(`/proc/${pid}/stat`)
  return (user + sys) / 100
}

/**
 * A `/proc` stat file's name and CPU so far (a process's `/proc/PID/stat`, a thread's
 * `/proc/PID/task/TID/stat`): utime and stime, fields 14 and 15 of the line, in clock ticks (100
 * per second). Throws when the process or thread is gone.
 */
export function statTicks(path: string): { name: string; user: number; sys: number } {
  const stat = readFileSync(path, 'utf8')
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
  return {
    name: stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')')),
    user: Number(fields[11]),
    sys: Number(fields[12]),
  }
}

/** Each thread's CPU so far (clock ticks, user and system) by thread id, with its name (Linux). */
function threadTicks(pid: number): Map<string, { name: string; user: number; sys: number }> {
  const out = new Map<string, { name: string; user: number; sys: number }>()
  let tids: string[] = []
  try {
    tids = readdirSync(`/proc/${pid}/task`)
  } catch {
    return out
  }
  for (const tid of tids) {
    try {
      out.set(tid, statTicks(`/proc/${pid}/task/${tid}/stat`))
    } catch {
      // The thread ended in between.
    }
  }
  return out
}

/** The machine's idle and total clock ticks so far, all cores (/proc/stat). */
function machineTicks(): { idle: number; total: number } {
  const v = readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).slice(1).map(Number)
  return { idle: v[3] + v[4], total: v.reduce((a, b) => a + b, 0) }
}

/**
 * A server thread's share of a window: its name (the event loop is the process's own name; Bun's
 * workers are all `Worker`, told apart by their thread id and by how much of their time the
 * kernel took), cores used (user + system), and µs of its CPU per request.
 */
export interface ThreadShare {
  name: string
  tid: number
  cores: number
  sysCores: number
  usPerRequest: number
}

/** wrk against `url` while measuring the server process's CPU: adds µs of server CPU per request. */
export type CpuResult = WrkResult & {
  cpuUsPerRequest: number
  /** The threads that used 2% of a core or more in the window, busiest first. */
  threads: ThreadShare[]
  /** The share of the machine's cores idle in the window (the load generator runs beside). */
  machineIdle: number
  /**
   * The database server's CPU per request in the window, when it runs on this machine: every
   * process of that name (PostgreSQL's backends, checkpointer and WAL writer; MariaDB's one).
   */
  engineUsPerRequest?: number
}

/** The process name of an engine's server on this machine (none for SQLite, which runs inside ours). */
export const engineProcess = (engine: string): string | undefined =>
  engine === 'postgres' ? 'postgres' : engine === 'mysql' ? 'mariadbd' : undefined

/** The CPU ticks so far of every process named `name` on the machine (a process gone meanwhile drops out). */
function processTicks(name: string): number {
  let ticks = 0
  for (const pid of readdirSync('/proc')) {
    if (!/^\d+$/.test(pid)) continue
    try {
      const t = statTicks(`/proc/${pid}/stat`)
      if (t.name === name) ticks += t.user + t.sys
    } catch {
      // Ended in between.
    }
  }
  return ticks
}

export function wrkCpu(
  pid: number,
  url: string,
  opts: Parameters<typeof wrk>[1],
  /** The database server's process name (`postgres`, `mariadbd`), to count its CPU too. */
  engine?: string,
): CpuResult {
  const e0 = engine ? processTicks(engine) : 0
  const c0 = cpuSeconds(pid)
  const t0 = threadTicks(pid)
  const m0 = machineTicks()
  const started = performance.now()
  const w = wrk(url, opts)
  const seconds = (performance.now() - started) / 1000
  const used = cpuSeconds(pid) - c0
  const t1 = threadTicks(pid)
  const m1 = machineTicks()
  const engineUsPerRequest = engine
    ? Math.round(((processTicks(engine) - e0) * 1e4) / Math.max(1, w.requests))
    : undefined
  const threads: ThreadShare[] = []
  for (const [tid, b] of t1) {
    const a = t0.get(tid) ?? { user: 0, sys: 0 }
    const ticks = b.user - a.user + b.sys - a.sys
    const cores = ticks / 100 / seconds
    if (cores < 0.02) continue
    threads.push({
      name: b.name,
      tid: Number(tid),
      cores: +cores.toFixed(2),
      sysCores: +((b.sys - a.sys) / 100 / seconds).toFixed(2),
      usPerRequest: Math.round((ticks * 1e4) / Math.max(1, w.requests)),
    })
  }
  threads.sort((x, y) => y.cores - x.cores)
  const machineIdle = +((m1.idle - m0.idle) / Math.max(1, m1.total - m0.total)).toFixed(2)
  return {
    ...w,
    cpuUsPerRequest: +((used * 1e6) / Math.max(1, w.requests)).toFixed(1),
    threads,
    machineIdle,
    engineUsPerRequest,
  }
}

/**
 * A bare server's environment: the allocator setting liveops gives itself (core/allocator.ts), so
 * the ceiling and the server run alike.
 */
export const bareEnv = (): Record<string, string | undefined> => ({
  ...process.env,
  [PURGE_DELAY]: process.env[PURGE_DELAY] ?? '-1',
})

/**
 * The machine's ceiling for one HTTP answer: a bare `Bun.serve` in its own process (no
 * liveops code) answering `path` the way `handler` says. The machine is shared and its speed
 * drifts from day to day, so a benchmark reports liveops against this ceiling, measured in
 * alternation with it, besides the absolute figures.
 *
 * `route` is the source of one Bun route value: a `new Response(...)` or `{ POST: async (r) => ... }`.
 */
export async function startBare(
  path: string,
  route: string,
): Promise<{ base: string; pid: number; stop: () => void }> {
  const dir = tempDir('liveops-bare-')
  const file = join(dir, 'bare.ts')
  await Bun.write(
    file,
    `const s = Bun.serve({ port: 0, hostname: '127.0.0.1', routes: { ${JSON.stringify(path)}: ${route} }, fetch: () => new Response('not found', { status: 404 }) })\nconsole.log('ready ' + s.port)\n`,
  )
  const proc = Bun.spawn([process.execPath, file], { stdout: 'pipe', stderr: 'inherit', env: bareEnv() })
  const reader = proc.stdout.getReader()
  let out = ''
  while (!/ready \d+/.test(out)) {
    const { done, value } = await reader.read()
    if (done) throw new Error(`bare server did not start: ${out}`)
    out += new TextDecoder().decode(value)
  }
  const port = out.match(/ready (\d+)/)![1]
  return { base: `http://127.0.0.1:${port}`, pid: proc.pid, stop: () => proc.kill() }
}
