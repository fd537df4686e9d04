import { type TLiteral, type TUnion, Type as t } from '@sinclair/typebox'
import { TS_MAX } from '../../core/event-bounds'

// TypeBox's own types, not Elysia's `t`: Elysia's Integer and Number also take numeric strings,
// and a body of the wrong JSON type is refused, never coerced.
const UnionEnum = <const V extends readonly string[]>(values: V, opts: Record<string, unknown> = {}) =>
  t.Union(
    values.map((v) => t.Literal(v)),
    opts,
  ) as unknown as TUnion<TLiteral<V[number]>[]>

/**
 * The largest rate an agent may report. JSON has no Infinity, but 1e308 is a number: smoothed
 * (times 1000 to round) it became Infinity, which no answer can carry, so the agent could never
 * heartbeat again. A billion calls a second is past any single agent.
 */
export const QPS_MAX = 1e9
const Qps = (description?: string) =>
  t.Number({ minimum: 0, maximum: QPS_MAX, ...(description ? { description } : {}) })
/** 2^31 - 1 ms (about 24.8 days): longer than any call, and an int column on every engine. */
export const DURATION_MAX_MS = 2_147_483_647

export const AgentId = t.String({
  pattern: '^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$',
  description: 'Chosen by the agent (host name, pod name); re-registering with it updates the entry',
})
export const FunctionId = t.String({ pattern: '^[A-Za-z0-9][A-Za-z0-9._:/-]{0,127}$' })
const Label = t.String({ minLength: 1, maxLength: 128 })

export const Register = t.Object(
  {
    agent_id: AgentId,
    name: t.Optional(t.String({ minLength: 1, maxLength: 200 })),
    game_id: Label,
    env: Label,
    region: t.Optional(Label),
    zone: t.Optional(Label),
    version: t.Optional(t.String({ maxLength: 64 })),
    functions: t.Array(FunctionId, {
      maxItems: 1000,
      uniqueItems: true,
      description: 'Function ids the agent serves',
    }),
    qps: t.Optional(Qps()),
  },
  { additionalProperties: false },
)
export type Register = typeof Register.static

export const Heartbeat = t.Object(
  {
    qps: t.Optional(Qps('Current requests per second')),
    qps_1m: t.Optional(
      Qps('Mean of the last minute; when absent the platform smooths the reported qps over 60 s'),
    ),
    functions: t.Optional(
      t.Array(FunctionId, { maxItems: 1000, uniqueItems: true, description: 'Replaces the registered list' }),
    ),
  },
  { additionalProperties: false },
)
export type Heartbeat = typeof Heartbeat.static

export const Invocation = t.Object(
  {
    function_id: FunctionId,
    // Bounded so every ts is a Date: one past 9999 made the invocation analytics answer 500.
    ts: t.Optional(
      t.Integer({
        minimum: 0,
        maximum: TS_MAX,
        description:
          "Epoch ms of the call, within the ingest plugin's event window (max_event_age_days, max_event_future_s: 400 days back, 1 day ahead by default; 400 naming it otherwise) and at most 9999-12-31T23:59:59.999Z; the report time when absent",
      }),
    ),
    duration_ms: t.Optional(t.Number({ minimum: 0, maximum: DURATION_MAX_MS })),
    outcome: UnionEnum(['success', 'failure', 'error', 'timeout'] as const, {
      description: 'Anything but success counts as a failed call',
    }),
    trace_id: t.Optional(t.String({ maxLength: 128 })),
    actor: t.Optional(t.String({ maxLength: 200 })),
  },
  { additionalProperties: false },
)
export const InvocationReport = t.Object(
  { invocations: t.Array(Invocation, { minItems: 1, maxItems: 1000 }) },
  { additionalProperties: false },
)
export type InvocationReport = typeof InvocationReport.static

export const Agent = t.Object({
  agent_id: t.String(),
  name: t.String(),
  game_id: t.String(),
  env: t.String(),
  region: t.Optional(t.String()),
  zone: t.Optional(t.String()),
  version: t.Optional(t.String()),
  functions: t.Array(t.String()),
  qps: t.Number(),
  qps_1m: t.Number(),
  status: UnionEnum(['online', 'offline'] as const),
  jobs_executed: t.Number(),
  jobs_failed: t.Number(),
  registered_at: t.String(),
  last_heartbeat_at: t.String(),
})
export type Agent = typeof Agent.static

export const AgentQuery = t.Object(
  {
    game_id: t.Optional(t.String()),
    env: t.Optional(t.String()),
    region: t.Optional(t.String()),
    zone: t.Optional(t.String()),
    status: t.Optional(UnionEnum(['online', 'offline'] as const)),
    function_id: t.Optional(t.String({ description: 'Agents serving this function' })),
  },
  { additionalProperties: false },
)
export type AgentQuery = typeof AgentQuery.static

/** GET /api/v1/agents: the filters and a page (limit is checked by the route, 400 naming query.limit). */
export const AgentListQuery = t.Object(
  {
    ...AgentQuery.properties,
    limit: t.Optional(t.String({ description: 'at most this many agents, 1-500; 500 when absent' })),
    after: t.Optional(
      t.String({ maxLength: 200, description: 'the agent_id listed last on the page before' }),
    ),
  },
  { additionalProperties: false },
)

export const EffectiveLimit = t.Object(
  {
    rateLimitId: t.String({ description: 'the rule set' }),
    name: t.String(),
    resource: t.String({ description: 'function, api or user (the set)' }),
    action: t.String({ description: 'reject refuses calls over the limit; throttle delays them' }),
    limit: t.Integer({ description: "the set's requests per window" }),
    window: t.Integer({ description: "the set's window in seconds" }),
    scope: t.String({
      description: 'function: calls of the function `key`; service: every call the agent serves',
    }),
    key: t.String({ description: 'the function id, the agent (agent_id or name) or *' }),
    limitQps: t.Number({ description: 'calls per second this agent allows in the scope' }),
    percent: t.Integer({ description: "the rule's rollout share" }),
    bucket: t.Integer({
      description:
        "this agent's rollout bucket for the set, 0-99 (stable): the rule binds the agent while bucket < percent",
    }),
  },
  { additionalProperties: false },
)
export type EffectiveLimit = typeof EffectiveLimit.static

export const AgentLimits = t.Object({
  agent_id: t.String(),
  limits: t.Array(EffectiveLimit, {
    description:
      'The rules of the enabled rule sets that bind this agent: labels match, key names it (or a function it serves), and its bucket is inside the percent',
  }),
})

export const RegisterAnswer = t.Object({
  ...Agent.properties,
  status: t.String({ description: 'online or offline' }),
  heartbeat_interval_s: t.Integer({ description: 'send a heartbeat at least this often (seconds)' }),
  agent_key: t.String({
    description:
      "this agent's own credential (`lak_...`) for X-Agent-Token: it reaches only this agent's heartbeat, invocations and limits",
  }),
})

export const HeartbeatAnswer = t.Object({
  agent_id: t.String(),
  status: t.String({ description: 'online or offline' }),
  qps: t.Number(),
  qps_1m: t.Number(),
  heartbeat_interval_s: t.Integer({ description: 'send the next heartbeat within this many seconds' }),
  limits: AgentLimits.properties.limits,
})

/** Computes an agent's effective limits (the rate-limits plugin registers it). */
export type LimitsSource = (agent: Agent) => Promise<EffectiveLimit[]>

/**
 * What other plugins read (the rate-limit preview): the agents whose labels match. And the
 * extension point the rate-limits plugin registers into: the limits each agent's heartbeat
 * carries (none while no plugin registers a source).
 */
export interface AgentsService {
  list(q?: AgentQuery): Promise<Agent[]>
  limitsFrom(source: LimitsSource): void
}

declare module '../../core/plugin' {
  interface Services {
    agents: AgentsService
  }
}
