import { t } from 'elysia'
import { Secret, SecretValues } from '../../core/secrets'

/** `plugins.ingest` of the YAML. */
export const IngestConfig = t.Object(
  {
    /** Shared HMAC secret of the signed ingestion endpoints (env INGEST_SIGNING_SECRET); none at all answers 403. */
    signing_secret: Secret(t.String({ default: '' })),
    /**
     * No signing_secret (and no game_secrets): generate one on first start into data_dir
     * (`ingest-signing-secret`, 0600), readable by admins and developers at GET /api/v1/ingest/secret.
     * false: ingestion answers 403 ingest_disabled until a secret is configured.
     */
    generate_secret: t.Boolean({ default: true }),
    /** Per-game secrets, chosen by the `X-Game-Id` header. */
    game_secrets: SecretValues(t.Record(t.String(), t.String({ minLength: 1 }), { default: {} })),
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
    /**
     * The oldest event time taken, in days before the receive time: an older `ts` (`ts_client`,
     * an OTLP time) is refused per event naming the field. Longer than the longest retention
     * (recommended production 365), so late sends from offline play still count; each day named
     * becomes rollup rows that no purge reaches, and a 1970 event made its user's first day 1970.
     */
    max_event_age_days: t.Integer({ minimum: 1, default: 400 }),
    /**
     * The latest event time taken, in seconds after the receive time (device clocks run ahead):
     * a later one is refused per event naming the field (a future day escapes every purge).
     */
    max_event_future_s: t.Integer({ minimum: 0, default: 86_400 }),
    /**
     * Events carrying an `event_id` are stored once per game and environment within this many days
     * by receive time (their ids are purged after it, with the retention purge).
     */
    dedup_window_days: t.Integer({ minimum: 1, default: 7 }),
    /** How often the retention purge runs (0: never; tests call it directly). */
    purge_interval_minutes: t.Integer({ minimum: 0, default: 60 }),
    /**
     * SQLite: when an ingest commit reaches the disk. `normal`: the WAL is synced at checkpoints,
     * so an answered commit survives the process dying, not a power loss. `full`: the WAL is
     * synced before every answer, for every write of the store's one writer (on this machine
     * ~15% fewer events/s when measured with the former persist thread).
     */
    sqlite_synchronous: t.UnionEnum(['normal', 'full'], { default: 'normal' }),
    /** OTLP receivers besides `/v1/logs` and `/v1/traces` (plugins/ingest/otlp). */
    otlp: t.Object(
      {
        /** OTLP/gRPC LogsService and TraceService, off unless enabled; `/v1/batch`'s limits and credentials. */
        grpc: t.Object(
          {
            enabled: t.Boolean({ default: false }),
            /** 4317 is OTLP/gRPC's registered port; 0 picks a free one (logged). */
            port: t.Integer({ minimum: 0, maximum: 65535, default: 4317 }),
            /** Unset: the HTTP server's (`server.host`, env HOST), so the port is no more exposed than the API. */
            host: t.Optional(t.String({ minLength: 1 })),
            /** A call whose request message has not fully arrived this long after it began is ended (DEADLINE_EXCEEDED). */
            read_timeout_ms: t.Integer({ minimum: 100, maximum: 600_000, default: 30_000 }),
          },
          { additionalProperties: false, default: {} },
        ),
      },
      { additionalProperties: false, default: {} },
    ),
  },
  { additionalProperties: false, default: {} },
)
export type IngestConfig = typeof IngestConfig.static

export const OkOut = t.Object({ ok: t.Literal(true) })
export const BatchOut = t.Object({
  accepted: t.Array(t.String(), {
    description: 'event_id of every accepted event (sampled-out events count as accepted)',
  }),
  rejected: t.Array(t.Object({ event_id: t.String(), reason: t.String() })),
})
