import type { Static, TSchema } from '@sinclair/typebox'
import type { AnyElysia } from 'elysia'
import type { RouteGuard } from './audit'
import type { RequestGuard } from './auth/guard'
import type { Areas } from './auth/roles'
import type { AuthService } from './auth/service'
import type { Bus } from './bus'
import type { Changes } from './changes'
import type { CoreConfig } from './config'
import type { Db, Migration } from './db'
import type { EventLogService } from './event-log-types'
import type { ErrorFamily } from './http'
import type { Logger } from './log'
import type { Metrics } from './metrics'
import type { Outbound } from './outbound'
import type { LimiterSlot } from './ratelimit'
import type { ScheduleOptions, ScheduledJob } from './schedule'
import type { SharedState } from './shared'

/**
 * Services a plugin exports to the plugins that depend on it. A plugin adds its entry by
 * augmentation, next to its manifest:
 *
 *   declare module '../../core/plugin' { interface Services { games: GamesService } }
 *
 * and registers it in `setup` with `ctx.provide('games', service)`. Another plugin lists
 * `dependsOn: ['games']` and reads it with `ctx.service('games')`. No plugin reads another's tables.
 */
// biome-ignore lint/suspicious/noEmptyInterface: augmented by plugins
export interface Services {}

/**
 * One health check's answer. `status` is `up` or `down`; any other fields (counts, latency) are
 * shown under `checks.<name>` of `/healthz` and `/readyz`.
 */
export type HealthResult = { status: 'up' | 'down' | 'disabled'; error?: string } & Record<string, unknown>

export interface HealthOptions {
  /** A failing critical check turns `/healthz` and `/readyz` to 503; others only report. Default true. */
  critical?: boolean
}

export type FastMethod = 'GET' | 'POST'
/** The server a fast route runs in: enough to know the client's address. */
export type FastServer = { requestIP(r: Request): { address: string } | null }
/** A handler of Bun's native router: the raw request, the decoded path parameters and the server. */
export type FastHandler = (
  request: Request,
  params: Record<string, string>,
  /** Null when the request came through `app.handle` without a server (tests). */
  server: FastServer | null,
) => Response | Promise<Response>

export interface PluginContext<C> {
  /** The plugin's own name. */
  name: string
  /**
   * This instance's name among those sharing the store (`instance_id`, else generated once into
   * data_dir): what it made that only it can finish or serve (a backup file) is marked with it.
   */
  instanceId: string
  /** `plugins.<name>` of the YAML, validated and with defaults applied. */
  config: C
  /** The platform settings (server, database, auth, log, telemetry, redis), read-only. */
  core: CoreConfig
  db: Db
  metrics: Metrics
  log: Logger
  /** Platform events inside this process (core/events.ts). */
  bus: Bus
  /**
   * Change notices to every instance sharing the store (PostgreSQL LISTEN/NOTIFY): publish what
   * you changed that others cache, and drop or rebuild your cache when you hear it.
   */
  changes: Changes
  /**
   * Short-lived state all instances share (Redis when configured, else the database): one-time
   * claims (replay windows) and windowed counters (budgets). Degrades to this process on a Redis outage.
   */
  shared: SharedState
  auth: AuthService
  /**
   * The route policy macros, defined once in core: `{ permission: 'games:write' }` (Bearer JWT or
   * x-admin-token), `{ apiKey: true }` (an SDK key), `{ sdkOr: { permission, owner } }` (either, the
   * SDK key only for its own game and environment), `{ appScope: 'trigger' }` (spec 2: server keys
   * and application tokens by scope, users by permission). Each authenticates before the body or
   * query is read, answers a credential of another kind with 403 naming it, and counts the request
   * against the app's one rate limiter: `new Elysia({ name }).use(ctx.guard)`. docs/security.md.
   */
  guard: RouteGuard
  /**
   * The guard's policies for a raw request, for fast routes (`fastRoute`), where no macro runs:
   * `const check = ctx.requestGuard.permission('ml-serving:write')` once, then per request
   * `await check(request, headers)` authenticates exactly as `{ permission }` does (Bearer JWT or
   * x-admin-token; 401, 403, 429 thrown), counts the rate limit and fills `headers` with its
   * X-RateLimit-* headers. Document the Elysia twin of the route with `PERMISSION_SECURITY`.
   */
  requestGuard: RequestGuard
  /**
   * The limiter the guard counts every authenticated request against: core's in-memory one
   * (`rate_limit` of the YAML) unless a plugin puts another in place with `use` (the rate-limits
   * plugin's bucket shared through Redis).
   */
  rateLimiter: LimiterSlot
  providers: ProviderRegistry
  /**
   * The outbound policy (`outbound` of the YAML): every request to a host given through the API
   * goes through it (`ctx.outbound.fetch(url, init)`, or `await ctx.outbound.address(host)` for
   * raw TCP and TLS, connecting to the address it answers). Hosts the YAML names use
   * `ctx.outbound.trusted`. Report a failure with `outboundFailure(e)`: one short line.
   */
  outbound: Outbound
  /**
   * The event log (core/event-log.ts): ingestion provides the committed raw events, payments and
   * invocations (`provide`); any plugin registers a named consumer (`consume`) that derives its
   * results from them in order, in batches, in the transaction that advances its cursor.
   */
  events: EventLogService
  provide<K extends keyof Services>(name: K, service: Services[K]): void
  /** A service of a plugin named in `dependsOn` (anything else is a startup error). */
  service<K extends keyof Services>(name: K): Services[K]
  /**
   * Adds a named check to `/healthz`, `/readyz` (`checks.<name>`) and the metrics
   * (`svc_health_check_up{check}`). Checks run when asked, with a 2 s timeout.
   */
  health(name: string, check: () => Promise<HealthResult> | HealthResult, opts?: HealthOptions): void
  /**
   * Serves one hot path from Bun's native router ahead of Elysia (no hooks, no body parsing, no
   * auth): reads every game client polls, signed ingestion, ML predictions (authenticated with
   * `requestGuard`, the body read with `jsonBodyReader` of core/strict.ts). Core still records the request
   * histogram and maps a thrown HttpError to the path's error body. Register the same path in the
   * plugin's Elysia routes too, with the same handler: that route documents it in the OpenAPI
   * and answers `app.handle` (tests, and servers that use only `fetch`).
   */
  fastRoute(method: FastMethod, path: string, handler: FastHandler): void
  /**
   * Serves one exact path (GET, HEAD) with a pre-built response from Bun's native router: no
   * JavaScript runs per request, so these reads are not in the request histogram. Bun answers a
   * matching If-None-Match with 304 from the response's ETag. Without a response, removes it.
   * The change is visible to the next request. Exact paths win over `fastRoute` patterns.
   */
  staticRoute(path: string, response: Response | undefined): void
  /**
   * A periodic job, by a name unique in the app: `ctx.schedule('backups.auto', 60_000, job)`.
   * One run per tick across every instance sharing the store (`perInstance` for work on this
   * process's own state); never overlapping itself; a tick missed while all instances were down
   * runs once at start; its last run, duration and error in `/healthz` (`checks.schedule`) and the
   * `svc_schedule_*` metrics. Starts after the start hooks and is aborted (its signal) and awaited
   * before the stop hooks. Use this, not `setInterval`, for every periodic job (core/schedule.ts).
   */
  schedule(name: string, everyMs: number, job: ScheduledJob, opts?: ScheduleOptions): void
  /** Runs after every plugin is set up, before the server listens. The one start hook. */
  onStart(fn: () => Promise<void> | void): void
  /** Runs on shutdown, in reverse order of registration, after in-flight requests finished. */
  onStop(fn: () => Promise<void> | void): void
}

export interface PluginManifest<S extends TSchema = TSchema> {
  /** The key under `plugins:` in the YAML and the ledger name of its migrations. */
  name: string
  /** Plugins set up before this one, and the only ones whose services it may use. */
  dependsOn?: readonly string[]
  /**
   * TypeBox schema of `plugins.<name>`; use `additionalProperties: false` so a typo is an error.
   * Mark secret settings with `Secret()` (core/secrets.ts) so every read and log masks them.
   */
  config?: S
  /**
   * Environment variables that override a setting, by dotted path in `plugins.<name>`
   * (`{ WAREHOUSE_DSN: 'warehouse.dsn' }`). A variable set to the empty string applies too.
   */
  env?: Readonly<Record<string, string>>
  /**
   * What the schema cannot say (a secret's least length, a setting that matters only while
   * another is on): one line a problem, naming the setting (`plugins.<name>.x`) and never a
   * secret's value. Run with the schema's check, on settings the schema admitted, so
   * `liveops check-config` reports them and the server does not start with them.
   */
  check?(settings: Static<S>): string[]
  /** Numbered migrations, imported statically so the compiled binary carries them. */
  migrations?: readonly Migration[]
  /**
   * The permission areas this plugin's routes name, with each role's default grant (admin holds
   * every area). Core's role table is the union of these; an area may be declared once.
   */
  permissions?: Areas
  /**
   * The error body of the plugin's API family, by path prefix, where it differs from the default
   * (`/api/v1/*`: the spec 2/3 envelope; other `/api/*`: the spec 1 general body). The longest
   * matching prefix of any plugin wins.
   */
  errors?: ReadonlyArray<{ prefix: string; body: ErrorFamily }>
  /**
   * SDK-facing paths that browsers of any origin may call (CORS `*`): routes a game's own page
   * reaches with an API key, a signature or no credentials. A trailing `*` makes a prefix. Every
   * other route answers only the origins of `server.cors_origins`.
   */
  anyOrigin?: readonly string[]
  /**
   * Smaller body limits than `server.body_limit_mb` for exact paths, in bytes: routes anyone may
   * call without a credential (a chat platform's callback) take only what they need, refused
   * with 413 before a byte is read (by Content-Length) or as soon as a chunked body passes it.
   */
  bodyLimits?: Readonly<Record<string, number>>
  /** Builds the plugin's routes (one `new Elysia({ name })`) and registers its services and hooks. */
  setup(ctx: PluginContext<Static<S>>): AnyElysia | Promise<AnyElysia>
}

/** Identity function that types a plugin manifest. Importing a plugin has no side effects. */
export function definePlugin<S extends TSchema>(manifest: PluginManifest<S>): PluginManifest<S> {
  return manifest
}

// ---------------------------------------------------------------------------------------------
// Providers: notification channel types (webhook, smtp, log, ...)

export type SendResult = { ok: true; info?: string } | { ok: false; retryable: boolean; error: string }

/** What a provider sends: one delivery of one notification to one channel. */
export interface Delivery {
  /** The task (delivery) id; the same on every retry. */
  id: string
  /** Channel name. */
  provider: string
  level: string
  targets: string[]
  /** Recipients for this channel (addresses, user names); empty means all configured. */
  recipients: string[]
  /** Task creation time, RFC 3339. */
  timestamp: string
  title: string
  body: string
  raw: Record<string, unknown>
}

export interface Provider {
  /** Never swallows an error: a failure is returned with whether retrying may help. */
  send(delivery: Delivery, signal?: AbortSignal): Promise<SendResult>
  /** Checks the configuration (and may probe the target) before a swap; throws with a reason. */
  verify?(): Promise<void>
  close?(): Promise<void>
}

export interface ProviderDefinition<S extends TSchema = TSchema> {
  /** The `type` named in a channel's configuration. */
  type: string
  /**
   * Settings schema. Secret fields are marked in it (`Secret`, `SecretUrl`, `SecretValues` of
   * core/secrets.ts; a plain JSON schema marks them with `secret: 'value' | 'url' | 'values'`), and
   * every read, log line and worker view masks what it marks.
   */
  config: S
  /**
   * Spec 2: a top-level setting written `$VAR` names an environment variable. Notify expands it
   * before `create`: from the whole environment for channels the YAML configures, and only from
   * the variables `plugins.notify.api_env` lists for settings that arrive through the API.
   */
  expandEnv?: boolean
  /**
   * `outbound` is the client every connection of the provider goes through: the policy for
   * channels configured through the API, `Outbound.trusted` for channels the YAML configures.
   * A setting it refuses throws: `invalidField('headers.Host', reason)` (core/http.ts) names the
   * setting, which notify reports under the channel's `config` (`body.config.headers.Host`).
   */
  create(settings: Static<S>, env: ProviderEnv): Provider | Promise<Provider>
}

export interface ProviderEnv {
  log: Logger
  outbound: Outbound
}

export function defineProvider<S extends TSchema>(def: ProviderDefinition<S>): ProviderDefinition<S> {
  return def
}

/**
 * Loads a third-party provider from a file (`module: ./ext/sms.ts` in the YAML, `--module` of a
 * remote worker): its default export made by `defineProvider`. The path is read at run time, so
 * it works from source and from the compiled binary alike.
 */
export async function loadProviderModule(path: string): Promise<ProviderDefinition> {
  const { resolve } = await import('node:path')
  const mod = (await import(resolve(path))) as { default?: ProviderDefinition }
  const def = mod.default
  if (!def || typeof def.create !== 'function' || typeof def.type !== 'string')
    throw new Error(`'${path}' has no default export made by defineProvider`)
  return def
}

/** Provider types by name. Provider plugins register here in setup; notify looks them up. */
export class ProviderRegistry {
  private types = new Map<string, ProviderDefinition>()

  register(def: ProviderDefinition): void {
    if (this.types.has(def.type)) throw new Error(`provider type '${def.type}' registered twice`)
    this.types.set(def.type, def)
  }

  get(type: string): ProviderDefinition | undefined {
    return this.types.get(type)
  }

  list(): string[] {
    return [...this.types.keys()]
  }
}
