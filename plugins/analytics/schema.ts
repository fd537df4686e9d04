import { t } from 'elysia'
import { invalidField } from '../../core/http'
import { RealtimeConfig } from './realtime/realtime'

/** `plugins.analytics` of the YAML. */
export const AnalyticsConfig = t.Object(
  {
    warehouse: t.Object(
      {
        /**
         * Where events and their rollups are kept and read (env WAREHOUSE_DSN; set but empty means
         * `none`): `embedded` (the main store), a SQLite path or a PostgreSQL URL; with `none`
         * events are still stored in the main store but the warehouse endpoints answer 503.
         */
        dsn: t.String({ default: 'embedded' }),
      },
      { additionalProperties: false, default: {} },
    ),
    /** The realtime stream (`/api/v1/analytics/realtime`): snapshot and ping cadence, history, client cap. */
    realtime: RealtimeConfig,
    /**
     * How long, in ms, an analytics read waits for the event log's consumers to take in what
     * was acknowledged before it (a game sees its own events); past it the read answers with
     * what is derived so far. Every answer says how complete it is in `X-As-Of`. 0: never wait.
     */
    read_wait_ms: t.Integer({ minimum: 0, maximum: 60_000, default: 2000 }),
    /**
     * How often, in ms, each instance re-reads what another instance sharing the store may have
     * changed when its change notice was lost on the way: the sampling filters, the games' time
     * zones the consumers bucket by.
     */
    sync_ms: t.Integer({ minimum: 100, default: 5000 }),
  },
  { additionalProperties: false, default: {} },
)
export type AnalyticsConfig = typeof AnalyticsConfig.static

/**
 * Numbers in queries are declared as strings and checked by `intParam`: Elysia's coerced
 * integers lose the field name in their validation error, and a 400 must name it.
 */
const Int = (description: string) => t.Optional(t.String({ pattern: '^-?[0-9]+$', description }))
const gameId = t.String({ minLength: 1 })
const env = t.String({ minLength: 1 })

export const DauQuery = t.Object({ gameId, env: t.Optional(env), days: Int('integer, default 14, 1..90') })
export const OnlineQuery = t.Object({
  gameId,
  env: t.Optional(env),
  minutes: Int('integer, default 60, 1..1440'),
})
// The invocation endpoints name both gameId and env (spec 1).
export const SummaryQuery = t.Object({ gameId, env, hours: Int('integer, default 24, 1..720') })
export const TrendQuery = t.Object({
  gameId,
  env,
  interval: t.Optional(
    t.Union([t.Literal('hour'), t.Literal('day')], { description: 'hour (default) or day' }),
  ),
  limit: Int('buckets back from now: default 24 hours or 14 days, 1..720'),
})
export const InvocationsQuery = t.Object({
  gameId,
  env,
  functionId: t.Optional(t.String({ minLength: 1 })),
  outcome: t.Optional(t.Union([t.Literal('success'), t.Literal('failure')])),
  page: Int('0-based, default 0'),
  pageSize: Int('default 20, 1..100'),
})

/** An integer query parameter within bounds; 400 naming `query.<name>` otherwise. */
export function intParam(
  value: string | undefined,
  name: string,
  min: number,
  max: number,
  fallback: number,
): number {
  if (value === undefined || value === '') return fallback
  const n = Number(value)
  if (!Number.isInteger(n) || n < min || n > max)
    throw invalidField(`query.${name}`, `must be an integer from ${min} to ${max}, got '${value}'`)
  return n
}

export const DauOut = t.Object({
  points: t.Array(
    t.Object({
      date: t.String(),
      gameId: t.String(),
      env: t.String(),
      dau: t.Integer(),
      newUsers: t.Integer(),
    }),
  ),
})
export const OnlineOut = t.Object({ points: t.Array(t.Object({ minute: t.String(), online: t.Integer() })) })
export const RevenueOut = t.Object({
  points: t.Array(
    t.Object({ date: t.String(), revenueCents: t.Integer(), refundsCents: t.Integer(), failed: t.Integer() }),
  ),
})
const FunctionStat = t.Object({
  functionId: t.String(),
  total: t.Integer(),
  failed: t.Integer(),
  avgDurationMs: t.Number(),
})
export const SummaryOut = t.Object({
  total: t.Integer(),
  failed: t.Integer(),
  successRate: t.Number({ minimum: 0, maximum: 1 }),
  avgDurationMs: t.Number(),
  p95DurationMs: t.Number(),
  topFunctions: t.Array(FunctionStat),
})
export const TrendOut = t.Object({
  points: t.Array(t.Object({ bucket: t.String(), total: t.Integer(), failed: t.Integer() })),
})
export const Invocation = t.Object({
  timestamp: t.String(),
  functionId: t.String(),
  actor: t.Union([t.String(), t.Null()]),
  outcome: t.String(),
  durationMs: t.Union([t.Number(), t.Null()]),
  traceId: t.Union([t.String(), t.Null()]),
})
export const InvocationsOut = t.Object({
  items: t.Array(Invocation),
  total: t.Integer(),
  page: t.Integer(),
  pageSize: t.Integer(),
})
export type Invocation = typeof Invocation.static

export const ServerIngestOut = t.Object({ ok: t.Literal(true), accepted: t.Integer() })
