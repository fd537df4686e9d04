import { type Static, Type as T, type TSchema } from '@sinclair/typebox'
import { Value } from '@sinclair/typebox/value'
import { cidrErrors, splitList } from './outbound'

const Strict = { additionalProperties: false } as const

/** The core part of the YAML. Every field documents when and why to change it. */
export const CoreConfigSchema = T.Object(
  {
    server: T.Object(
      {
        /** Listening port (env PORT). */
        port: T.Integer({ minimum: 0, maximum: 65535, default: 8080 }),
        /** Listening address (env HOST). */
        host: T.String({ default: '0.0.0.0' }),
        /** Largest accepted request body in MB; ingestion has its own limits. */
        body_limit_mb: T.Number({ minimum: 0.001, default: 10 }),
        /** Seconds in-flight requests get to finish on SIGTERM. */
        shutdown_grace_s: T.Number({ minimum: 0, default: 10 }),
        /**
         * Behind a reverse proxy: take the client address (for login throttling) from the last
         * X-Forwarded-For entry, the one the proxy added. Off: the socket's peer address.
         */
        trust_forwarded_for: T.Boolean({ default: false }),
        /**
         * Origins (`https://ops.example.com`) whose pages may call the operator API from a browser.
         * The SDK-facing routes (ingestion, /v1/batch, public config) allow every origin anyway.
         */
        cors_origins: T.Array(T.String({ pattern: '^(\\*|https?://[^/\\s]+)$' }), { default: [] }),
      },
      { ...Strict, default: {} },
    ),
    /** Where the embedded store, the generated JWT secret and backups live (env DATA_DIR). */
    data_dir: T.String({ default: './data' }),
    /**
     * This instance's name among those sharing a store (env INSTANCE_ID): in scheduled jobs'
     * leases, `/healthz`, and on the backups it made. Empty: generated once and kept in data_dir,
     * so it survives restarts; set it when the data directory does not.
     */
    instance_id: T.String({ default: '', pattern: '^[A-Za-z0-9._-]{0,64}$' }),
    database: T.Object(
      {
        /** Empty: SQLite in data_dir; `postgres://...`: PostgreSQL; else a SQLite path (env DATABASE_URL). */
        url: T.String({ default: '' }),
        /** PostgreSQL connection pool size. */
        pool: T.Integer({ minimum: 1, maximum: 200, default: 10 }),
      },
      { ...Strict, default: {} },
    ),
    auth: T.Object(
      {
        /** HS256 signing secret; empty: generated once and kept in data_dir (env JWT_SECRET). */
        jwt_secret: T.String({ default: '' }),
        /** Access token lifetime in seconds (the login answer's expiresIn). */
        access_ttl_s: T.Integer({ minimum: 60, default: 900 }),
        /** Refresh token lifetime in seconds. */
        refresh_ttl_s: T.Integer({ minimum: 300, default: 30 * 24 * 3600 }),
        /** Value of the `x-admin-token` header that authenticates internal services; empty disables it. */
        admin_token: T.String({ default: '' }),
        /**
         * Failed logins (and refreshes) before the backoff starts; see core/auth/throttle.ts.
         * Answers past them are 429 with Retry-After, doubling from 1 s up to the caps.
         */
        login_throttle: T.Object(
          {
            /** Per account, from one address or from all of them. */
            account_failures: T.Integer({ minimum: 1, default: 5 }),
            /** Per client address, over every account. */
            address_failures: T.Integer({ minimum: 1, default: 20 }),
            /** Cap of an address's lock and of an account's lock for the address that failed on it. */
            max_lock_s: T.Integer({ minimum: 1, default: 900 }),
            /** Cap of an account's lock for other addresses: short, so an attacker cannot keep its owner out. */
            account_max_lock_s: T.Integer({ minimum: 1, default: 60 }),
          },
          { ...Strict, default: {} },
        ),
      },
      { ...Strict, default: {} },
    ),
    admin: T.Object(
      {
        /** Bootstrap admin created when no user exists (env ADMIN_EMAIL). */
        email: T.String({ default: 'admin@localhost' }),
        /** Empty: a password is generated and printed once (env ADMIN_PASSWORD). */
        password: T.String({ default: '' }),
      },
      { ...Strict, default: {} },
    ),
    rate_limit: T.Object(
      {
        /** Spec 1 section 8: requests per minute per API key or user. 0 disables limiting. */
        requests_per_minute: T.Integer({ minimum: 0, default: 1000 }),
        /** Requests per second per API key or user. */
        burst: T.Integer({ minimum: 0, default: 100 }),
      },
      { ...Strict, default: {} },
    ),
    log: T.Object(
      {
        level: T.Union([T.Literal('debug'), T.Literal('info'), T.Literal('warn'), T.Literal('error')], {
          default: 'info',
        }),
        format: T.Union([T.Literal('console'), T.Literal('json')], { default: 'json' }),
        /** Append to this file instead of stdout. */
        file: T.Optional(T.String()),
        max_size: T.Number({ minimum: 1, default: 100 }),
        max_backups: T.Integer({ minimum: 0, default: 5 }),
        max_age: T.Integer({ minimum: 0, default: 30 }),
        /** Field names masked in logs and API reads ('set' plus the last 4 characters). */
        sensitive_fields: T.Array(T.String(), {
          default: ['password', 'token', 'secret', 'authorization', 'api_key'],
        }),
        /** Log each HTTP request at debug level. */
        requests: T.Boolean({ default: false }),
      },
      { ...Strict, default: {} },
    ),
    telemetry: T.Object(
      {
        prometheus: T.Object(
          {
            /** Serve the Prometheus text exposition, unauthenticated (env TELEMETRY_PROMETHEUS_ENABLED). */
            enabled: T.Boolean({ default: false }),
            path: T.String({ pattern: '^/', default: '/metrics/prometheus' }),
          },
          { ...Strict, default: {} },
        ),
      },
      { ...Strict, default: {} },
    ),
    /**
     * Where requests to hosts given through the API may go (webhook and chat channels, SMTP
     * hosts, certificate probes, ML serving endpoints, ops webhooks); hosts the YAML names are
     * trusted. Checked on every address a name resolves to; the most specific entry wins, and
     * at equal width this list beats the built-in defaults and deny beats allow. Denied unless
     * listed in `allow`: loopback, private and shared networks, link-local, cloud metadata.
     */
    outbound: T.Object(
      {
        /** Networks to open (CIDR or single addresses), e.g. `10.0.0.0/8` (env LIVEOPS_OUTBOUND_ALLOW, comma-separated). */
        allow: T.Array(T.String(), { default: [] }),
        /** Networks to close, public ones included. */
        deny: T.Array(T.String(), { default: [] }),
      },
      { ...Strict, default: {} },
    ),
    redis: T.Object(
      {
        /** When set, `/readyz` checks it. */
        url: T.String({ default: '' }),
      },
      { ...Strict, default: {} },
    ),
    /** Plugins to enable, each with its own settings. */
    plugins: T.Record(T.String(), T.Unknown(), { default: {} }),
  },
  Strict,
)

export type CoreConfig = Static<typeof CoreConfigSchema>

export class ConfigError extends Error {
  constructor(readonly errors: string[]) {
    // One problem is one line (what systemd and a terminal show best); several are listed.
    super(
      errors.length === 1
        ? `invalid configuration: ${errors[0]}`
        : `invalid configuration:\n${errors.map((e) => `  - ${e}`).join('\n')}`,
    )
  }
}

const VAR = /\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}/g

/** `${VAR}` and `${VAR:-default}` in every string value; an unset `${VAR}` without default is an error. */
export function expand(
  value: unknown,
  env: Record<string, string | undefined>,
  path: string,
  errors: string[],
): unknown {
  if (typeof value === 'string')
    return value.replace(VAR, (_, name: string, fallback: string | undefined) => {
      const v = env[name]
      if (v !== undefined && v !== '') return v
      if (fallback !== undefined) return fallback
      if (v === '') return ''
      errors.push(`${path || '(root)'}: environment variable ${name} is not set and has no default`)
      return ''
    })
  if (Array.isArray(value)) return value.map((v, i) => expand(v, env, `${path}[${i}]`, errors))
  if (value && typeof value === 'object')
    return Object.fromEntries(
      Object.entries(value).map(([k, v]) => [k, expand(v, env, path ? `${path}.${k}` : k, errors)]),
    )
  return value
}

function pathOf(prefix: string, pointer: string): string {
  const parts = pointer.split('/').filter(Boolean)
  return [prefix, ...parts].filter(Boolean).join('.')
}

/** Defaults, conversion of env-expanded strings to numbers and booleans, then every error with its path. */
export function check<S extends TSchema>(
  schema: S,
  raw: unknown,
  prefix: string,
  errors: string[],
): Static<S> {
  const value = Value.Convert(schema, Value.Default(schema, Value.Clone(raw ?? {})))
  for (const e of Value.Errors(schema, value)) {
    errors.push(`${pathOf(prefix, e.path) || '(root)'}: ${e.message}`)
  }
  return value as Static<S>
}

function setPath(target: Record<string, unknown>, path: string[], v: unknown) {
  let o = target
  for (const k of path.slice(0, -1)) {
    if (!o[k] || typeof o[k] !== 'object') o[k] = {}
    o = o[k] as Record<string, unknown>
  }
  o[path[path.length - 1]] = v
}

/** The running contract: these variables win over the YAML. */
function applyEnv(raw: Record<string, unknown>, env: Record<string, string | undefined>) {
  const set = (path: string[], v: unknown) => setPath(raw, path, v)
  if (env.PORT) set(['server', 'port'], env.PORT)
  if (env.HOST) set(['server', 'host'], env.HOST)
  if (env.DATA_DIR) set(['data_dir'], env.DATA_DIR)
  if (env.INSTANCE_ID) set(['instance_id'], env.INSTANCE_ID)
  if (env.DATABASE_URL) set(['database', 'url'], env.DATABASE_URL)
  if (env.JWT_SECRET) set(['auth', 'jwt_secret'], env.JWT_SECRET)
  if (env.ADMIN_EMAIL) set(['admin', 'email'], env.ADMIN_EMAIL)
  if (env.ADMIN_PASSWORD) set(['admin', 'password'], env.ADMIN_PASSWORD)
  if (env.ADMIN_TOKEN) set(['auth', 'admin_token'], env.ADMIN_TOKEN)
  if (env.REDIS_URL) set(['redis', 'url'], env.REDIS_URL)
  if (env.LIVEOPS_OUTBOUND_ALLOW !== undefined)
    set(['outbound', 'allow'], splitList(env.LIVEOPS_OUTBOUND_ALLOW))
  if (env.TELEMETRY_PROMETHEUS_ENABLED)
    set(['telemetry', 'prometheus', 'enabled'], env.TELEMETRY_PROMETHEUS_ENABLED)
}

export interface LoadedConfig {
  core: CoreConfig
  /** Validated settings of each enabled plugin, by name. */
  plugins: Record<string, unknown>
}

export interface PluginSchemas {
  /** A plugin's settings schema and the environment variables that override its settings. */
  [name: string]: {
    config?: TSchema
    env?: Readonly<Record<string, string>>
    /** Problems the schema cannot state, on settings it admitted (PluginManifest.check). */
    check?(settings: unknown): string[]
  }
}

/**
 * The shortest `auth.jwt_secret` and `auth.admin_token` a server starts with, and the plugins'
 * shared tokens (the agents', the remote workers').
 */
export const MIN_SECRET = 16

/**
 * Parses, expands and validates a YAML text against the core schema and the schema of every
 * plugin it enables. Throws one ConfigError listing every problem with its path.
 */
export function loadConfig(
  text: string,
  known: PluginSchemas,
  env: Record<string, string | undefined> = process.env,
): LoadedConfig {
  // Loaded at the first file read: the binary's embedded default comes parsed (core/embedded-config.ts).
  const { parse: parseYaml } = require('yaml') as typeof import('yaml')
  let parsed: unknown
  try {
    parsed = parseYaml(text) ?? {}
  } catch (e) {
    // The whole message: the line and column, then the offending line with a caret under it.
    throw new ConfigError([`YAML: ${(e as Error).message.trimEnd()}`])
  }
  return checkConfig(parsed, known, env)
}

/** `loadConfig` after the YAML parse: expands and validates a parsed configuration. */
export function checkConfig(
  parsed: unknown,
  known: PluginSchemas,
  env: Record<string, string | undefined> = process.env,
): LoadedConfig {
  const errors: string[] = []
  if (typeof parsed !== 'object' || Array.isArray(parsed))
    throw new ConfigError(['(root): expected a mapping'])
  const raw = expand(parsed, env, '', errors) as Record<string, unknown>
  applyEnv(raw, env)
  const core = check(CoreConfigSchema, raw, '', errors)
  // A short secret is guessed: a one-letter JWT_SECRET was found offline from a viewer's token
  // (then re-signed as admin), ADMIN_TOKEN=zq in 667 requests. The value itself is never echoed.
  for (const [key, env] of [
    ['jwt_secret', 'JWT_SECRET'],
    ['admin_token', 'ADMIN_TOKEN'],
  ] as const) {
    const v = core.auth?.[key]
    if (typeof v === 'string' && v !== '' && v.length < MIN_SECRET)
      errors.push(`auth.${key} (${env}): at least ${MIN_SECRET} characters when set, got ${v.length}`)
  }
  for (const key of ['allow', 'deny'] as const) {
    const list = core.outbound?.[key]
    if (Array.isArray(list)) errors.push(...cidrErrors(list.map(String), `outbound.${key}`))
  }
  const plugins: Record<string, unknown> = {}
  const names = Object.keys(known)
  for (const [name, settings] of Object.entries(core.plugins ?? {})) {
    const def = known[name]
    if (!def) {
      errors.push(`plugins.${name}: unknown plugin; known plugins: ${names.join(', ')}`)
      continue
    }
    const own = (settings && typeof settings === 'object' ? settings : {}) as Record<string, unknown>
    for (const [variable, path] of Object.entries(def.env ?? {}))
      if (env[variable] !== undefined) setPath(own, path.split('.'), env[variable])
    const before = errors.length
    plugins[name] = def.config ? check(def.config, own, `plugins.${name}`, errors) : own
    if (def.check && errors.length === before) errors.push(...def.check(plugins[name]))
  }
  // Checked here, before anything is written: a short one used to fail after the migrations ran.
  const password = core.admin?.password
  if (typeof password === 'string' && password.length > 0 && password.length < 8)
    errors.push(
      'admin.password (ADMIN_PASSWORD): must be at least 8 characters (leave it empty and one is generated and printed once)',
    )
  if (errors.length) throw new ConfigError(errors)
  return { core, plugins }
}
