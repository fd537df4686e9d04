import { t } from 'elysia'

/** `plugins.ingest` of the YAML. */
export const IngestConfig = t.Object(
  {
    /** Shared HMAC secret of the signed ingestion endpoints; empty falls back to env INGEST_SIGNING_SECRET, and none at all answers 403. */
    signing_secret: t.String({ default: '' }),
    /** Per-game secrets, chosen by the `X-Game-Id` header. */
    game_secrets: t.Record(t.String(), t.String({ minLength: 1 }), { default: {} }),
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
  },
  { additionalProperties: false, default: {} },
)
export type IngestConfig = typeof IngestConfig.static

const GameEnv = {
  gameId: t.String({ minLength: 1 }),
  env: t.Optional(t.String({ minLength: 1 })),
}

export const DauQuery = t.Object({ ...GameEnv, days: t.Integer({ minimum: 1, maximum: 90, default: 14 }) })
export const OnlineQuery = t.Object({ ...GameEnv, minutes: t.Integer({ minimum: 1, maximum: 1440, default: 60 }) })
export const SummaryQuery = t.Object({ ...GameEnv, hours: t.Integer({ minimum: 1, maximum: 720, default: 24 }) })
export const TrendQuery = t.Object({
  ...GameEnv,
  interval: t.Union([t.Literal('hour'), t.Literal('day')], { default: 'hour' }),
  /** Hours (interval hour, default 24) or days (interval day, default 14) back from now. */
  limit: t.Optional(t.Integer({ minimum: 1, maximum: 720 })),
})
export const InvocationsQuery = t.Object({
  ...GameEnv,
  functionId: t.Optional(t.String({ minLength: 1 })),
  outcome: t.Optional(t.Union([t.Literal('success'), t.Literal('failure')])),
  page: t.Integer({ minimum: 0, default: 0 }),
  pageSize: t.Integer({ minimum: 1, maximum: 100, default: 20 }),
})

export const DauOut = t.Object({
  points: t.Array(t.Object({ date: t.String(), gameId: t.String(), env: t.String(), dau: t.Integer(), newUsers: t.Integer() })),
})
export const OnlineOut = t.Object({ points: t.Array(t.Object({ minute: t.String(), online: t.Integer() })) })
export const RevenueOut = t.Object({
  points: t.Array(t.Object({ date: t.String(), revenueCents: t.Integer(), refundsCents: t.Integer(), failed: t.Integer() })),
})
const FunctionStat = t.Object({ functionId: t.String(), total: t.Integer(), failed: t.Integer(), avgDurationMs: t.Number() })
export const SummaryOut = t.Object({
  total: t.Integer(),
  failed: t.Integer(),
  successRate: t.Number({ minimum: 0, maximum: 1 }),
  avgDurationMs: t.Number(),
  p95DurationMs: t.Number(),
  topFunctions: t.Array(FunctionStat),
})
export const TrendOut = t.Object({ points: t.Array(t.Object({ bucket: t.String(), total: t.Integer(), failed: t.Integer() })) })
export const Invocation = t.Object({
  timestamp: t.String(),
  functionId: t.String(),
  actor: t.Union([t.String(), t.Null()]),
  outcome: t.String(),
  durationMs: t.Union([t.Number(), t.Null()]),
  traceId: t.Union([t.String(), t.Null()]),
})
export const InvocationsOut = t.Object({ items: t.Array(Invocation), total: t.Integer(), page: t.Integer(), pageSize: t.Integer() })
export type Invocation = typeof Invocation.static

export const OkOut = t.Object({ ok: t.Literal(true) })
export const BatchOut = t.Object({
  accepted: t.Array(t.String(), { description: 'event_id of every accepted event (sampled-out events count as accepted)' }),
  rejected: t.Array(t.Object({ event_id: t.String(), reason: t.String() })),
})
export const ServerIngestOut = t.Object({ ok: t.Literal(true), accepted: t.Integer() })
