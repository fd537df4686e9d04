import { t } from 'elysia'
import { invalidField } from '../../core/http'
import { Secret, SecretValues } from '../../core/secrets'

/** `plugins.ingest` of the YAML. */
export const IngestConfig = t.Object(
  {
    /** Shared HMAC secret of the signed ingestion endpoints (env INGEST_SIGNING_SECRET); none at all answers 403. */
    signing_secret: Secret(t.String({ default: '' })),
    /** Per-game secrets, chosen by the `X-Game-Id` header. */
    game_secrets: SecretValues(t.Record(t.String(), t.String({ minLength: 1 }), { default: {} })),
    warehouse: t.Object(
      {
        /**
         * `embedded` (the main store), a SQLite path, a PostgreSQL URL, or `none` (env WAREHOUSE_DSN;
         * set but empty means `none`): with none, events are still stored but the warehouse answers 503.
         */
        dsn: t.String({ default: 'embedded' }),
      },
      { additionalProperties: false, default: {} },
    ),
    /** Allowed distance between X-Timestamp and the server clock. */
    max_skew_s: t.Integer({ minimum: 1, default: 300 }),
    /** A nonce seen within this window is a replay. */
    nonce_window_s: t.Integer({ minimum: 1, default: 900 }),
    /** Body limit of the signed endpoints (413 above). */
    max_body_mb: t.Number({ exclusiveMinimum: 0, default: 10 }),
    /** `/v1/batch` and `/v1/logs` limits (after gzip decoding). */
    batch_max_body_kb: t.Integer({ minimum: 1, default: 1024 }),
    batch_max_event_kb: t.Integer({ minimum: 1, default: 64 }),
    batch_max_events: t.Integer({ minimum: 1, default: 500 }),
    /** How often the retention purge runs (0: never; tests call it directly). */
    purge_interval_minutes: t.Integer({ minimum: 0, default: 60 }),
    /**
     * SQLite: when an ingest commit reaches the disk. `normal`: the WAL is synced at checkpoints,
     * so an answered commit survives the process dying, not a power loss. `full`: the WAL is
     * synced before every answer (on this machine ~15% fewer events/s and p99 55 ms instead of 33).
     */
    sqlite_synchronous: t.UnionEnum(['normal', 'full'], { default: 'normal' }),
  },
  { additionalProperties: false, default: {} },
)
export type IngestConfig = typeof IngestConfig.static

const GameEnv = {
  gameId: t.String({ minLength: 1 }),
  env: t.Optional(t.String({ minLength: 1 })),
}

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

export const OkOut = t.Object({ ok: t.Literal(true) })
export const BatchOut = t.Object({
  accepted: t.Array(t.String(), {
    description: 'event_id of every accepted event (sampled-out events count as accepted)',
  }),
  rejected: t.Array(t.Object({ event_id: t.String(), reason: t.String() })),
})
export const ServerIngestOut = t.Object({ ok: t.Literal(true), accepted: t.Integer() })
