import { Elysia, t as T } from 'elysia'
import { definePlugin } from '../../core/plugin'
import m001 from './migrations/001_agents.sql' with { type: 'text' }

/**
 * Agents (spec 3): the processes next to game servers that register functions and heartbeat.
 * `/healthz` counts them (`checks.agents: {total, online}`) and the svc_agents_* gauges are
 * computed from the store when read. An agent is online while its last heartbeat is younger than
 * `offline_after_s`.
 */
export default definePlugin({
  name: 'agents',
  config: T.Object(
    {
      /** Seconds without a heartbeat after which an agent counts as offline. */
      offline_after_s: T.Integer({ minimum: 1, default: 30 }),
    },
    { additionalProperties: false, default: {} },
  ),
  migrations: [{ id: 1, name: 'agents', sql: m001 }],
  permissions: { agents: { write: ['operator'] } },
  setup(ctx) {
    const counts = async () => {
      const since = Date.now() - ctx.config.offline_after_s * 1000
      const row = await ctx.db.get<{ total: number | string; online: number | string | null }>(
        'SELECT COUNT(*) AS total, SUM(CASE WHEN last_heartbeat_at >= ? THEN 1 ELSE 0 END) AS online FROM agents',
        [since],
      )
      return { total: Number(row?.total ?? 0), online: Number(row?.online ?? 0) }
    }
    const total = ctx.metrics.gauge('svc_agents_total', 'Registered agents')
    const healthy = ctx.metrics.gauge('svc_agents_healthy', 'Agents passing their health check')
    const functions = ctx.metrics.gauge('svc_functions_registered', 'Registered functions')
    ctx.metrics.collect(async () => {
      const c = await counts()
      total.set(c.total)
      healthy.set(c.online)
      const rows = await ctx.db.all<{ functions: string }>('SELECT functions FROM agents')
      functions.set(rows.reduce((n, r) => n + (JSON.parse(r.functions) as unknown[]).length, 0))
    })
    // Informational: a fleet of offline agents is worth seeing, not a reason to take the platform out of rotation.
    ctx.health('agents', async () => ({ status: 'up', ...(await counts()) }), { critical: false })
    return new Elysia({ name: 'agents' })
  },
})
