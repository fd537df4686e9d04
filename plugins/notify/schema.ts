import type { Static, TLiteral, TSchema, TUnion } from '@sinclair/typebox'
import { t } from 'elysia'
import type { OpenAPIV3 } from 'openapi-types'
import { invalidField } from '../../core/http'
import { Secret } from '../../core/secrets'
import { ReadOnly } from '../../core/strict'

export const LEVELS = ['debug', 'info', 'warning', 'error', 'critical'] as const
export const STATUSES = ['success', 'failed', 'pending', 'shadow'] as const

const Strict = { additionalProperties: false } as const

/** A union of literals; Elysia 1.4 fills an absent optional `t.UnionEnum` with its first member, this does not. */
function oneOf<const L extends readonly string[]>(values: L) {
  return t.Union(values.map((v) => t.Literal(v))) as unknown as TUnion<TLiteral<L[number]>[]>
}

/**
 * One channel under `plugins.notify.channels.<name>`: `type` names a provider type registered by
 * a provider plugin (webhook, smtp) or the built-in `log`; `module` loads a third-party provider
 * file first. Every other key is the provider's own settings, checked against its schema.
 */
export const ChannelConfig = t.Object(
  {
    type: t.String({ minLength: 1 }),
    /** Path of a file whose default export is a `defineProvider(...)`; relative paths resolve from the working directory. */
    module: t.Optional(t.String({ minLength: 1 })),
    /** Starts disabled (enable with POST /providers/{name}/enable). */
    enabled: t.Optional(t.Boolean()),
  },
  { additionalProperties: true },
)
export type ChannelConfig = Static<typeof ChannelConfig>

/** A static route: a notification without named channels goes to every route whose type and level match. */
export const Route = t.Object(
  {
    /** Exact type, or a prefix ending in `*`; omitted matches every type. */
    type: t.Optional(t.String({ minLength: 1 })),
    /** Levels this route takes; omitted takes every level. */
    levels: t.Optional(t.Array(oneOf(LEVELS))),
    channels: t.Array(t.String({ minLength: 1 }), { minItems: 1 }),
  },
  Strict,
)
export type Route = Static<typeof Route>

export const NotifyConfig = t.Object(
  {
    auth: t.Object(
      {
        /** Spec 2 `auth.enabled`: off opens the notification routes to anonymous callers (application tokens still checked). */
        enabled: t.Boolean({ default: true }),
      },
      { ...Strict, default: {} },
    ),
    channels: t.Record(t.String(), ChannelConfig, { default: {} }),
    /**
     * Environment variables a channel's settings may name as `$VAR` when they arrive through
     * `PUT /config/{name}` (spec 2 expands top-level `$VAR` values of a webhook's settings). Empty
     * by default: the server's own secrets (JWT_SECRET, ADMIN_PASSWORD, ...) can never be sent,
     * shown or echoed through the API. Channels written in this YAML may name any variable.
     */
    api_env: t.Array(t.String({ pattern: '^[A-Za-z_][A-Za-z0-9_]*$' }), { default: [] }),
    routes: t.Array(Route, { default: [] }),
    /** `user:<name>` audience entries: the channels and recipients of each person. */
    users: t.Record(t.String(), t.Record(t.String(), t.Array(t.String())), { default: {} }),
    queue: t.Object(
      {
        /** Stable identity of this instance's claims; empty: generated once into data_dir. */
        instance_id: t.String({ default: '' }),
        /** How often the dispatcher looks for due retries and other instances' released work. */
        poll_ms: t.Integer({ minimum: 10, default: 500 }),
        /**
         * A claim not renewed for this long is abandoned (its instance died) and delivered again:
         * a killed instance's deliveries go out again within this plus `poll_ms`. A live instance
         * renews its claims every third of it, so a slow send is taken twice only when its
         * instance could not reach the store for a whole lease.
         */
        lease_ms: t.Integer({ minimum: 1000, default: 3000 }),
        /** How often channel changes made by other instances sharing the store are picked up. */
        sync_ms: t.Integer({ minimum: 100, default: 5000 }),
        /** Largest number of deliveries claimed at once per channel. */
        batch: t.Integer({ minimum: 1, maximum: 1000, default: 200 }),
      },
      { ...Strict, default: {} },
    ),
    retry: t.Object(
      {
        max_attempts: t.Integer({ minimum: 1, maximum: 50, default: 5 }),
        base_ms: t.Integer({ minimum: 0, default: 1000 }),
        max_ms: t.Integer({ minimum: 0, default: 300_000 }),
      },
      { ...Strict, default: {} },
    ),
    workers: t.Object(
      {
        /** Deliver from this process; off leaves every delivery to remote workers. */
        local: t.Boolean({ default: true }),
        /** Concurrent sends per channel in the local pool. */
        concurrency: t.Integer({ minimum: 1, maximum: 1024, default: 32 }),
        remote: t.Object(
          {
            enabled: t.Boolean({ default: false }),
            /**
             * What a remote worker sends in its `Authorization: Bearer` header, never the URL (env
             * NOTIFY_WORKER_TOKEN), at least 16 characters. Deliveries carry the channels' secrets
             * unmasked, which no user or application token may read, so only a holder of the
             * configuration connects; empty refuses every worker with 403.
             */
            token: Secret(t.String({ default: '' })),
            /** Remote workers connect here by WebSocket (`/api/v1/workers/connect`); 0 picks a free port. */
            host: t.String({ default: '127.0.0.1' }),
            port: t.Integer({ minimum: 0, maximum: 65535, default: 8091 }),
            heartbeat_s: t.Number({ minimum: 0.05, default: 10 }),
            /** Missed heartbeats before a worker counts as offline. */
            missed_heartbeats: t.Integer({ minimum: 1, default: 3 }),
            /** A delivery handed to a worker that answers within this time counts as a retryable failure. */
            result_timeout_ms: t.Integer({ minimum: 100, default: 60_000 }),
          },
          { ...Strict, default: {} },
        ),
      },
      { ...Strict, default: {} },
    ),
    /** Idempotency records kept in the database, shared by every instance and kept across restarts (spec 2: about 1000, FIFO). */
    idempotency_entries: t.Integer({ minimum: 1, default: 1000 }),
    /**
     * Finished deliveries (the delivery log, with their attempts) and notifications older than this
     * many days are deleted, daily; 0 keeps them forever. Pending deliveries stay whatever their age.
     */
    retention_days: t.Integer({ minimum: 0, default: 90 }),
  },
  { ...Strict, default: {} },
)
export type NotifyConfig = Static<typeof NotifyConfig>

export const Level = oneOf(LEVELS)

/**
 * The most a notification's title and body may hold, given directly or rendered from a template
 * (templates.ts `render`): a template's placeholders repeat their params, and without a bound a
 * 30 KB template and a 100 KB param made a 500 MB body.
 */
export const MAX_TITLE = 10_000
export const MAX_BODY = 500_000

/**
 * Recipients a request may name for one channel, and that one delivery may carry once groups,
 * people and the request's own are merged (past it the channel fails, nothing sent). A trigger
 * token's 40,000 addresses went to one SMTP send, whose address handling grows with the square of
 * the list: 20 s of the event loop, and the operator's mail account a relay.
 */
export const MAX_RECIPIENTS = 500
export const MAX_DELIVERY_RECIPIENTS = 1_000

/**
 * The most a notification's `params` and `data` may hold together as JSON (bytes), and the most
 * names each may have; the same for a template's `sample_params`. Every delivery row keeps them,
 * and so does the in-app message every role reads: a trigger token's 9 MB params had added 80 MB
 * to the store per request and made a viewer's inbox page 108 MB, and 900,000 names held the event
 * loop 5.8 s.
 */
export const MAX_PARAMS_BYTES = 65_536
export const MAX_PARAMS_KEYS = 1_000
const Params = () => t.Record(t.String(), t.Unknown(), { maxProperties: MAX_PARAMS_KEYS })

/**
 * 400 naming the larger of `fields` (`body.params`, `body.data`) when together they pass
 * MAX_PARAMS_BYTES as JSON. Checked before anything is rendered, stored or sent.
 */
export function checkParamsSize(fields: Record<string, unknown>): void {
  let total = 0
  let largest = { name: '', bytes: -1 }
  for (const [name, v] of Object.entries(fields)) {
    if (v === undefined) continue
    const bytes = Buffer.byteLength(JSON.stringify(v))
    total += bytes
    if (bytes > largest.bytes) largest = { name, bytes }
  }
  if (total > MAX_PARAMS_BYTES)
    throw invalidField(
      `body.${largest.name}`,
      `${Object.keys(fields).join(' and ')} take ${total.toLocaleString('en-US')} bytes as JSON, more than ${MAX_PARAMS_BYTES.toLocaleString('en-US')}`,
    )
}

export const NotifyBody = t.Object(
  {
    type: t.String({ minLength: 1, maxLength: 200 }),
    level: t.Optional(Level),
    channels: t.Optional(t.Array(t.String({ minLength: 1 }), { maxItems: 100 })),
    channel: t.Optional(t.String({ minLength: 1 })),
    audience: t.Optional(t.Array(t.String({ minLength: 1 }), { maxItems: 100 })),
    recipients: t.Optional(
      t.Record(t.String(), t.Array(t.String({ maxLength: 320 }), { maxItems: MAX_RECIPIENTS }), {
        maxProperties: 100,
      }),
    ),
    template: t.Optional(t.String({ minLength: 1 })),
    params: t.Optional(Params()),
    data: t.Optional(Params()),
    idempotency_key: t.Optional(t.String({ minLength: 1, maxLength: 256 })),
    title: t.Optional(t.String({ maxLength: MAX_TITLE })),
    body: t.Optional(t.String({ maxLength: MAX_BODY })),
  },
  { additionalProperties: true },
)
export type NotifyBody = Static<typeof NotifyBody>

export const TemplateField = t.Object(
  { label: t.String({ maxLength: 1_000 }), value: t.String({ maxLength: MAX_TITLE }) },
  Strict,
)

export const TemplateBody = t.Object(
  {
    id: t.Optional(t.String({ pattern: '^[a-zA-Z0-9][a-zA-Z0-9._-]{0,63}$' })),
    name: t.String({ minLength: 1, maxLength: 200 }),
    title: t.String({ maxLength: MAX_TITLE }),
    /** Body text with placeholders; the fields follow it as `label: value` lines. */
    body: t.Optional(t.String({ maxLength: MAX_BODY })),
    level: t.Optional(Level),
    fields: t.Optional(t.Array(TemplateField, { maxItems: 100 })),
    /** Params the preview renders with when it is given none. */
    sample_params: t.Optional(Params()),
  },
  Strict,
)
export type TemplateBody = Static<typeof TemplateBody>

/** PUT takes a template's own read back (GET-modify-PUT): its timestamps are ignored. */
export const TemplateUpdate = t.Composite(
  [
    TemplateBody,
    t.Object({
      created_at: ReadOnly('read-only: ignored'),
      updated_at: ReadOnly('read-only: ignored, it changes with every write'),
    }),
  ],
  Strict,
)

export const ConfigPut = t.Object(
  {
    /** Provider type; required when the channel does not exist yet. */
    type: t.Optional(t.String({ minLength: 1 })),
    enabled: t.Optional(t.Boolean()),
    /** The provider's settings (the YAML keys besides type). */
    config: t.Record(t.String(), t.Unknown()),
    name: ReadOnly('read-only: accepted when it is the name in the path (GET-modify-PUT), else 400'),
    status: ReadOnly('read-only: ignored'),
    source: ReadOnly('read-only: ignored'),
    updated_at: ReadOnly('read-only: ignored, it changes with every write'),
  },
  Strict,
)

/** Strings here, checked in the route: Elysia 1.4 reports coerced query fields as 'property', not 'query.<name>'. */
export const LogsQuery = t.Object({
  offset: t.Optional(t.String()),
  limit: t.Optional(t.String()),
  status: t.Optional(t.String()),
  provider: t.Optional(t.String()),
  level: t.Optional(t.String()),
  since: t.Optional(t.String()),
  until: t.Optional(t.String()),
})

/**
 * The documented answers of the notify routes (OpenAPI only: declared in `detail.responses`, so
 * Elysia never reshapes an answer; the fuzz test checks real answers against them).
 */
export function envelope(
  data: TSchema,
  description = 'The envelope; code 0 on success',
): OpenAPIV3.ResponsesObject {
  // A TypeBox schema is a JSON Schema; the OpenAPI types only do not know its symbols.
  const schema = t.Object({
    code: t.Integer(),
    message: t.String(),
    data,
  }) as unknown as OpenAPIV3.SchemaObject
  return { 200: { description, content: { 'application/json': { schema } } } }
}
const ProviderStatus = t.Object({
  name: t.String(),
  type: t.String(),
  status: t.String(),
  enabled: t.Boolean(),
})
export const Docs = {
  notify: t.Object({
    notification_id: t.String(),
    task_ids: t.Optional(t.Array(t.String())),
    accepted: t.Array(t.String()),
    failed: t.Optional(t.Array(t.Object({ channel: t.String(), error: t.String() }))),
  }),
  status: t.Object({ status: oneOf(['ok', 'degraded']), providers: t.Array(ProviderStatus) }),
  providers: t.Object({
    providers: t.Array(
      t.Composite([ProviderStatus, t.Object({ since: t.String({ description: 'RFC 3339' }) })]),
    ),
  }),
  enabled: t.Object({ name: t.String(), enabled: t.Boolean() }),
  channel: t.Object({
    name: t.String(),
    type: t.String(),
    enabled: t.Boolean(),
    status: t.String(),
    /** yaml, runtime (PUT /config), or plugin: provided by another plugin and configured there. */
    source: oneOf(['yaml', 'runtime', 'plugin']),
    updated_at: t.String(),
    config: t.Record(t.String(), t.Unknown(), {
      description: "settings; secrets read as 'set' plus the last 4",
    }),
  }),
  queue: t.Object({ size: t.Integer() }),
  template: t.Object({
    id: t.String(),
    name: t.String(),
    title: t.String(),
    body: t.String(),
    level: t.String(),
    fields: t.Array(TemplateField),
    sample_params: t.Record(t.String(), t.Unknown()),
    created_at: t.String(),
    updated_at: t.String(),
  }),
  rendered: t.Object({
    title: t.String(),
    body: t.String(),
    level: t.String(),
    fields: t.Array(TemplateField),
  }),
}
