import { Elysia, t } from 'elysia'
import { auditor } from '../../core/audit'
import { invalidField, ok } from '../../core/http'
import type { PluginContext } from '../../core/plugin'
import { rejectUnknown } from '../../core/strict'
import { agentAuth, agentKey } from './auth'
import {
  Agent,
  AgentLimits,
  AgentListQuery,
  type EffectiveLimit,
  Heartbeat,
  HeartbeatAnswer,
  InvocationReport,
  Register,
  RegisterAnswer,
} from './schema'
import { AGENTS_PAGE_MAX, type AgentsStore, type Registration } from './store'

const tag = (summary: string, description?: string, responses?: Record<string, { description: string }>) => ({
  tags: ['agents'],
  summary,
  description,
  ...(responses ? { responses } : {}),
})
const Params = t.Object({ id: t.String() })
const AGENT_AUTH = {
  '401': {
    description:
      'Missing or wrong X-Agent-Token, or an agent key its agent no longer holds (the agent was deleted; its id may be registered again)',
  },
  '403': {
    description: "No agent token configured (agents_disabled), or another agent's key (agent_key_scope)",
  },
}

export interface AgentRouteDeps {
  store: AgentsStore
  /** The shared agent token; empty refuses every agent call with 403 agents_disabled. */
  token: () => string
  /** An agent's current registration, which its key is checked against on each use. */
  registration(agentId: string): Promise<Registration | undefined>
  heartbeatIntervalS: () => number
  /** The rate limits the agent enforces (none without the rate-limits plugin). */
  limits(agent: Agent): Promise<EffectiveLimit[]>
  /** Hands reported invocations to the invocation analytics and the bus. */
  report(agent: Agent, r: InvocationReport): Promise<{ accepted: number; failed: number }>
}

export function agentRoutes(ctx: PluginContext<unknown>, d: AgentRouteDeps) {
  const { store } = d
  const audit = auditor(ctx)

  return new Elysia({ name: 'agents' })
    .use(ctx.guard)
    .use(agentAuth(d.token, (id) => d.registration(id), ctx.requestGuard))
    .model({ 'agents.Agent': Agent })
    .post(
      '/api/v1/agents',
      async ({ body, set, request, server }) => {
        const { agent, created, registration } = await store.register(body)
        set.status = created ? 201 : 200
        audit(
          { request, server },
          created ? 'agents.register' : 'agents.reregister',
          agent.agent_id,
          {
            game_id: agent.game_id,
            env: agent.env,
            region: agent.region,
            zone: agent.zone,
            functions: agent.functions.length,
          },
          { kind: 'agent', id: agent.agent_id, name: agent.name },
        )
        return ok({
          ...agent,
          heartbeat_interval_s: d.heartbeatIntervalS(),
          agent_key: agentKey(d.token(), agent.agent_id, registration),
        })
      },
      {
        agentToken: true,
        transform: ({ body }) => rejectUnknown(Register, body, 'body'),
        body: Register,
        response: {
          200: t.Object({ code: t.Integer(), message: t.String(), data: RegisterAnswer }),
          201: t.Object({ code: t.Integer(), message: t.String(), data: RegisterAnswer }),
        },
        detail: tag(
          'Register an agent (X-Agent-Token)',
          "Takes the shared agent token. 201 for a new agent, 200 when the agent_id was registered before (labels and functions are replaced, job counters kept); 409 when it was registered under another game_id (an agent keeps its game). The answer names the heartbeat interval (an agent missing heartbeats for `offline_after_s` counts as offline) and the agent's own key, `agent_key` (`lak_...`): sent as X-Agent-Token, it reaches only this agent's routes, and only while this registration lasts: registering again under the same game answers the same key; once the agent is deleted the key is 401, also after its agent_id is registered again.",
          {
            '200': { description: 'Registered again' },
            '201': { description: 'Registered' },
            '409': {
              description:
                'The agent_id is registered under another game, or `max_agents` (10,000) agents are registered and this one is new',
            },
            ...AGENT_AUTH,
          },
        ),
      },
    )
    .post(
      '/api/v1/agents/:id/heartbeat',
      async ({ params, body }) => {
        const a = await store.heartbeat(params.id, body)
        return ok({
          agent_id: a.agent_id,
          status: a.status,
          qps: a.qps,
          qps_1m: a.qps_1m,
          heartbeat_interval_s: d.heartbeatIntervalS(),
          limits: await d.limits(a),
        })
      },
      {
        agentToken: true,
        params: Params,
        transform: ({ body }) => rejectUnknown(Heartbeat, body, 'body'),
        body: Heartbeat,
        response: { 200: t.Object({ code: t.Integer(), message: t.String(), data: HeartbeatAnswer }) },
        detail: tag(
          'Heartbeat with current load (X-Agent-Token)',
          'qps is the current rate; qps_1m the last minute, smoothed by the platform from successive qps reports when the agent does not send it. The answer carries `limits`, the rate-limit rules the agent enforces from now on (as GET /api/v1/agents/{id}/limits). 404 for an agent that is not registered (it should register again).',
          { '200': { description: 'Heartbeat recorded' }, ...AGENT_AUTH },
        ),
      },
    )
    .post(
      '/api/v1/agents/:id/invocations',
      async ({ params, body, set }) => {
        const agent = await store.get(params.id)
        const r = await d.report(agent, body)
        set.status = 202
        return ok(r)
      },
      {
        agentToken: true,
        params: Params,
        transform: ({ body }) => rejectUnknown(InvocationReport, body, 'body'),
        body: InvocationReport,
        detail: tag(
          'Report function invocations (X-Agent-Token)',
          "Up to 1000 calls; each feeds the invocation analytics (`/api/v1/analytics/invocations`) under the agent's game_id and env, the agent's job counters and svc_agent_jobs_* metrics, and the `function.invoked` event.",
          { '202': { description: 'Accepted and stored' }, ...AGENT_AUTH },
        ),
      },
    )
    .get(
      '/api/v1/agents',
      async ({ query }) => {
        const { limit: asked, after, ...filter } = query
        let limit = AGENTS_PAGE_MAX
        if (asked !== undefined) {
          limit = Number(asked)
          if (!/^\d+$/.test(asked) || limit < 1 || limit > AGENTS_PAGE_MAX)
            throw invalidField(
              'query.limit',
              `must be an integer from 1 to ${AGENTS_PAGE_MAX}, got '${asked}'`,
            )
        }
        const items = await store.list({ ...filter, after, limit: limit + 1 })
        const more = items.length > limit
        if (more) items.length = limit
        return ok({
          items,
          total: await store.count(filter),
          ...(more ? { next_after: items[limit - 1].agent_id } : {}),
        })
      },
      {
        permission: 'agents:read',
        query: AgentListQuery,
        detail: tag(
          'List agents',
          `Filters by labels (game_id, env, region, zone), status (online, offline) and served function. By agent_id, at most limit (1-${AGENTS_PAGE_MAX}, ${AGENTS_PAGE_MAX} when absent) after the agent_id \`after\`: next_after (the last agent_id) is present when more follow, send it as after. total counts every agent the filters select, on all pages. 400 naming query.limit.`,
        ),
      },
    )
    .get(
      '/api/v1/agents/:id/limits',
      async ({ params }) => {
        const a = await store.get(params.id)
        return ok({ agent_id: a.agent_id, limits: await d.limits(a) })
      },
      {
        agentOr: 'agents:read',
        params: Params,
        response: { 200: t.Object({ code: t.Integer(), message: t.String(), data: AgentLimits }) },
        detail: tag(
          'The rate limits an agent enforces (X-Agent-Token, or who may read agents)',
          "The rules of the rate-limit sets that are on and bind this agent: its labels equal the rule's match, the key names the agent (agent_id, name or *) or, for a function rule, a function it serves, and its rollout bucket for the set (SHA-256 of `rateLimitId:agent_id`, first 4 bytes mod 100, stable) is below the rule's percent. Each heartbeat answers the same list. An agent key reaches only its own agent (403 otherwise); the shared agent token and users who may read agents reach every agent. 404 for an agent that is not registered.",
        ),
      },
    )
    .get('/api/v1/agents/:id', async ({ params }) => ok(await store.get(params.id)), {
      permission: 'agents:read',
      params: Params,
      detail: tag('Read one agent'),
    })
    .delete(
      '/api/v1/agents/:id',
      async ({ params, principal, request, server }) => {
        await store.remove(params.id)
        audit({ principal, request, server }, 'agents.delete', params.id)
        return ok(null, 'deleted')
      },
      {
        permission: 'agents:write',
        // The handler records agents.delete (core then records nothing); a refused attempt
        // (a viewer's 403) is recorded by core under the same action and target.
        audit: { action: 'agents.delete', target: '{id}' },
        params: Params,
        detail: tag('Unregister an agent', 'A running agent registers again on its next start.'),
      },
    )
}
