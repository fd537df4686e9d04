import { Elysia, t as T } from 'elysia'
import { MIN_SECRET } from '../../core/config'
import { invalidField } from '../../core/http'
import { definePlugin } from '../../core/plugin'
import { Secret } from '../../core/secrets'
import m001 from './migrations/001_agents.sql' with { type: 'text' }
import m002 from './migrations/002_agent_details.sql' with { type: 'text' }
import m003 from './migrations/003_agent_key_nonce.sql' with { type: 'text' }
import m004 from './migrations/004_agent_function_count.sql' with { type: 'text' }
import { agentRoutes } from './routes'
import type { LimitsSource } from './schema'
import { type FleetAgent, MAX_AGENTS, agentsStore } from './store'

/** Agents with per-agent series in a scrape, unless `plugins.agents.metrics_max_agents` says otherwise. */
export const METRICS_MAX_AGENTS = 1_000
const BOUND_HELP =
  'at most plugins.agents.metrics_max_agents agents: online first, then the longest registered'

/**
 * The agents a scrape gives series, `max` at most: online ones first, then the longest registered,
 * then by id. Stable between scrapes (a heartbeat does not reorder it), so the same agents keep
 * their series; an agent registered with the shared token later comes last.
 */
export function metricsAgents(list: FleetAgent[], max: number): FleetAgent[] {
  if (list.length <= max) return list
  const online = (a: FleetAgent) => (a.status === 'online' ? 0 : 1)
  return [...list]
    .sort(
      (a, b) =>
        online(a) - online(b) ||
        a.registered_at - b.registered_at ||
        (a.agent_id < b.agent_id ? -1 : a.agent_id > b.agent_id ? 1 : 0),
    )
    .slice(0, max)
}

/**
 * Agents (spec 3): the processes next to game servers that register functions and heartbeat
 * with the shared agent token. `/healthz` counts them (`checks.agents: {total, online}`); the
 * svc_agents_* and svc_agent_* metrics are computed from the store when read. An agent is online
 * while its last heartbeat is younger than `offline_after_s`. Invocations agents report feed
 * ingest's invocation store through its service. Each heartbeat answers the agent's rate limits,
 * found by the source the rate-limits plugin registers into this plugin's service.
 */
export default definePlugin({
  name: 'agents',
  dependsOn: ['ingest'],
  config: T.Object(
    {
      /** Seconds without a heartbeat after which an agent counts as offline (three missed heartbeats). */
      offline_after_s: T.Integer({ minimum: 1, default: 30 }),
      /**
       * Agents registered at once: a new one past it is 409 (each preview reads them all, each with
       * up to 1,000 functions; the agent list pages, the scrape reads stored counts).
       */
      max_agents: T.Integer({ minimum: 1, default: MAX_AGENTS }),
      /**
       * Agents given per-agent svc_agent_* series in a scrape: online ones first, then the longest
       * registered (the rest are counted in svc_agents_metrics_omitted). At max_agents a scrape
       * had been some 170,000 series, and the shared token registers made-up agents.
       */
      metrics_max_agents: T.Integer({ minimum: 0, default: METRICS_MAX_AGENTS }),
      /**
       * The token agents send in X-Agent-Token (env AGENT_TOKEN), at least 16 characters; empty
       * refuses agents with 403.
       */
      token: Secret(T.String({ default: '' })),
    },
    { additionalProperties: false, default: {} },
  ),
  env: { AGENT_TOKEN: 'token' },
  // The fleet's credential and the HMAC key of every agent key: as long as the admin token must
  // be (a two-letter one had been taken). Checked with the schema: `liveops check-config` says it.
  check: ({ token }) =>
    token && token.length < MIN_SECRET
      ? [`plugins.agents.token (AGENT_TOKEN): at least ${MIN_SECRET} characters, got ${token.length}`]
      : [],
  migrations: [
    { id: 1, name: 'agents', sql: m001 },
    { id: 2, name: 'agent_details', sql: m002 },
    { id: 3, name: 'agent_key_nonce', sql: m003 },
    { id: 4, name: 'agent_function_count', sql: m004 },
  ],
  permissions: { agents: { write: ['operator'] } },
  setup(ctx) {
    // A registration or deletion ends agent keys: every instance forgets the registrations its
    // key checks had read (agents.keys), as this one does at once.
    const store = agentsStore(ctx.db, () => ctx.config.offline_after_s, {
      changed: () => void ctx.changes.publish('agents.keys', {}),
      maxAgents: () => ctx.config.max_agents,
    })
    ctx.changes.on('agents.keys', (_d, origin) => {
      if (origin === 'remote') store.forgetKeys()
    })
    const events = ctx.service('ingest')
    // The rate-limits plugin (which depends on this one) registers how an agent's limits are found.
    let limits: LimitsSource = async () => []
    let limitsOwner = false
    ctx.provide('agents', {
      list: (q) => store.list(q),
      limitsFrom(source) {
        if (limitsOwner) throw new Error('agents: a limits source is registered already')
        limitsOwner = true
        limits = source
      },
    })

    const counts = async () => {
      const since = Date.now() - ctx.config.offline_after_s * 1000
      const row = await ctx.db.get<{ total: number | string; online: number | string | null }>(
        'SELECT COUNT(*) AS total, SUM(CASE WHEN last_heartbeat_at >= ? THEN 1 ELSE 0 END) AS online FROM agents',
        [since],
      )
      return { total: Number(row?.total ?? 0), online: Number(row?.online ?? 0) }
    }
    const m = ctx.metrics
    const total = m.gauge('svc_agents_total', 'Registered agents')
    const healthy = m.gauge(
      'svc_agents_healthy',
      'Agents passing their health check (heartbeat within offline_after_s)',
    )
    const functions = m.gauge(
      'svc_functions_registered',
      'Registered functions (distinct ids over all agents)',
    )
    const labels = ['agent_id', 'game_id', 'env'] as const
    const bounded = ` (${BOUND_HELP})`
    const connected = m.gauge(
      'svc_agent_connected',
      `1 while the agent heartbeats, 0 once offline${bounded}`,
      labels,
    )
    const agentFns = m.gauge(
      'svc_agent_functions_registered',
      `Functions the agent registered${bounded}`,
      labels,
    )
    const jobs = m.counter(
      'svc_agent_jobs_executed_total',
      `Invocations the agent reported${bounded}`,
      labels,
    )
    const duration = m.histogram(
      'svc_agent_jobs_duration',
      `Duration in seconds of the invocations agents reported (since this instance started; ${BOUND_HELP})`,
      labels,
      [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    )
    const omitted = m.gauge(
      'svc_agents_metrics_omitted',
      'Registered agents without svc_agent_* series in this scrape (past plugins.agents.metrics_max_agents)',
    )
    // Computed when read (spec 3): every series comes from the store, so instances agree.
    m.collect(async () => {
      // Counts and labels only: the functions' lists are parsed once per change of them, a few at a time.
      const all = await store.fleet()
      total.set(all.length)
      healthy.set(all.filter((a) => a.status === 'online').length)
      functions.set(await store.distinctFunctions())
      const list = metricsAgents(all, ctx.config.metrics_max_agents)
      omitted.set(all.length - list.length)
      connected.reset()
      agentFns.reset()
      jobs.reset()
      for (const a of list) {
        const l = { agent_id: a.agent_id, game_id: a.game_id, env: a.env }
        connected.set(l, a.status === 'online' ? 1 : 0)
        agentFns.set(l, a.function_count)
        jobs.inc(l, a.jobs_executed)
      }
      // The durations observed here stay, but only for agents as they are registered now and
      // within the bound: one deleted, registered again under other labels or past the bound
      // drops its series (an agent token's 8,000 relabellings had left 8,000 series in every scrape).
      const live = new Set(list.map((a) => `${a.agent_id}\u0000${a.game_id}\u0000${a.env}`))
      for (const v of (await duration.get()).values) {
        const { agent_id, game_id, env } = v.labels as Record<string, string>
        if (!live.has(`${agent_id}\u0000${game_id}\u0000${env}`)) duration.remove({ agent_id, game_id, env })
      }
    })
    // Informational: a fleet of offline agents is worth seeing, not a reason to take the platform out of rotation.
    ctx.health('agents', async () => ({ status: 'up', ...(await counts()) }), { critical: false })

    return new Elysia({ name: 'agents.plugin' }).use(
      agentRoutes(ctx as never, {
        store,
        token: () => ctx.config.token,
        registration: (id) => store.registration(id),
        heartbeatIntervalS: () => Math.max(1, Math.floor(ctx.config.offline_after_s / 3)),
        limits: (agent) => limits(agent),
        async report(agent, r) {
          const now = Date.now()
          // A call's time is an event's: within the ingest plugin's window, or 400 naming it.
          r.invocations.forEach((i, n) => {
            const why = i.ts === undefined ? undefined : events.eventTimeProblem(i.ts, now)
            if (why) throw invalidField(`body.invocations[${n}].ts`, why)
          })
          const calls = r.invocations.map((i) => ({ ...i, ts: i.ts ?? now }))
          await events.ingest(
            calls.map((c) => ({
              event: 'function.invoke',
              ts: String(c.ts),
              game_id: agent.game_id,
              env: agent.env,
              attrs: {
                functionId: c.function_id,
                outcome: c.outcome,
                agentId: agent.agent_id,
                ...(c.duration_ms !== undefined ? { durationMs: c.duration_ms } : {}),
                ...(c.trace_id ? { traceId: c.trace_id } : {}),
                ...(c.actor ? { actor: c.actor } : {}),
              },
            })),
          )
          const failed = calls.filter((c) => c.outcome !== 'success').length
          await store.countJobs(agent.agent_id, calls.length, failed)
          const l = { agent_id: agent.agent_id, game_id: agent.game_id, env: agent.env }
          for (const c of calls) if (c.duration_ms !== undefined) duration.observe(l, c.duration_ms / 1000)
          void ctx.bus.emit('function.invoked', {
            agent_id: agent.agent_id,
            game_id: agent.game_id,
            env: agent.env,
            invocations: calls,
          })
          return { accepted: calls.length, failed }
        },
      }),
    )
  },
})
