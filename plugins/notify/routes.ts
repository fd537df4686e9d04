import type { Static } from '@sinclair/typebox'
import { Elysia, t } from 'elysia'
import type { RouteGuard, auditor } from '../../core/audit'
import type { AuthService } from '../../core/auth/service'
import { invalidField, ok } from '../../core/http'
import { withoutEchoed } from '../../core/strict'
import type { ChannelManager } from './channels'
import type { LogFilter, logStore } from './logs'
import type { NotifyService } from './notify'
import {
  ConfigPut,
  Docs,
  LEVELS,
  LogsQuery,
  NotifyBody,
  STATUSES,
  TemplateBody,
  TemplateUpdate,
  checkParamsSize,
  envelope,
} from './schema'
import { statusAnswer } from './status'
import type { QueueStore } from './store'
import { type TemplateStore, render } from './templates'
import type { WorkerHub } from './workers'

export interface RouteDeps {
  guard: RouteGuard
  service: NotifyService
  channels: ChannelManager
  queue: QueueStore
  logs: ReturnType<typeof logStore>
  templates: TemplateStore
  hub?: WorkerHub
  /** Records the channel changes with their before and after (core/audit.ts). */
  audit: ReturnType<typeof auditor>
  /** Who asks the public status: the error texts only for callers who may read channels. */
  auth: AuthService
}

const tags = (tag: string) => ({ tags: [`notify ${tag}`] })

function instant(value: string | undefined, field: string): string | undefined {
  if (value === undefined) return undefined
  if (
    !/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:\d{2})$/i.test(value) ||
    Number.isNaN(Date.parse(value))
  )
    throw invalidField(field, `'${value}' is not an RFC 3339 timestamp`)
  return value
}

function integer(value: string | undefined, field: string, min: number, max: number): number | undefined {
  if (value === undefined) return undefined
  const n = Number(value)
  if (!/^-?\d+$/.test(value) || n < min || n > max)
    throw invalidField(field, `must be an integer from ${min} to ${max}, got '${value}'`)
  return n
}

function member<L extends readonly string[]>(
  value: string | undefined,
  field: string,
  allowed: L,
): L[number] | undefined {
  if (value === undefined) return undefined
  if (!allowed.includes(value))
    throw invalidField(field, `must be one of ${allowed.join(', ')}, got '${value}'`)
  return value
}

/** Spec 2 "GET /logs query": every parameter checked, each error naming it. */
function logFilter(q: Static<typeof LogsQuery>): LogFilter {
  return {
    offset: integer(q.offset, 'query.offset', 0, Number.MAX_SAFE_INTEGER),
    limit: integer(q.limit, 'query.limit', 1, 500),
    status: member(q.status, 'query.status', STATUSES),
    provider: q.provider || undefined,
    level: member(q.level, 'query.level', LEVELS),
    since: instant(q.since, 'query.since'),
    until: instant(q.until, 'query.until'),
  }
}

/** Routes of spec 2 that issue 5 covers; each names the scope an application token needs. */
export function notifyRoutes(d: RouteDeps) {
  const { channels } = d
  const providerView = (s: ReturnType<ChannelManager['list']>[number]) => ({
    name: s.name,
    type: s.type,
    status: s.status,
    enabled: s.enabled,
    since: new Date(s.since).toISOString(),
  })
  return new Elysia({ name: 'notify.routes' })
    .use(d.guard)
    .post(
      '/api/v1/notify',
      async ({ body, query, principal }) => {
        const dry = member(query.dry_run, 'query.dry_run', ['true', 'false'] as const)
        checkParamsSize({ params: body.params, data: body.data })
        return dry === 'true'
          ? ok(await d.service.dryRun(body))
          : d.service.notify(body, principal ? `${principal.kind}:${principal.id}` : 'anonymous')
      },
      {
        appScope: 'trigger',
        audit: 'notification.send',
        body: NotifyBody,
        query: t.Object({ dry_run: t.Optional(t.String()) }),
        detail: {
          responses: envelope(
            Docs.notify,
            'code 0: accepted (failed lists channels that were not; held says why a rule delivered nothing); code 422: every channel failed. With dry_run=true: the routing decision',
          ),
          ...tags('send'),
          summary:
            'Accept a notification: HTTP 200 with code 0 (all or some channels accepted, `failed` lists the rest) or code 422 (all failed)',
          description:
            'Recipients are the union of channels, channel and audience (group:<id>, user:<name>, bare channel); without any, static routes pick channels by type and level. ' +
            'The notification and its deliveries are stored before the answer. A repeated idempotency_key of the same caller (a user, a token, a server key) returns the first accepted answer (same notification_id and task_ids, nothing sent again) on every instance and after a restart, for the newest idempotency_entries keys (about 1000); a 422 is not recorded. ' +
            'A rule may hold a notification back (suppressed, silenced, pending, folded, inhibited): code 0, no deliveries, and data.held {rule, reason, detail}. ' +
            '`?dry_run=true` answers the routing decision {dry_run, explicit, rule?, channels, failed?, held?, explain?} without storing or sending. ' +
            '`params` and `data`: at most 1,000 names each and 64 KB as JSON together (400 naming the larger).',
        },
      },
    )
    .get('/api/v1/status', statusAnswer(channels, d.auth), {
      detail: {
        responses: envelope(Docs.status),
        ...tags('providers'),
        summary: 'Public: service status and each channel (degraded when an enabled channel is unavailable)',
        description:
          "A channel's status is `available` or `error`; callers who may read channels (GET /config/{name}: a `query` token, " +
          'a user with `channels:read`) read why (`error: <reason>`), as /healthz keeps its error texts for signed-in callers.',
      },
    })
    .get('/api/v1/providers', () => ok({ providers: channels.list().map(providerView) }), {
      appScope: 'query',
      detail: {
        responses: envelope(Docs.providers),
        ...tags('providers'),
        summary: 'Channels with type, status, enabled and since (last status change)',
      },
    })
    .post(
      '/api/v1/providers/:name/enable',
      async ({ params }) => ok(await channels.setEnabled(params.name, true), 'provider enabled'),
      {
        appScope: 'config',
        audit: { action: 'channel.enable', target: 'channel:{name}' },
        detail: {
          responses: envelope(Docs.enabled),
          ...tags('providers'),
          summary:
            'Enable a channel (stored; survives a restart); 404 when unknown; 409 for a channel another plugin provides (source plugin)',
        },
      },
    )
    .post(
      '/api/v1/providers/:name/disable',
      async ({ params }) => ok(await channels.setEnabled(params.name, false), 'provider disabled'),
      {
        appScope: 'config',
        audit: { action: 'channel.disable', target: 'channel:{name}' },
        detail: {
          responses: envelope(Docs.enabled),
          ...tags('providers'),
          summary:
            'Disable a channel: notify fails for it, its queued deliveries wait until it is enabled; 409 for a channel another plugin provides',
        },
      },
    )
    .get('/api/v1/config/:name', ({ params }) => ok(channels.view(params.name)), {
      appScope: { scope: 'query', permission: 'channels:read' },
      detail: {
        responses: envelope(Docs.channel),
        ...tags('providers'),
        summary:
          "A channel's configuration {name, type, enabled, status, source, updated_at, config}; secrets read as 'set' plus the last 4",
      },
    })
    .put(
      '/api/v1/config/:name',
      async ({ params, body, principal, request, server }) => {
        const before = channels.slots.has(params.name) ? channels.view(params.name) : undefined
        const after = await channels.put(
          params.name,
          withoutEchoed({ name: params.name }, body, ['name'], ['status', 'source', 'updated_at']),
        )
        // Both read as GET shows them: what the provider's schema marks secret is masked.
        d.audit(
          { principal, request, server },
          before ? 'channel.update' : 'channel.create',
          `channel:${params.name}`,
          {
            before,
            after,
          },
        )
        return ok(after, 'provider configuration updated')
      },
      {
        appScope: { scope: 'config', permission: 'channels:write' },
        // A refused change (403, 400, 409 for another plugin's channel) reads as the channel's
        // too; an accepted one is recorded by the handler with its before and after.
        audit: { action: 'channel.update', target: 'channel:{name}' },
        body: ConfigPut,
        detail: {
          responses: envelope(Docs.channel),
          ...tags('providers'),
          summary:
            'Swap (or create) a channel at runtime: built and verified first; on failure the old one stays and the answer is 400',
          description:
            'Body {type?, enabled?, config}. A masked secret sent back unchanged keeps the stored secret, for the same destination only: with a changed URL, host or port it is 400 "enter the secret again". ' +
            'A target the outbound policy refuses (loopback, private networks, link-local, cloud metadata unless outbound.allow lists them) is 400 outbound_refused; channels the YAML names are trusted. `module` is refused: provider files load only from the YAML. ' +
            '409 for a channel another plugin provides (source `plugin`, such as `site.webhook`): it is configured there.',
        },
      },
    )
    .get('/api/v1/workers', () => ok(d.hub?.list() ?? { count: 0, workers: [] }), {
      appScope: 'query',
      detail: {
        ...tags('workers'),
        summary: 'Remote workers: online, or offline after missed heartbeats (listed for an hour)',
      },
    })
    .get('/api/v1/queue', async () => ok({ size: await d.queue.size() }), {
      appScope: 'query',
      detail: {
        responses: envelope(Docs.queue),
        ...tags('queue'),
        summary: 'Deliveries not yet finished (pending, including those waiting for a retry)',
      },
    })
    .get('/api/v1/logs', async ({ query }) => ok(await d.logs.list(logFilter(query))), {
      appScope: 'query',
      query: LogsQuery,
      detail: {
        ...tags('logs'),
        summary:
          'Delivery logs, newest first; provider matches the channel name or provider type; limit default 50, max 500',
      },
    })
    .get(
      '/api/v1/logs/stats',
      async ({ query }) =>
        ok(
          await d.logs.stats({
            since: instant(query.since, 'query.since'),
            until: instant(query.until, 'query.until'),
          }),
        ),
      {
        appScope: 'query',
        query: t.Object({ since: t.Optional(t.String()), until: t.Optional(t.String()) }),
        detail: {
          ...tags('logs'),
          summary:
            'Counts by status, provider and level; success rate of finished deliveries; latency p50/p95 (ms, acceptance to success)',
        },
      },
    )
    .get('/api/v1/logs/:id', async ({ params }) => ok(await d.logs.get(params.id)), {
      appScope: 'query',
      detail: {
        ...tags('logs'),
        summary: 'One delivery with its body, raw fields and every attempt (worker, duration, error)',
      },
    })
    .get(
      '/api/v1/templates',
      async () => {
        const templates = await d.templates.list()
        return ok({ templates, count: templates.length })
      },
      {
        appScope: 'query',
        detail: {
          ...tags('templates'),
          summary: 'Every template',
          responses: envelope(t.Object({ templates: t.Array(Docs.template), count: t.Integer() })),
        },
      },
    )
    .post(
      '/api/v1/templates/create',
      async ({ body }) => ok(await d.templates.create(body), 'template created'),
      {
        appScope: 'config',
        body: TemplateBody,
        detail: {
          ...tags('templates'),
          responses: envelope(Docs.template),
          summary: 'Create a template (id generated when omitted; 409 when taken). Placeholders: {{.name}}',
        },
      },
    )
    .get('/api/v1/templates/:id', async ({ params }) => ok(await d.templates.get(params.id)), {
      appScope: 'query',
      detail: { ...tags('templates'), summary: 'One template', responses: envelope(Docs.template) },
    })
    .put(
      '/api/v1/templates/:id',
      async ({ params, body }) =>
        ok(
          await d.templates.update(params.id, withoutEchoed({}, body, [], ['created_at', 'updated_at'])),
          'template updated',
        ),
      {
        appScope: 'config',
        body: TemplateUpdate,
        detail: {
          ...tags('templates'),
          summary: 'Replace a template; the id in the URL wins over the body',
          responses: envelope(Docs.template),
        },
      },
    )
    .delete(
      '/api/v1/templates/:id',
      async ({ params }) => {
        await d.templates.remove(params.id)
        return ok({ id: params.id }, 'template deleted')
      },
      {
        appScope: 'config',
        detail: {
          ...tags('templates'),
          summary: 'Delete a template',
          responses: envelope(t.Object({ id: t.String() })),
        },
      },
    )
    .post(
      '/api/v1/templates/:id/preview',
      async ({ params, body }) => {
        // The body is optional, and Elysia 1.4 neither validates nor keeps an optional body's bad fields: checked here.
        const b = (body ?? {}) as Record<string, unknown>
        if (typeof b !== 'object' || Array.isArray(b)) throw invalidField('body', 'must be an object')
        for (const k of ['params', 'data'] as const) {
          const v = b[k]
          if (v !== undefined && (typeof v !== 'object' || v === null || Array.isArray(v)))
            throw invalidField(`body.${k}`, 'must be an object')
        }
        checkParamsSize({ params: b.params, data: b.data })
        const tpl = await d.templates.get(params.id)
        return ok(
          render(
            tpl,
            (b.params as Record<string, unknown> | undefined) ?? tpl.sample_params,
            (b.data as Record<string, unknown> | undefined) ?? {},
          ),
        )
      },
      {
        appScope: 'trigger',
        // A rendering, not a change.
        audit: false,
        detail: {
          ...tags('templates'),
          responses: envelope(Docs.rendered),
          summary:
            'Render a template with body {params?, data?} (params default to its sample_params): {title, body, level, fields}',
        },
      },
    )
}
