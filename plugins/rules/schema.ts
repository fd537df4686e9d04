import type { Static, TLiteral, TUnion } from '@sinclair/typebox'
import { t } from 'elysia'
import { invalidField } from '../../core/http'
import { Secret } from '../../core/secrets'

const Strict = { additionalProperties: false } as const

/** A union of literals; Elysia 1.4 fills an absent optional `t.UnionEnum` with its first member, this does not. */
function oneOf<const L extends readonly string[]>(values: L) {
  return t.Union(values.map((v) => t.Literal(v))) as unknown as TUnion<TLiteral<L[number]>[]>
}

export const ID_PATTERN = '^[a-zA-Z0-9][a-zA-Z0-9._-]{0,63}$'
export const MODES = ['active', 'shadow', 'off'] as const
export const ACTIONS = ['route', 'allow', 'suppress'] as const

/** `90s`, `5m`, `1h30m`, `250ms`: Prometheus-style durations. */
const Duration = t.String({ pattern: '^(\\d+h)?(\\d+m)?(\\d+s)?(\\d+ms)?$', minLength: 2, maxLength: 20 })

export function durationMs(value: string): number {
  const m = /^(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?(?:(\d+)ms)?$/.exec(value)
  if (!m) return Number.NaN
  return ((+(m[1] ?? 0) * 60 + +(m[2] ?? 0)) * 60 + +(m[3] ?? 0)) * 1000 + +(m[4] ?? 0)
}

/** Reads a duration field, checking its range; the error names the field. */
export function duration(value: string | undefined, field: string, fallback: number, max: number): number {
  if (value === undefined) return fallback
  const ms = durationMs(value)
  if (!(ms > 0) || ms > max)
    throw invalidField(field, `must be a duration above 0 and at most ${max / 1000}s`)
  return ms
}

const Channels = t.Array(t.String({ minLength: 1, maxLength: 200 }), { minItems: 1, maxItems: 50 })

export const RouteStep = t.Object(
  {
    /** Optional condition of this step (same language as the rule's match); the first step that holds routes. */
    match: t.Optional(t.String({ maxLength: 2048 })),
    /** Channel names or `group:<id>`. */
    channels: Channels,
  },
  Strict,
)

export const RuleBody = t.Object(
  {
    /** Generated when omitted on create; the URL wins on update. */
    id: t.Optional(t.String({ pattern: ID_PATTERN })),
    match: t.String({ maxLength: 4096 }),
    /** Omitted: shadow (observe only). */
    mode: t.Optional(oneOf(MODES)),
    /** Omitted: route. */
    action: t.Optional(oneOf(ACTIONS)),
    /** Higher first; equal priorities keep the order the rules were created in. */
    priority: t.Optional(t.Integer({ minimum: -1_000_000, maximum: 1_000_000 })),
    route: t.Optional(t.Array(RouteStep, { maxItems: 20 })),
    silence: t.Optional(t.Object({ roster: t.String({ pattern: ID_PATTERN }) }, Strict)),
    /** How long the match must keep holding (for the same params.alert_id, else type) before it fires; at most 24h. */
    for: t.Optional(Duration),
    /** params names whose values key a group: events of one group within group_interval fold into one summary. */
    group_by: t.Optional(
      t.Array(t.String({ pattern: '^(params\\.)?[A-Za-z_][A-Za-z0-9_-]{0,63}$' }), {
        minItems: 1,
        maxItems: 8,
      }),
    ),
    /** Default 5m; only with group_by. */
    group_interval: t.Optional(Duration),
    /** Held while a notification matching `source` with equal values of the `equal` params was seen within ttl (30m). */
    inhibit: t.Optional(
      t.Object(
        {
          source: t.String({ minLength: 1, maxLength: 2048 }),
          equal: t.Optional(
            t.Array(t.String({ pattern: '^(params\\.)?[A-Za-z_][A-Za-z0-9_-]{0,63}$' }), { maxItems: 8 }),
          ),
          ttl: t.Optional(Duration),
        },
        Strict,
      ),
    ),
    /** Unacknowledged after ack_timeout (5m), the alert (params.alert_id) is sent to `to`. */
    escalation: t.Optional(t.Object({ ack_timeout: t.Optional(Duration), to: Channels }, Strict)),
  },
  Strict,
)
export type RuleBody = Static<typeof RuleBody>

export const GroupMember = t.Object(
  {
    channel: t.String({ minLength: 1, maxLength: 200 }),
    /** Omitted: every recipient of the channel. */
    recipients: t.Optional(t.Array(t.String({ minLength: 1, maxLength: 500 }), { maxItems: 500 })),
  },
  Strict,
)

export const GroupBody = t.Object(
  {
    id: t.Optional(t.String({ pattern: ID_PATTERN })),
    description: t.Optional(t.String({ maxLength: 2000 })),
    members: t.Array(GroupMember, { maxItems: 200 }),
  },
  Strict,
)
export type GroupBody = Static<typeof GroupBody>

export const AckBody = t.Object({ acked_by: t.Optional(t.String({ maxLength: 200 })) }, Strict)

/** Strings, checked in the route, so each error names its query parameter. */
export const IncidentsQuery = t.Object({
  status: t.Optional(t.String()),
  rule_id: t.Optional(t.String()),
  alert_id: t.Optional(t.String()),
  limit: t.Optional(t.String()),
})

export const RulesConfig = t.Object(
  {
    /** Each part can be switched off; its routes then answer 503 as spec 2 describes. */
    engine: t.Boolean({ default: true }),
    groups: t.Boolean({ default: true }),
    acks: t.Boolean({ default: true }),
    incidents: t.Boolean({ default: true }),
    /** How often changes made by other instances on the same store are picked up, and due escalations fired. */
    sync_ms: t.Integer({ minimum: 10, default: 1000 }),
    chatcard: t.Object(
      {
        /** The card callback encryption key; empty: encrypted callbacks answer 501. */
        encrypt_key: Secret(t.String({ default: '' })),
        /** When set, plaintext callbacks must carry this `token`. */
        verification_token: t.String({ default: '' }),
        /**
         * With `encrypt_key` set, a callback that acts must carry X-Lark-Signature (a signature that
         * is sent is verified either way). Off only for a Lark that signs nothing (docs/security.md).
         */
        require_signature: t.Boolean({ default: true }),
      },
      { ...Strict, default: {} },
    ),
  },
  { ...Strict, default: {} },
)
export type RulesConfig = Static<typeof RulesConfig>
