import { RedisClient } from 'bun'
import { Elysia, t } from 'elysia'
import type { authGuard } from './auth/guard'
import type { CoreConfig } from './config'
import type { Db } from './db'
import { ok } from './http'
import type { Metrics } from './metrics'
import type { AgentCounts } from './plugin'

export interface Monitor {
  agents: () => Promise<AgentCounts> | AgentCounts
}

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

/**
 * Spec 3 "Health, metrics": `/healthz`, `/readyz`, the JSON metrics and the optional Prometheus
 * exposition. Platform gauges are computed when read, never sampled in the background.
 */
export function monitoring(deps: {
  db: Db
  metrics: Metrics
  config: CoreConfig
  /** The app's one policy-macro instance (shared rate limiter). */
  guard: ReturnType<typeof authGuard>
  monitor: Monitor
}) {
  const { db, metrics, config } = deps
  const redis = config.redis.url
    ? new RedisClient(config.redis.url, {
        connectionTimeout: 2000,
        autoReconnect: true,
        enableOfflineQueue: false,
      })
    : undefined

  const dbUp = metrics.gauge('svc_db_up', '1 when the database answers, 0 when not')
  const dbLatency = metrics.gauge('svc_db_latency_ms', 'Database ping latency in milliseconds')
  const agentsTotal = metrics.gauge('svc_agents_total', 'Registered agents')
  const agentsHealthy = metrics.gauge('svc_agents_healthy', 'Agents passing their health check')
  const functions = metrics.gauge('svc_functions_registered', 'Registered functions')
  functions.set(0)

  const checkDb = async () => {
    try {
      const ms = await withTimeout(db.ping(), 2000)
      dbUp.set(1)
      dbLatency.set(Math.round(ms * 1000) / 1000)
      return { status: 'up', latency_ms: Math.round(ms * 1000) / 1000 }
    } catch (e) {
      dbUp.set(0)
      return { status: 'down', error: (e as Error).message }
    }
  }
  const checkAgents = async () => {
    const a = await deps.monitor.agents()
    agentsTotal.set(a.total)
    agentsHealthy.set(a.online)
    return a
  }
  metrics.collect(async () => {
    await Promise.all([checkDb(), checkAgents()])
  })

  const health = async () => {
    const [database, agents] = await Promise.all([checkDb(), checkAgents()])
    type Check = { status: string; latency_ms?: number; error?: string }
    const checks: { database: Check; agents: AgentCounts; redis?: Check } = { database, agents }
    let up = database.status === 'up'
    if (redis) {
      try {
        const t = performance.now()
        await withTimeout(
          (async () => {
            if (!redis.connected) await redis.connect()
            await redis.send('PING', [])
          })(),
          2000,
        )
        checks.redis = { status: 'up', latency_ms: Math.round((performance.now() - t) * 1000) / 1000 }
      } catch (e) {
        checks.redis = { status: 'down', error: (e as Error).message }
        up = false
      }
    }
    return { up, body: { status: up ? 'ok' : 'unavailable', checks } }
  }

  const HealthBody = t.Object({
    status: t.String({ description: 'ok, or unavailable when a check is down' }),
    checks: t.Object({
      database: t.Object({
        status: t.String(),
        latency_ms: t.Optional(t.Number()),
        error: t.Optional(t.String()),
      }),
      redis: t.Optional(
        t.Object({ status: t.String(), latency_ms: t.Optional(t.Number()), error: t.Optional(t.String()) }),
      ),
      agents: t.Object({ total: t.Integer(), online: t.Integer() }),
    }),
  })
  const detail = (summary: string) => ({ tags: ['monitoring'], summary })

  const answer = async ({ set }: { set: { status?: number | string } }) => {
    const h = await health()
    set.status = h.up ? 200 : 503
    return h.body
  }
  const healthRoute = (summary: string) => ({
    detail: detail(summary),
    response: { 200: HealthBody, 503: HealthBody },
  })

  const app = new Elysia({ name: 'liveops.monitoring' })
    .use(deps.guard)
    .get(
      '/healthz',
      answer,
      healthRoute('Liveness with the database, redis (when configured) and agent checks'),
    )
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
