import { type TLiteral, type TUnion, Type as t } from '@sinclair/typebox'

// TypeBox's own types, not Elysia's `t`: Elysia's Integer and Number also take numeric strings,
// and a body of the wrong JSON type is refused, never coerced.
const UnionEnum = <const V extends readonly string[]>(values: V, opts: Record<string, unknown> = {}) =>
  t.Union(
    values.map((v) => t.Literal(v)),
    opts,
  ) as unknown as TUnion<TLiteral<V[number]>[]>

const Id = t.String({ pattern: '^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$' })
/** As an agent's own labels (128 characters): a longer one matches no agent and only costs each heartbeat. */
const Label = t.String({ minLength: 1, maxLength: 128 })

export const Rule = t.Object(
  {
    scope: UnionEnum(['function', 'service'] as const, {
      description: 'function: bound to one function id; service: to agents (service instances)',
    }),
    key: t.String({
      minLength: 1,
      maxLength: 128,
      description: "function id, or instance name (agent_id); '*' for every agent the match selects",
    }),
    limitQps: t.Number({ exclusiveMinimum: 0 }),
    match: t.Object(
      {
        game_id: t.Optional(Label),
        env: t.Optional(Label),
        region: t.Optional(Label),
        zone: t.Optional(Label),
      },
      {
        additionalProperties: false,
        description:
          'agent labels that must all be equal (game_id, env, region, zone); {} matches every agent',
      },
    ),
    percent: t.Integer({ minimum: 1, maximum: 100, description: 'rollout share: 30 binds 30% of traffic' }),
  },
  { additionalProperties: false },
)
export type Rule = typeof Rule.static

const fields = {
  rateLimitId: Id,
  name: t.String({ minLength: 1, maxLength: 200 }),
  resource: UnionEnum(['function', 'api', 'user'] as const),
  limit: t.Integer({ minimum: 1, description: 'requests per window' }),
  window: t.Integer({ minimum: 1, maximum: 86_400, description: 'window in seconds' }),
  action: UnionEnum(['reject', 'throttle'] as const, {
    description: 'reject refuses over the limit; throttle slows down',
  }),
  rules: t.Array(Rule, { maxItems: 200 }),
  status: t.Optional(UnionEnum(['on', 'off'] as const, { description: 'the on/off switch; on when absent' })),
}
export const RateLimitSet = t.Object(fields, { additionalProperties: false })
export type RateLimitSet = typeof RateLimitSet.static

/** A preview may describe a rule set not stored yet: its id is optional. */
export const PreviewBody = t.Object(
  { ...fields, rateLimitId: t.Optional(Id) },
  { additionalProperties: false },
)
export type PreviewBody = typeof PreviewBody.static

export const StoredSet = t.Object({
  ...fields,
  status: UnionEnum(['on', 'off'] as const),
  createdAt: t.String(),
  updatedAt: t.String(),
})
export type StoredSet = typeof StoredSet.static
