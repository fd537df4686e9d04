import { Elysia, t } from 'elysia'
import { invalidField, ok } from '../../core/http'
import { definePlugin } from '../../core/plugin'
import { PageNumber } from '../../core/schema'
import m001 from './migrations/001_audit.sql' with { type: 'text' }
import { auditStore } from './store'

const DAY = 86_400_000

const Query = t.Object(
  {
    page: t.Optional(PageNumber(1, '1-based; default 1')),
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
 * The audit log (spec 3; issue 34 point 9): every write of every plugin and the logins. Core
 * derives an entry for each write from its route (`http.write` with `audit`: who, a readable
 * action and target, when, from where, the body as its schema declares it with secrets
 * masked); a plugin that knows more (before and after) raises its own `audit` event instead.
 * Producers never import this plugin. The `sensitive_fields` setting masks by name once more
 * before anything is stored.
 */
export default definePlugin({
  name: 'audit',
  config: t.Object(
    {
      /**
       * Field names masked in audit details ('set'), matched as parts of keys in any case; a name of
       * several words also at a key's end however joined (`private_key`: `privateKey`, `api_key`: `apiKey`).
       */
      sensitive_fields: t.Array(t.String({ minLength: 1 }), {
        default: ['password', 'token', 'secret', 'authorization', 'api_key', 'private_key'],
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
    // Entries are written after the answer: stopping waits for those in flight, so a write
    // answered just before a shutdown still leaves its entry (the store closes after this hook).
    const writing = new Set<Promise<void>>()
    const record = (entry: Parameters<typeof store.record>[0], what: Record<string, unknown>) => {
      const p = store
        .record(entry)
        .then(() => undefined)
        .catch((err) => ctx.log.error('audit entry not stored', { ...what, error: String(err) }))
        .finally(() => writing.delete(p))
      writing.add(p)
      return p
    }
    ctx.onStop(async () => {
      await Promise.all(writing)
    })
    ctx.bus.on('audit', (e) => record(e, { action: e.action }))
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

    // Every write core derived an entry for (core/audit.ts): refused ones of a known caller too,
    // never the refusals of strangers (a flood of 401s would bury the log).
    ctx.bus.on('http.write', async (w) => {
      if (!w.audit || (!w.principal && w.status >= 400)) return
      await record(
        {
          actor_kind: w.principal?.kind ?? 'anonymous',
          actor_id: w.principal?.id,
          actor_name: w.principal?.username,
          action: w.audit.action,
          target: w.audit.target,
          ip: w.ip,
          ok: w.status < 400,
          details: { status: w.status, ...w.audit.details },
        },
        { path: w.path },
      )
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
            'Each entry: {id, at, actor: {kind, id, name}, action, target, ip, ok, details}. Every write is recorded: its action names the resource and what was done (rule.update, roster.import, notification.send, alert.ack, channel.update, game.publish, environment.create, experiment.publish, ml_model.deploy, ...), its target the resource (`channel:ops-mail`, `game:g1/environment:prod`); details carry the status and the body as its schema declares it (secrets masked as "set" plus the last 4, fields masked by name only as "set"; map values not recorded), or before and after. Also auth.login (refused ones with ok=false), site.set, site.clear, ops_notifications.put, rate_limits.*, ops_alerts.*, certificates.*, backups.*, agents.*. Refused writes of a known caller are recorded with ok=false.',
        },
      },
    )
  },
})
