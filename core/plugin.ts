import type { Static, TSchema } from '@sinclair/typebox'
import type { AnyElysia } from 'elysia'
import type { authGuard, rateLimiting } from './auth/guard'
import type { AuthService } from './auth/service'
import type { Bus } from './bus'
import type { CoreConfig } from './config'
import type { Db, Migration } from './db'
import type { Logger } from './log'
import type { Metrics } from './metrics'

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

/** Health contributions (spec 3: `checks.agents`), filled by whichever plugin tracks agents. */
export interface AgentCounts {
  total: number
  online: number
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
  /** `plugins.<name>` of the YAML, validated and with defaults applied. */
  config: C
  /** The whole validated configuration (read-only). */
  core: CoreConfig
  db: Db
  metrics: Metrics
  log: Logger
  bus: Bus
  auth: AuthService
  /**
   * The route policy macros (`{ permission: 'games:write' }`, `{ apiKey: true }`) sharing the
   * app's one rate limiter: `new Elysia({ name }).use(ctx.guard)`.
   */
  guard: ReturnType<typeof authGuard>
  /** The same per-user and per-key rate limit, for plugins with a macro of their own. */
  rateLimit: ReturnType<typeof rateLimiting>
  providers: ProviderRegistry
  provide<K extends keyof Services>(name: K, service: Services[K]): void
  service<K extends keyof Services>(name: K): Services[K]
  /** Replaces the agents count in `/healthz` and the svc_agents_* gauges. */
  setAgentCounter(fn: () => Promise<AgentCounts> | AgentCounts): void
  /**
   * Serves one hot, public path from Bun's native router ahead of Elysia (no hooks, no body
   * parsing, no auth): reads every game client polls, signed ingestion. Core still records the request
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
  /** Runs after every plugin is set up, before the server listens. */
  onStart(fn: () => Promise<void> | void): void
  /** Runs on shutdown, in reverse plugin order, after in-flight requests finished. */
  onStop(fn: () => Promise<void> | void): void
}

export interface PluginManifest<S extends TSchema = TSchema> {
  /** The key under `plugins:` in the YAML and the ledger name of its migrations. */
  name: string
  /** Plugins set up before this one; listing a missing plugin is a startup error. */
  dependsOn?: readonly string[]
  /** TypeBox schema of `plugins.<name>`; use `additionalProperties: false` so a typo is an error. */
  config?: S
  /** Numbered migrations, imported statically so the compiled binary carries them. */
  migrations?: readonly Migration[]
  /** Builds the plugin's routes (one `new Elysia({ name })`) and registers its services. */
  setup(ctx: PluginContext<Static<S>>): AnyElysia | Promise<AnyElysia>
  start?(ctx: PluginContext<Static<S>>): Promise<void> | void
  stop?(ctx: PluginContext<Static<S>>): Promise<void> | void
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
  /** Settings schema; names of secret fields are listed so reads mask them. */
  config: S
  secrets?: readonly string[]
  create(settings: Static<S>, env: { log: Logger }): Provider | Promise<Provider>
}

export function defineProvider<S extends TSchema>(def: ProviderDefinition<S>): ProviderDefinition<S> {
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
