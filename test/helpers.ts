import { describe } from 'bun:test'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import mysql from 'mysql2/promise'
import postgres from 'postgres'
import { stringify } from 'yaml'
import { type LiveopsApp, createApp } from '../core/app'
import { loadConfig } from '../core/config'
import { type Db, openDb } from '../core/db'
import { listen } from '../core/listen'
import { createLogger } from '../core/log'
import { Outbound, OutboundPolicy } from '../core/outbound'
import type { PluginManifest } from '../core/plugin'
import { plugins as allPlugins } from '../plugins'
import { MYSQL_URL, freshMysqlDb, migratedMysqlDb } from './mysql-db'
import { PG_URL, freshSchema, pgReachable, pgUrlWith, scratchDatabase } from './pg-db'

export { MYSQL_URL, PG_URL, freshMysqlDb, freshSchema, pgUrlWith, scratchDatabase }

export type Engine = 'sqlite' | 'postgres' | 'mysql'

/**
 * Test files that do not run on MySQL yet (issue 39): forEachEngine leaves MySQL out for them.
 * None since ingest and analytics speak MySQL; a file goes here only with the reason beside it.
 */
export const NOT_ON_MYSQL_YET: readonly string[] = []

async function mysqlReachable(): Promise<boolean> {
  try {
    const c = await mysql.createConnection({ uri: MYSQL_URL, connectTimeout: 2000 })
    await c.end()
    return true
  } catch {
    return false
  }
}

/**
 * TEST_ENGINE_PART=<engine>: this process runs a file's tests of that engine only (scripts/test.ts
 * runs a long file as one process per engine, side by side); its tests of no engine run in the
 * SQLite part only (`engineFree`).
 */
const part = process.env.TEST_ENGINE_PART as Engine | undefined

/** SQLite always; PostgreSQL when it answers. With CI=true or REQUIRE_PG=1 an unreachable PostgreSQL fails the run. */
const available: Engine[] = await (async () => {
  if (process.env.TEST_ENGINES) return process.env.TEST_ENGINES.split(',') as Engine[]
  const ci = process.env.CI === 'true'
  const out: Engine[] = ['sqlite']
  if (await pgReachable()) out.push('postgres')
  else if (ci || process.env.REQUIRE_PG === '1')
    throw new Error(`PostgreSQL is required (CI) but ${PG_URL} does not answer`)
  else console.warn(`PostgreSQL at ${PG_URL} does not answer: not running on PostgreSQL`)
  // MySQL when asked for (TEST_MYSQL=1, as CI does: .ci/run starts MariaDB); then it must answer.
  if (process.env.TEST_MYSQL === '1' || process.env.REQUIRE_MYSQL === '1') {
    if (await mysqlReachable()) out.push('mysql')
    else throw new Error(`MySQL is asked for (TEST_MYSQL) but ${MYSQL_URL} does not answer`)
  }
  return out
})()
if (part && !available.includes(part))
  throw new Error(`TEST_ENGINE_PART=${part} is not among the engines of this run (${available.join(', ')})`)
export const engines: Engine[] = part ? [part] : available

/**
 * A describe block of tests that use no engine: registered once per file, in the SQLite part
 * when scripts/test.ts runs the file as one process per engine (a file it splits may hold no
 * top-level describe or test other than these).
 */
export function engineFree(name: string, fn: () => void): void {
  if (!part || part === 'sqlite') describe(name, fn)
}

/** The test file calling (from the stack): to consult NOT_ON_MYSQL_YET. */
function callerFile(): string {
  const stack = new Error().stack ?? ''
  const hit = /((?:test|plugins)\/[\w./-]+\.test\.ts)/.exec(stack)
  return hit?.[1] ?? ''
}

/** The engines a test file runs on: MySQL unless the file is in NOT_ON_MYSQL_YET. */
export function enginesFor(file: string): Engine[] {
  const left = NOT_ON_MYSQL_YET.some((f) => (f.endsWith('/') ? file.startsWith(f) : file.endsWith(f)))
  return left ? engines.filter((e) => e !== 'mysql') : engines
}

/** Runs a describe block once per engine, named `[sqlite]` / `[postgres]` / `[mysql]`. */
export function forEachEngine(fn: (engine: Engine) => void): void {
  for (const engine of enginesFor(callerFile())) describe(`[${engine}]`, () => fn(engine))
}

export const ADMIN_PASSWORD = 'admin-password'

/** The JWT secret of every test app (`makeApp`): tests sign expired or forged tokens with it. */
export const TEST_JWT_SECRET = 'test-jwt-secret-0001'

/**
 * The outbound policy of test apps: loopback allowed, since every sink a test starts listens
 * there (a deployed server denies loopback unless its `outbound.allow` lists it).
 */
export const TEST_OUTBOUND = { allow: ['127.0.0.0/8', '::1'], deny: [] }
/** An outbound client under that policy, for tests that create providers directly. */
export const loopbackOutbound = new Outbound(new OutboundPolicy(TEST_OUTBOUND))

// biome-ignore lint/suspicious/noExplicitAny: response bodies are JSON of every shape; the assertions check them
export interface TestResponse<T = any> {
  status: number
  body: T
  headers: Headers
}

export interface TestApp extends LiveopsApp {
  engine: Engine
  dataDir: string
  /** The PostgreSQL schema of its store (another app may share it: `makeApp(engine, { store: app })`). */
  pgSchema?: string
  /** The MySQL URL of its store (its own database; shared the same way). */
  mysqlUrl?: string
  /** `app.handle` of a request to `http://localhost{path}`; JSON bodies are sent and parsed, an event stream's is not read. */
  // biome-ignore lint/suspicious/noExplicitAny: as above
  req<T = any>(
    method: string,
    path: string,
    opts?: { body?: unknown; token?: string | null; headers?: Record<string, string>; raw?: BodyInit },
  ): Promise<TestResponse<T>>
  /** An access token of a user holding `role` (created once per app). */
  token(role?: string): Promise<string>
  /** Serves the app on a 127.0.0.1 socket as `core/main.ts` does (fast routes included); stopped with the app. */
  listen(): string
}

export interface MakeAppOptions {
  /** Plugins to enable with their settings; default: `{ <each name>: {} }` of `plugins`. */
  plugins?: Record<string, unknown>
  /** Extra core settings merged over the test defaults (for example `{ rate_limit: {...} }`). */
  config?: Record<string, unknown>
  env?: Record<string, string>
  /** Plugins beside the shipped ones (the example plugin of docs/plugins.md, broken manifests). */
  extraPlugins?: Record<string, PluginManifest>
  /** A second instance on this app's PostgreSQL schema (left to that app to drop; pass its `pgUrl` too). */
  store?: TestApp
  /** On PostgreSQL: the server to use (one the test runs itself) instead of the shared one. */
  pgUrl?: string
  /** The rate limiter's clock (core/app.ts `clock`): a fixed one keeps a test's requests in one window. */
  clock?: () => number
}

function merge(a: Record<string, unknown>, b: Record<string, unknown>): Record<string, unknown> {
  const out = { ...a }
  for (const [k, v] of Object.entries(b)) {
    const prev = out[k]
    out[k] =
      prev && v && typeof prev === 'object' && typeof v === 'object' && !Array.isArray(v)
        ? merge(prev as Record<string, unknown>, v as Record<string, unknown>)
        : v
  }
  return out
}

/**
 * The real app on a real store: a temp SQLite file or a fresh PostgreSQL schema. Rate limits are
 * lifted unless a test sets them.
 */
/** The plugins an app of these settings enables (none known when the settings do not load). */
function enabledPlugins(
  yaml: string,
  known: Record<string, PluginManifest>,
  env: Record<string, string> = {},
): { enabled: string[]; known: Record<string, PluginManifest> } | undefined {
  try {
    return { enabled: Object.keys(loadConfig(yaml, known, env).plugins), known }
  } catch {
    return undefined
  }
}

export async function makeApp(engine: Engine, opts: MakeAppOptions = {}): Promise<TestApp> {
  const dataDir = mkdtempSync(join(tmpdir(), 'liveops-test-'))
  const pg =
    engine !== 'postgres'
      ? undefined
      : opts.store?.pgSchema
        ? { schema: opts.store.pgSchema, drop: async () => undefined }
        : await freshSchema(opts.pgUrl)
  const base = {
    data_dir: dataDir,
    auth: { jwt_secret: TEST_JWT_SECRET, admin_token: 'test-admin-token' },
    admin: { email: 'admin@localhost', password: ADMIN_PASSWORD },
    rate_limit: { requests_per_minute: 0, burst: 0 },
    outbound: TEST_OUTBOUND,
    log: { level: 'error' },
    plugins: opts.plugins ?? Object.fromEntries(Object.keys(allPlugins).map((n) => [n, {}])),
  }
  const known = { ...allPlugins, ...opts.extraPlugins }
  const settings = (url: string) =>
    stringify(merge({ ...base, database: { url, pool: 5 } }, opts.config ?? {}))
  // A new MySQL database starts as a copy of the migrated template of its plugins (test/mysql-db.ts).
  const my =
    engine !== 'mysql'
      ? undefined
      : opts.store?.mysqlUrl
        ? { url: opts.store.mysqlUrl, drop: async () => undefined }
        : ((await migratedMysqlDb(enabledPlugins(settings(MYSQL_URL), known, opts.env))) ??
          (await freshMysqlDb()))
  const yaml = settings(my ? my.url : pg ? (opts.pgUrl ?? PG_URL) : join(dataDir, 'test.sqlite'))
  const config = loadConfig(yaml, known, opts.env ?? {})
  const built = await createApp(config, {
    plugins: known,
    pgSchema: pg?.schema,
    log: createLogger(config.core.log),
    hashPassword: hashOnce,
    clock: opts.clock,
  })
  const tokens = new Map<string, string>()

  const req: TestApp['req'] = async (method, path, o = {}) => {
    const headers: Record<string, string> = { ...o.headers }
    if (o.token) headers.authorization = `Bearer ${o.token}`
    let body: BodyInit | undefined = o.raw
    if (o.body !== undefined) {
      headers['content-type'] ??= 'application/json'
      body = JSON.stringify(o.body)
    }
    const res = await built.app.handle(new Request(`http://localhost${path}`, { method, headers, body }))
    // An event stream never ends by itself: its status and headers are the answer.
    if ((res.headers.get('content-type') ?? '').includes('event-stream')) {
      await res.body?.cancel()
      return { status: res.status, body: '' as never, headers: res.headers }
    }
    const text = await res.text()
    let parsed: unknown = text
    if ((res.headers.get('content-type') ?? '').includes('json') && text) parsed = JSON.parse(text)
    return { status: res.status, body: parsed as never, headers: res.headers }
  }

  const token = async (role = 'admin') => {
    let t = tokens.get(role)
    if (!t) {
      const user = await built.auth.createUser(
        { email: `${role}@test.local`, username: `${role}-user`, password: USER_PASSWORD, roles: [role] },
        hashOnce(USER_PASSWORD),
      )
      t = built.auth.accessToken(user)
      tokens.set(role, t)
    }
    return t
  }

  let server: ReturnType<typeof listen> | undefined
  return {
    ...built,
    engine,
    dataDir,
    pgSchema: pg?.schema,
    mysqlUrl: my?.url,
    req,
    token,
    listen: () => {
      server ??= listen(built, { port: 0, hostname: '127.0.0.1' })
      return `http://127.0.0.1:${server.port}`
    },
    stop: async () => {
      await server?.stop(true)
      await built.stop()
      await pg?.drop()
      await my?.drop()
      rmSync(dataDir, { recursive: true, force: true })
    },
  }
}

/** A raw store on a temp SQLite file or a fresh PostgreSQL schema. */
export async function rawDb(engine: Engine): Promise<{ db: Db; done: () => Promise<void> }> {
  const dir = mkdtempSync(join(tmpdir(), 'liveops-db-'))
  if (engine === 'sqlite') {
    const db = openDb(join(dir, 'x.sqlite'), dir)
    return {
      db,
      done: async () => {
        await db.close()
        rmSync(dir, { recursive: true, force: true })
      },
    }
  }
  if (engine === 'mysql') {
    const fresh = await freshMysqlDb()
    const db = openDb(fresh.url, dir, { max: 10 })
    return {
      db,
      done: async () => {
        await db.close()
        await fresh.drop()
        rmSync(dir, { recursive: true, force: true })
      },
    }
  }
  const schema = `t_${crypto.randomUUID().replace(/-/g, '').slice(0, 16)}`
  const admin = postgres(PG_URL, { max: 1, onnotice: () => undefined })
  await admin.unsafe(`CREATE SCHEMA ${schema}`)
  const db = openDb(PG_URL, dir, { schema, max: 10 })
  return {
    db,
    done: async () => {
      await db.close()
      await admin.unsafe(`DROP SCHEMA ${schema} CASCADE`)
      await admin.end()
      rmSync(dir, { recursive: true, force: true })
    },
  }
}

/** A request body sent without a Content-Length (chunked): `text` in chunks of `size` bytes. */
export function chunkedBody(text: string, size: number): ReadableStream<Uint8Array> {
  const bytes = new TextEncoder().encode(text)
  return new ReadableStream<Uint8Array>({
    start(c) {
      for (let i = 0; i < bytes.length; i += size) c.enqueue(bytes.subarray(i, i + size))
      c.close()
    },
  })
}

/**
 * How much longer `until` waits than a test asks (`TEST_WAIT_SCALE`; 3 under CI, 1 otherwise). A
 * wait's limit only tells a hang from slowness: under a whole suite on two shared cores a step
 * can take several times what it takes alone, and a correct test must not fail for that. The
 * condition waited for is the same; only a failing test takes longer to fail.
 */
const WAIT_SCALE = Number(process.env.TEST_WAIT_SCALE ?? (process.env.CI === 'true' ? 3 : 1)) || 1

/**
 * Polls `fn` until it answers something truthy (then returns it), or fails after `ms` (times
 * WAIT_SCALE) naming `what` and the last answer: tests wait for an outcome by its condition,
 * never by a fixed sleep. The one such helper of the suite.
 */
export async function until<T>(
  fn: () => Promise<T | undefined | false | null> | T | undefined | false | null,
  opts: number | { ms?: number; what?: string } = 5000,
): Promise<T> {
  const { ms: asked = 5000, what = 'condition' } = typeof opts === 'number' ? { ms: opts } : opts
  const ms = asked * WAIT_SCALE
  const deadline = Date.now() + ms
  for (;;) {
    const v = await fn()
    if (v) return v
    if (Date.now() > deadline) throw new Error(`until: ${what} not met within ${ms} ms (last: ${String(v)})`)
    await Bun.sleep(10)
  }
}

const hashes = new Map<string, Promise<string>>()
/**
 * A password's Argon2id hash, made once per test process: every test app has the same bootstrap
 * admin and users with the same password, and each hash costs ~100 ms of a core (seconds on a
 * busy machine). The stored hashes are real: logins verify them as in production.
 */
export function hashOnce(password: string): Promise<string> {
  let h = hashes.get(password)
  if (!h) {
    h = Bun.password.hash(password)
    hashes.set(password, h)
  }
  return h
}

/** The password of the users `TestApp.token` creates. */
const USER_PASSWORD = 'password-123'

/**
 * Waits past the next minute boundary when fewer than `ms` are left before it: a test that counts
 * something per minute (requests in a rate-limit window, the console's events of this minute)
 * then reads, acts and counts inside one minute, however slow the machine.
 */
export async function clearOfMinute(ms = 5_000): Promise<void> {
  const left = 60_000 - (Date.now() % 60_000)
  if (left < ms) await Bun.sleep(left + 50)
}
