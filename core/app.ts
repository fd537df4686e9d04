import { type AnyElysia, Elysia } from 'elysia'
import { routeGuard, writeAuditor } from './audit'
import { requestGuard } from './auth/guard'
import { keyRoutes } from './auth/key-routes'
import { CORE_AREAS } from './auth/roles'
import { authRoutes } from './auth/routes'
import { AuthService, type Principal } from './auth/service'
import { bootstrapAdmin, hasNoUser, hashAdminPassword, instanceId, jwtSecret } from './bootstrap'
import { Bus } from './bus'
import { changeNamespace, createChanges } from './changes'
import type { LoadedConfig } from './config'
import { type Db, migrate, openDb } from './db'
import { apiReference, docsAssets } from './docs'
import { CorsPolicy, edge } from './edge'
import { EventLog } from './event-log'
import { ErrorFamilies, bodyTooLarge, clientIp, errorHandler } from './http'
import { bodyLimits, pathOf } from './listen'
import { type Logger, createLogger } from './log'
import { Metrics } from './metrics'
import { migrationSets } from './migration-sets'
import { HealthChecks, monitoring } from './monitoring'
import { NativeRoutes } from './native'
import { apiDocs } from './openapi'
import { Outbound, OutboundPolicy } from './outbound'
import { type PluginContext, type PluginManifest, ProviderRegistry, type Services } from './plugin'
import { LimiterSlot, RateLimiter, SharedRateLimiter } from './ratelimit'
import { Scheduler } from './schedule'
import { databaseScheduleStore } from './schedule-store'
import { SDK_PATH, sdkAsset } from './sdk-asset'
import { createSharedState } from './shared'
import { strictBodies } from './strict'

/** Methods that change nothing: no `http.write` event. */
const READS = new Set(['GET', 'HEAD', 'OPTIONS'])

export interface AppOptions {
  /** The plugin map (normally `plugins/index.ts`); tests pass a subset. */
  plugins: Record<string, PluginManifest>
  /** PostgreSQL schema to use (tests isolate themselves this way). */
  pgSchema?: string
  log?: Logger
  /**
   * Hashes the bootstrap admin's password (default `Bun.password.hash`, Argon2id, ~100 ms of a
   * core). Test suites pass one that remembers each password's hash: they build hundreds of apps
   * with the same password.
   */
  hashPassword?: (password: string) => Promise<string>
  /**
   * The time the platform rate limit's fixed windows are read from (default `Date.now`): tests
   * place a budget in the middle of a minute instead of waiting for the next one.
   */
  clock?: () => number
}

export interface LiveopsApp {
  app: AnyElysia
  db: Db
  auth: AuthService
  metrics: Metrics
  bus: Bus
  log: Logger
  /** The event log and its consumers (`ctx.events`); tests wait for them with `events.drain()`. */
  events: EventLog
  /**
   * Routes Bun's native router serves ahead of `app.handle` (`ctx.fastRoute`, `ctx.staticRoute`);
   * a method a path does not list falls through to Elysia.
   */
  routes: NativeRoutes
  /** The largest request body accepted, in bytes (`server.body_limit_mb`). */
  bodyLimit: number
  /** The body limit of a path: a smaller one declared for it (`bodyLimits`), else `bodyLimit`. */
  bodyLimitFor(path: string): number
  /** Runs plugin stop hooks in reverse order and closes the stores. Idempotent. */
  stop(): Promise<void>
  /** The bootstrap admin's generated password, when one was generated. */
  generatedAdminPassword?: string
}

/** Plugins in an order where each comes after what it depends on. */
export function orderPlugins(enabled: string[], known: Record<string, PluginManifest>): PluginManifest[] {
  const out: PluginManifest[] = []
  const state = new Map<string, 'visiting' | 'done'>()
  const visit = (name: string, from?: string) => {
    const p = known[name]
    if (!p) throw new Error(`plugin '${from}' depends on unknown plugin '${name}'`)
    if (!enabled.includes(name))
      throw new Error(`plugin '${from}' depends on '${name}', which is not enabled under plugins:`)
    const s = state.get(name)
    if (s === 'done') return
    if (s === 'visiting') throw new Error(`plugin dependency cycle through '${name}'`)
    state.set(name, 'visiting')
    for (const d of p.dependsOn ?? []) visit(d, name)
    state.set(name, 'done')
    out.push(p)
  }
  for (const name of enabled) visit(name)
  return out
}

/**
 * Builds the whole application from a validated configuration: opens the store, applies every
 * migration, bootstraps the admin and sets up each enabled plugin in dependency order. Never
 * listens; `core/main.ts` and the tests decide how requests arrive.
 */
export async function createApp(config: LoadedConfig, opts: AppOptions): Promise<LiveopsApp> {
  const core = config.core
  const log = opts.log ?? createLogger(core.log)
  const ordered = orderPlugins(Object.keys(config.plugins), opts.plugins)
  // An outage is logged once when the store stops answering and once when it is back.
  const onOutage = (what: 'down' | 'up', detail: string) =>
    what === 'down'
      ? log.warn('database does not answer: requests answer 503 until it does', { cause: detail })
      : log.info('database answers again', { detail })
  const db = openDb(core.database.url, core.data_dir, {
    schema: opts.pgSchema,
    max: core.database.pool,
    onOutage,
  })
  const stops: Array<() => Promise<void> | void> = []
  /** `http.write` events whose listeners are still at work. */
  const writesHeard = new Set<Promise<void>>()
  /** Writes received whose `http.write` is not emitted yet (it is, after the answer). */
  let writesUnheard = 0
  const stopAll = async () => {
    for (const fn of stops.splice(0).reverse()) {
      try {
        await fn()
      } catch (e) {
        log.error('stop hook failed', { error: String(e) })
      }
    }
  }
  stops.push(() => db.close())
  try {
    const pendingAdmin = (await hasNoUser(db))
      ? hashAdminPassword(core.admin.password, opts.hashPassword)
      : undefined
    const applied = await migrate(db, migrationSets(ordered))
    if (applied.length) log.info('migrations applied', { migrations: applied })

    // Counters and locks commit without waiting for the disk on PostgreSQL: a crash may forget the
    // last fraction of a second of them, and a request does not wait ~ms for an fsync.
    const counters =
      db.dialect === 'postgres' && !core.redis.url
        ? openDb(core.database.url, core.data_dir, {
            schema: opts.pgSchema,
            max: 2,
            asyncCommit: true,
            onOutage,
            // Unreachable PostgreSQL: the limiter gives up on its counters first, then counts locally.
            connectTimeoutS: 1,
          })
        : db
    if (counters !== db) stops.push(() => counters.close())
    const shared = createSharedState({
      db,
      counters,
      redisUrl: core.redis.url || undefined,
      log: log.child('shared'),
    })
    stops.push(() => shared.close())
    const auth = new AuthService(
      db,
      {
        jwtSecret: jwtSecret(core.auth.jwt_secret, core.data_dir),
        accessTtlS: core.auth.access_ttl_s,
        refreshTtlS: core.auth.refresh_ttl_s,
        adminToken: core.auth.admin_token,
        throttle: core.auth.login_throttle,
      },
      log.child('auth'),
      shared,
    )
    const changes = await createChanges(
      db,
      log.child('changes'),
      changeNamespace(core.database.url, opts.pgSchema),
      core.redis.url || undefined,
    )
    stops.push(() => changes.close())
    await auth.init(changes)
    stops.push(() => auth.stop())
    // The role table is whole before any route exists: a route naming an undeclared area fails here.
    auth.permissions.declare('core', CORE_AREAS)
    const families = new ErrorFamilies()
    for (const p of ordered) {
      if (p.permissions) auth.permissions.declare(p.name, p.permissions)
      for (const f of p.errors ?? []) families.add(f.prefix, f.body)
    }

    const metrics = new Metrics()
    const bus = new Bus((event, e) => log.error('bus listener failed', { event, error: String(e) }))
    const providers = new ProviderRegistry()
    const outbound = new Outbound(new OutboundPolicy(core.outbound))
    // Shared by the instances of one PostgreSQL (or one Redis). A SQLite file serves one instance:
    // its budget stays in memory, where a request costs no write through SQLite's single writer
    // (counted there, the default limit halved authenticated throughput to outlive a restart).
    const limiter = new LimiterSlot(
      db.dialect === 'sqlite' && !core.redis.url
        ? new RateLimiter(core.rate_limit.requests_per_minute, core.rate_limit.burst, opts.clock)
        : new SharedRateLimiter(
            core.rate_limit.requests_per_minute,
            core.rate_limit.burst,
            shared,
            log.child('ratelimit'),
            opts.clock,
          ),
    )
    const identified = new WeakMap<Request, Principal>()
    const guard = routeGuard({ auth, limiter, identified })
    const rawGuard = requestGuard({ auth, limiter, identified })
    const services = new Map<string, { owner: string; service: unknown }>()
    const starts: Array<() => Promise<void> | void> = []
    const checks = new HealthChecks()
    const instance = instanceId(core.instance_id, core.data_dir)
    const scheduler = new Scheduler(log.child('schedule'), {
      store: databaseScheduleStore(db),
      instanceId: instance,
      metrics,
    })
    checks.add('schedule', () => scheduler.health(), { critical: false })
    // Refresh tokens nobody can use any more are deleted (they were kept for ever, audit 19 L2).
    scheduler.add('auth.refresh-token-purge', 3_600_000, (s) => auth.purgeRefreshTokens(s), {
      runAtStart: true,
    })
    const events = new EventLog({ db, instanceId: instance, log: log.child('events'), metrics })
    checks.add('consumers', () => events.health(), { critical: false })

    const mon = monitoring({ db, metrics, config: core, guard, auth, checks, families })
    stops.push(mon.close)

    const cors = new CorsPolicy(core.server.cors_origins)
    for (const p of ordered) if (p.anyOrigin) cors.allowAnyOrigin(p.anyOrigin)
    cors.allowAnyOrigin([SDK_PATH])
    const app = new Elysia({
      serve: { maxRequestBodySize: Math.round(core.server.body_limit_mb * 1024 * 1024) },
    })
      .use(errorHandler(families, (): AnyElysia['routes'] => app.routes))
      .use(edge(cors))
      .use(docsAssets())
      .use(apiDocs(apiReference(), (): AnyElysia => app, families))
    const { bodyLimit, bodyLimitFor, smallest } = bodyLimits(core.server.body_limit_mb, ordered)
    // Route templates, not raw paths, label the request histogram (bounded cardinality).
    const started = new WeakMap<Request, number>()
    const addresses = new WeakMap<Request, string | undefined>()
    const httpLog = log.child('http')
    const logRequest = (method: string, route: string, status: number, seconds: number) => {
      if (core.log.requests)
        httpLog.info('request', { method, route, status, duration_ms: Math.round(seconds * 1e6) / 1000 })
    }
    app
      .onRequest(({ request }) => {
        started.set(request, performance.now())
        // A write's address while its socket is open: once answered, the server knows it no more.
        if (!READS.has(request.method)) {
          writesUnheard++
          addresses.set(request, clientIp(request, app.server, core.server.trust_forwarded_for))
        }
        // Refused with the family's error body before a byte is read; `listen` bounds bodies
        // sent without a length and hands them here with the length read.
        const length = Number(request.headers.get('content-length') ?? 0)
        if (length > smallest) {
          const limit = bodyLimitFor(pathOf(request.url))
          if (length > limit) throw bodyTooLarge(limit)
        }
      })
      .onAfterResponse({ as: 'global' }, (c) => {
        const { request, route, set, responseValue } = c
        const t0 = started.get(request)
        if (t0 === undefined) return
        const status =
          responseValue instanceof Response
            ? responseValue.status
            : typeof set.status === 'number'
              ? set.status
              : 200
        const seconds = (performance.now() - t0) / 1000
        metrics.http.observe(
          { method: request.method, route: route || 'unmatched', status: String(status) },
          seconds,
        )
        logRequest(request.method, route, status, seconds)
        if (!READS.has(request.method)) {
          const principal = (c as { principal?: Principal }).principal ?? identified.get(request)
          const { params, body } = c as { params?: Record<string, string | undefined>; body?: unknown }
          const emitted = bus.emit('http.write', {
            method: request.method,
            path: new URL(request.url).pathname,
            route: route || 'unmatched',
            status,
            ip: addresses.get(request),
            principal: principal && { kind: principal.kind, id: principal.id, username: principal.username },
            audit: route ? auditOf(request, route, params ?? {}, body, responseValue) : undefined,
          })
          writesUnheard--
          writesHeard.add(emitted)
          void emitted.finally(() => writesHeard.delete(emitted))
        }
      })
    const auditOf = writeAuditor(() => app, log)
    // Before every route: each JSON body is checked as it arrived (core/strict.ts).
    app.use(strictBodies(() => app))
    app
      .use(mon.app)
      .use(authRoutes(auth, guard, { trustForwardedFor: core.server.trust_forwarded_for, bus, limiter }))
      .use(keyRoutes(auth, guard))
      .use(sdkAsset())
    const routes = new NativeRoutes(metrics, logRequest, families, cors)

    for (const p of ordered) {
      const deps = new Set(p.dependsOn ?? [])
      const ctx: PluginContext<unknown> = {
        name: p.name,
        instanceId: instance,
        config: config.plugins[p.name],
        core,
        db,
        metrics,
        log: log.child(p.name),
        bus,
        changes,
        shared,
        auth,
        guard,
        requestGuard: rawGuard,
        rateLimiter: limiter,
        providers,
        outbound,
        events,
        provide: (name, service) => {
          if (services.has(name)) throw new Error(`service '${String(name)}' provided twice`)
          services.set(name, { owner: p.name, service })
        },
        service: <K extends keyof Services>(name: K): Services[K] => {
          const s = services.get(name)
          if (!s)
            throw new Error(
              `plugin '${p.name}' asked for service '${String(name)}' that no enabled plugin provides`,
            )
          if (s.owner !== p.name && !deps.has(s.owner))
            throw new Error(
              `plugin '${p.name}' uses service '${String(name)}' of '${s.owner}' without listing it in dependsOn`,
            )
          return s.service as Services[K]
        },
        health: (name, check, opts) => checks.add(name, check, opts),
        fastRoute: (method, path, handler) => routes.add(method, path, handler),
        staticRoute: (path, response) => routes.setStatic(path, response),
        schedule: (name, everyMs, job, opts) => scheduler.add(name, everyMs, job, opts),
        onStart: (fn) => {
          starts.push(fn)
        },
        onStop: (fn) => {
          stops.push(fn)
        },
      }
      app.use(await p.setup(ctx as never))
    }
    for (const fn of starts) await fn()
    await scheduler.start()
    await events.start()
    // Stop hooks run in reverse: the consumers and jobs stop before any plugin's own stop hook.
    stops.push(() => scheduler.stop())
    stops.push(() => events.stop())
    // First of all: the writes answered just before the stop reach their listeners (the audit
    // log). Their after-response hooks come a turn or more after the answer (several under load):
    // wait for those not yet emitted, up to 2 s (a hook that never comes must not hold the stop).
    stops.push(async () => {
      for (let i = 0; i < 200 && writesUnheard > 0; i++) await Bun.sleep(10)
      await Promise.all(writesHeard)
    })
    const generatedAdminPassword = await bootstrapAdmin(
      auth,
      core.admin.email,
      pendingAdmin,
      core.admin.password,
      log,
      opts.hashPassword,
    )

    return {
      app,
      db,
      auth,
      metrics,
      bus,
      log,
      events,
      routes,
      bodyLimit,
      bodyLimitFor,
      stop: stopAll,
      generatedAdminPassword,
    }
  } catch (e) {
    await stopAll()
    throw e
  }
}
