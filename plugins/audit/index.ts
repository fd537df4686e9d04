import { Elysia, t } from 'elysia'
import { invalidField, ok } from '../../core/http'
import { definePlugin } from '../../core/plugin'
import m001 from './migrations/001_audit.sql' with { type: 'text' }
import { auditStore } from './store'

const DAY = 86_400_000

const Query = t.Object(
  {
    page: t.Optional(t.Integer({ minimum: 1, description: '1-based; default 1' })),
    size: t.Optional(t.Integer({ minimum: 1, maximum: 500, description: 'default 50' })),
    actor: t.Optional(t.String({ description: 'user name or id of who acted' })),
    action: t.Optional(
      t.String({ description: 'an action (`site.set`) or its area (`site` matches every `site.*`)' }),
    ),
    target: t.Optional(t.String()),
    ip: t.Optional(t.String()),
    ok: t.Optional(t.Boolean({ description: 'false: refused attempts only (failed logins)' })),
    from: t.Optional(t.String({ description: 'RFC 3339, inclusive' })),
    to: t.Optional(t.String({ description: 'RFC 3339, exclusive' })),
  },
  { additionalProperties: false },
)

const time = (v: string | undefined, field: string) => {
  if (v === undefined) return undefined
  const ms = Date.parse(v)
  if (!Number.isFinite(ms)) throw invalidField(field, 'must be an RFC 3339 time')
  return ms
}

/**
 * The audit log (issue #19 point 7): every write of the operations center, configuration and
 * channel changes and logins, heard as `audit` events on the bus so producers never import this
 * plugin. Producers mask secrets by schema; the `sensitive_fields` setting (spec 3) masks by
 * name once more before anything is stored.
 */
export default definePlugin({
  name: 'audit',
  config: t.Object(
    {
      /** Field names masked in audit details ('set' plus the last 4), matched as parts of keys in any case. */
      sensitive_fields: t.Array(t.String({ minLength: 1 }), {
        default: ['password', 'token', 'secret', 'authorization', 'api_key'],
      }),
      /**
       * Writes (POST, PUT, PATCH, DELETE) under these path prefixes are recorded from the request
       * itself (who, method and path, status, address; never the body), for plugins that do not
       * send audit entries of their own: notification channel config, certificates, backups,
       * users and tokens.
       */
      http_writes: t.Array(t.String({ pattern: '^/' }), {
        default: [
          '/api/v1/config',
          '/api/v1/providers',
          '/api/v1/certificates',
          '/api/v1/backups',
          '/api/users',
          '/api/v1/app-tokens',
          '/api/api-keys',
        ],
      }),
      /** Entries older than this many days are deleted (daily); 0 keeps them forever. */
      keep_days: t.Integer({ minimum: 0, default: 365 }),
    },
    { additionalProperties: false, default: {} },
  ),
  migrations: [{ id: 1, name: 'audit', sql: m001 }],
  // Who changed what is for the people who run the platform.
  permissions: { audit: { write: [], read: ['operator'] } },
  setup(ctx) {
    const store = auditStore(ctx.db, () => ctx.config.sensitive_fields)
    ctx.bus.on('audit', async (e) => {
      try {
        await store.record(e)
      } catch (err) {
        ctx.log.error('audit entry not stored', { action: e.action, error: String(err) })
      }
    })
    if (ctx.config.keep_days)
      ctx.schedule(
        'audit.purge',
        DAY,
        async () => {
          const n = await store.purge(Date.now() - ctx.config.keep_days * DAY)
          if (n) ctx.log.info('audit retention purge', { deleted: n })
        },
        { runAtStart: true },
      )

    const watched = (path: string) =>
      ctx.config.http_writes.some((p) => path === p || path.startsWith(`${p}/`))

    ctx.bus.on('http.write', async (w) => {
      if (!watched(w.path)) return
      try {
        await store.record({
          actor_kind: w.principal?.kind ?? 'anonymous',
          actor_id: w.principal?.id,
          actor_name: w.principal?.username,
          action: `http.${w.method.toLowerCase()}`,
          target: w.path,
          ip: w.ip,
          ok: w.status < 400,
          details: { status: w.status, route: w.route },
        })
      } catch (e) {
        ctx.log.error('audit entry not stored', { path: w.path, error: String(e) })
      }
    })

    return new Elysia({ name: 'audit' }).use(ctx.guard).get(
      '/api/v1/audit',
      async ({ query }) =>
        ok(
          await store.list({
            page: query.page ?? 1,
            size: query.size ?? 50,
            actor: query.actor,
            action: query.action,
            target: query.target,
            ip: query.ip,
            ok: query.ok,
            from: time(query.from, 'query.from'),
            to: time(query.to, 'query.to'),
          }),
        ),
      {
        permission: 'audit:read',
        query: Query,
        detail: {
          tags: ['audit'],
          summary: 'The audit log, newest first, paged and filtered',
          description:
            'Each entry: {id, at, actor: {kind, id, name}, action, target, ip, ok, details}. Secrets in details are masked ("set" plus the last 4). Actions: auth.login (refused ones with ok=false), site.set, site.clear, ops.notifications.put, rate_limits.put, rate_limits.delete, ops_alerts.*, agents.register, agents.delete, ...',
        },
      },
    )
  },
})
