import { type Static, Type as T, type TLiteral, type TUnion } from '@sinclair/typebox'

const UnionEnum = <const V extends readonly string[]>(values: V, opts: Record<string, unknown> = {}) =>
  T.Union(
    values.map((v) => T.Literal(v)),
    opts,
  ) as unknown as TUnion<TLiteral<V[number]>[]>

const fields = {
  name: T.String({ minLength: 1, maxLength: 200 }),
  metric: T.String({
    pattern: '^svc_[a-zA-Z0-9_]+$',
    maxLength: 128,
    description: 'a svc_ gauge or counter',
  }),
  labels: T.Record(T.String({ pattern: '^[a-zA-Z_][a-zA-Z0-9_]{0,63}$' }), T.String({ maxLength: 256 }), {
    maxProperties: 16,
    description:
      'series of a labelled metric whose labels all equal these (at most 16); {} or absent: every series',
  }),
  operator: UnionEnum(['gt', 'gte', 'lt', 'lte'] as const),
  threshold: T.Number(),
  forCount: T.Integer({
    minimum: 1,
    maximum: 1000,
    description: 'consecutive evaluations the condition must hold; 1 when absent',
  }),
  cooldownSeconds: T.Integer({
    minimum: 0,
    maximum: 2_592_000,
    description:
      'no repeat of a series within this; at least eval_interval_s (400 below it); 300 when absent (or eval_interval_s when longer)',
  }),
  level: UnionEnum(['info', 'warning', 'error', 'critical'] as const),
  enabled: T.Boolean({ description: 'true when absent' }),
}

export const RuleCreate = T.Object(
  {
    ...fields,
    labels: T.Optional(fields.labels),
    forCount: T.Optional(fields.forCount),
    cooldownSeconds: T.Optional(fields.cooldownSeconds),
    enabled: T.Optional(fields.enabled),
  },
  { additionalProperties: false },
)
export type RuleCreate = Static<typeof RuleCreate>

export const RuleUpdate = T.Partial(T.Object(fields, { additionalProperties: false }), {
  additionalProperties: false,
})
export type RuleUpdate = Static<typeof RuleUpdate>

export interface Rule {
  id: string
  name: string
  metric: string
  labels: Record<string, string>
  operator: 'gt' | 'gte' | 'lt' | 'lte'
  threshold: number
  forCount: number
  cooldownSeconds: number
  level: 'info' | 'warning' | 'error' | 'critical'
  enabled: boolean
  createdAt: string
  updatedAt: string
}
