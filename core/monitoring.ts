import { RedisClient } from 'bun'
import { Elysia, t } from 'elysia'
import type { RouteGuard } from './audit'
import { requestPrincipal } from './auth/guard'
import type { AuthService } from './auth/service'
import type { CoreConfig } from './config'
import type { Db } from './db'
import { storageFault } from './db/faults'
import { type ErrorFamilies, STORE_RETRY_AFTER_S, ok } from './http'
import type { Metrics } from './metrics'
import type { HealthOptions, HealthResult } from './plugin'
import { Enum } from './schema'

async function withTimeout<T>(p: Promise<T>, ms: number): Promise<T> {
  let timer: Timer | undefined
  try {
    return await Promise.race([
      p,
      new Promise<T>((_, rej) => {
        timer = setTimeout(() => rej(new Error(`timed out after ${ms} ms`)), ms)
      }),
    ])
  } finally {
    clearTimeout(timer)
  }
}

const round3 = (ms: number) => Math.round(ms * 1000) / 1000
const PROBE_PAYLOAD = 'x'.repeat(1 << 20)

/**
 * Named health checks: core's (database, redis: `disabled` when not configured) and every plugin's
 * (`ctx.health`). Each runs when asked, with a timeout, and shows in `/healthz`, `/readyz` and
 * `svc_health_check_up{check}`.
 */
export class HealthChecks {
  private checks = new Map<string, { run: () => Promise<HealthResult> | HealthResult; critical: boolean }>()

  add(name: string, run: () => Promise<HealthResult> | HealthResult, opts: HealthOptions = {}): void {
    if (this.checks.has(name)) throw new Error(`health check '${name}' registered twice`)
    this.checks.set(name, { run, critical: opts.critical ?? true })
  }

  /** Every check's answer (a throw or a timeout is `down` with its message) and whether all critical ones are up. */
  async run(timeoutMs = 2000): Promise<{ up: boolean; checks: Record<string, HealthResult> }> {
    const entries = await Promise.all(
      [...this.checks].map(async ([name, c]) => {
        let r: HealthResult
        try {
          r = await withTimeout(Promise.resolve(c.run()), timeoutMs)
        } catch (e) {
          r = { status: 'down', error: (e as Error).message }
        }
        return [name, r, c.critical] as const
      }),
    )
    return {
      up: entries.every(([, r, critical]) => !critical || r.status === 'up'),
      checks: Object.fromEntries(entries.map(([n, r]) => [n, r])),
    }
  }
}

/** Fields that carry an error's text in a check's detail. */
const ERROR_FIELDS = new Set(['error', 'last_error'])

/**
 * The checks as a caller without credentials sees them: each status and figure, no error text.
 * Those quote the store, the network and the consumers' code (a host and user in a refused
 * connection, a table, a value of a client's event), which is for the studio's people only:
 * a signed-in user (every role reads `ops`) or the admin token gets them whole, and the log has
 * them too. Probes read the status code.
 */
export function withoutErrors(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(withoutErrors)
  if (v === null || typeof v !== 'object') return v
  const out: Record<string, unknown> = {}
  for (const [k, x] of Object.entries(v)) if (!ERROR_FIELDS.has(k)) out[k] = withoutErrors(x)
  return out
}

/**
 * Spec 3 "Health, metrics": `/healthz`, `/readyz`, the JSON metrics and the optional Prometheus
 * exposition. Platform gauges are computed when read, never sampled in the background.
 */
export function monitoring(deps: {
  db: Db
  metrics: Metrics
  config: CoreConfig
  /** The app's one policy-macro instance (shared rate limiter). */
  guard: RouteGuard
  /** Who asks `/healthz`: callers who may read `ops` see the checks' error texts. */
  auth: AuthService
  checks: HealthChecks
  /** Where requests report the store faults they met. */
  families: ErrorFamilies
}) {
  const { db, metrics, config, checks } = deps
  const redis = config.redis.url
    ? // No reconnecting of its own: each check connects again when the last connection is gone,
      // so a refused connection is down at once. With autoReconnect a refused Redis held every
      // health read 1.5 s (the check's bound) while the client's own retries went on for 30 s.
      new RedisClient(config.redis.url, {
        connectionTimeout: 2000,
        autoReconnect: false,
        maxRetries: 0,
        enableOfflineQueue: false,
      })
    : undefined

  const dbUp = metrics.gauge('svc_db_up', '1 when the database answers, 0 when not')
  const dbLatency = metrics.gauge('svc_db_latency_ms', 'Database ping latency in milliseconds')
  const checkUp = metrics.gauge('svc_health_check_up', '1 when the named health check is up, 0 when not', [
    'check',
  ])

  // A read answers on a full disk: after a request met a store fault, the check also writes,
  // and stays down until a write succeeds (space came back, the file is writable again).
  let fault: { cause: string; at: number } | undefined
  deps.families.onStorageFault = (f) => {
    fault ??= { cause: f.cause, at: Date.now() }
  }
  checks.add('database', async () => {
    try {
      const ms = round3(await db.ping())
      if (fault) {
        // A megabyte, committed, then cleared: a single small row can fit in the space a failed
        // transaction left behind, while the next real write still fails.
        await db.run(
          'INSERT INTO liveops_probe (id, at, payload) VALUES (1, ?, ?) ON CONFLICT (id) DO UPDATE SET at = excluded.at, payload = excluded.payload',
          [Date.now(), PROBE_PAYLOAD],
        )
        await db.run('UPDATE liveops_probe SET payload = NULL WHERE id = 1')
        fault = undefined
      }
      dbUp.set(1)
      dbLatency.set(ms)
      return { status: 'up', latency_ms: ms }
    } catch (e) {
      dbUp.set(0)
      const f = storageFault(e)
      if (f) fault = { cause: f.cause, at: fault?.at ?? Date.now() }
      return {
        status: 'down',
        error: f ? f.cause : (e as Error).message,
        ...(fault ? { since: new Date(fault.at).toISOString() } : {}),
      }
    }
  })
  // Not critical: with Redis down every instance falls back to its own limits and replay window
  // (core/shared.ts) and keeps serving; taking them all out of the balancer would refuse everything.
  // Spec 3's health answer always names redis: `disabled` when none is configured.
  checks.add(
    'redis',
    async () => {
      if (!redis) return { status: 'disabled' }
      const t0 = performance.now()
      try {
        // Under the checks' own 2 s, so a silent Redis still reports its latency and error.
        await withTimeout(
          (async () => {
            if (!redis.connected) await redis.connect()
            await redis.send('PING', [])
          })(),
          1500,
        )
        return { status: 'up', latency_ms: round3(performance.now() - t0) }
      } catch (e) {
        return { status: 'down', latency_ms: round3(performance.now() - t0), error: (e as Error).message }
      }
    },
    { critical: false },
  )

  const health = async () => {
    const h = await checks.run()
    for (const [name, r] of Object.entries(h.checks))
      if (r.status !== 'disabled') checkUp.set({ check: name }, r.status === 'up' ? 1 : 0)
    return { up: h.up, body: { status: h.up ? 'ok' : 'unavailable', checks: h.checks } }
  }
  metrics.collect(async () => {
    await health()
  })

  const Check = t.Object(
    {
      status: Enum(['up', 'down', 'disabled'], {
        description: 'disabled: not configured (redis without REDIS_URL)',
      }),
      error: t.Optional(t.String()),
    },
    {
      additionalProperties: true,
      description: 'One check; fields beyond status are its own (latency_ms, total, online, ...)',
    },
  )
  const HealthBody = t.Object({
    status: t.String({ description: 'ok, or unavailable when a critical check is down' }),
    checks: t.Record(t.String(), Check, {
      description: "database, redis (disabled when not configured), agents and every enabled plugin's checks",
    }),
  })
  const detail = (summary: string) => ({ tags: ['monitoring'], summary })

  const answer = async ({
    set,
    request,
  }: {
    set: { status?: number | string; headers: Record<string, string | number> }
    request: Request
  }) => {
    const h = await health()
    set.status = h.up ? 200 : 503
    if (!h.up) set.headers['retry-after'] = String(STORE_RETRY_AFTER_S)
    const who = requestPrincipal(deps.auth, request)
    if (who && deps.auth.permissions.allows(who.roles, 'ops:read')) return h.body
    return { ...h.body, checks: withoutErrors(h.body.checks) as typeof h.body.checks }
  }
  const healthRoute = (summary: string) => ({
    detail: {
      ...detail(summary),
      description:
        'Public. Every check with its status and figures; the error texts (`error`, `last_error`) only with credentials ' +
        'that may read `ops` (a signed-in user of any role, or the admin token), as they quote the store, the network ' +
        "and the consumers' code. The status code is the probe's answer.",
    },
    response: { 200: HealthBody, 503: HealthBody },
  })

  const app = new Elysia({ name: 'liveops.monitoring' })
    .use(deps.guard)
    .get('/healthz', answer, healthRoute('Liveness: every health check (database, redis, agents, plugins)'))
    .get('/readyz', answer, healthRoute('Readiness: 503 until every configured dependency answers'))
    .get('/api/v1/monitoring/metrics', async () => ok(await metrics.json()), {
      permission: 'ops:read',
      detail: detail('Platform metrics (svc_*) as JSON, computed at request time'),
    })
  const prom = config.telemetry.prometheus
  if (prom.enabled)
    app.get(
      prom.path,
      async () =>
        new Response(await metrics.text(), { headers: { 'content-type': metrics.registry.contentType } }),
      {
        detail: detail('Prometheus text exposition (no authentication)'),
      },
    )
  return { app, close: () => redis?.close() }
}
