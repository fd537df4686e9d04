import { Type as T } from '@sinclair/typebox'
import { Value, ValueErrorType } from '@sinclair/typebox/value'
import { Elysia, t } from 'elysia'
import { auditor } from '../../core/audit'
import { PERMISSION_SECURITY, rateLimiting } from '../../core/auth/guard'
import { REVOKED_END, whileTrusted } from '../../core/auth/while-trusted'
import { NotFound, invalidField, ok } from '../../core/http'
import type { PluginContext } from '../../core/plugin'
import { PageNumber } from '../../core/schema'
import { maskSecrets, unmaskSecrets } from '../../core/secrets'
import { StreamSlots } from '../../core/stream-slots'
import { rejectUnknown } from '../../core/strict'
import { type Note, sendEmail } from './channels'
import type { MessageHub, Target, Targets } from './dispatch'
import { KEYS, KEY_NAMES, type KeyName, PREFIX, secretMoved } from './keys'
import { BUILTIN, Routing, checkRouting } from './routing'
import { type SiteStore, valuesOf } from './store'

/**
 * How often an idle message stream sends a comment: under Bun's idle timeout (10 s), which closes
 * a connection that stays silent longer (at 15 s every stream was cut after 10-12 s, and a message
 * sent while the browser reconnected was lost to it).
 */
export const KEEP_ALIVE_MS = 5_000

const tag = (summary: string, description?: string, responses?: Record<string, { description: string }>) => ({
  tags: ['site'],
  summary,
  description,
  ...(responses ? { responses } : {}),
})
const KeyParams = t.Object({ key: t.String() })

/** `notification.smtpHost` -> `smtpHost`; anything else is no key of spec 3. */
function keyOf(key: string, field: string, unknown: (m: string) => Error): KeyName {
  const name = key.startsWith(PREFIX) ? key.slice(PREFIX.length) : ''
  if (!(KEY_NAMES as string[]).includes(name))
    throw unknown(`${field}: unknown setting '${key}'; known: ${KEY_NAMES.map((k) => PREFIX + k).join(', ')}`)
  return name as KeyName
}

export function siteRoutes(
  ctx: PluginContext<unknown>,
  d: {
    store: SiteStore
    hub: MessageHub
    targets: Targets
    /** `max_streams_per_principal` of the settings. */
    maxStreams: () => number
  },
) {
  const { store, hub, targets } = d
  // The stream reads ?token= (EventSource), which the `permission` macro does not: it counts
  // against the rate limit here, and each caller holds a bounded number of streams.
  const count = rateLimiting(ctx.rateLimiter)
  const slots = new StreamSlots(d.maxStreams, 'in-app message')
  const audit = auditor(ctx)
  const masked = (name: KeyName, value: unknown) => maskSecrets(KEYS[name].schema, value)
  const entry = async (name: KeyName) => {
    const e = (await store.effective())[name]
    return { key: PREFIX + name, value: masked(name, e.value), origin: e.origin }
  }

  return new Elysia({ name: 'site' })
    .use(ctx.guard)
    .get(
      '/api/v1/site/notification',
      async () => {
        const e = await store.effective()
        return ok(
          Object.fromEntries(
            KEY_NAMES.map((k) => [PREFIX + k, { value: masked(k, e[k].value), origin: e[k].origin }]),
          ),
        )
      },
      {
        permission: 'site:read',
        detail: tag(
          'Snapshot of the notification channel settings',
          'Every notification.* key: {value, origin}. origin is default (built in), file (plugins.site.notification in the YAML) or override (set through PUT, stored). Secrets (signing secrets, the SMTP password, credentials and query values of robot URLs) are masked: "set" plus the last 4 characters.',
        ),
      },
    )
    .post(
      '/api/v1/site/notification/test',
      async ({ body, principal, request, server }) => {
        const e = await store.effective()
        const r = await store.routing()
        const n = {
          id: Bun.randomUUIDv7(),
          event: 'test',
          level: 'info',
          title: 'liveops test notification',
          body: `A test message through channel '${body.channel}'.`,
          at: new Date().toISOString(),
          payload: { test: true },
        }
        const custom = r.channels.find((c) => c.id === body.channel)
        if (!custom && !(BUILTIN as readonly string[]).includes(body.channel))
          throw invalidField(
            'body.channel',
            `unknown channel; known: ${[...BUILTIN, ...r.channels.map((c) => c.id)].join(', ')}`,
          )
        const target: Target | undefined =
          body.channel === 'email' && body.to?.length
            ? { id: 'email', send: (m: Note) => sendEmail(valuesOf(e), m, targets.mail(e), body.to) }
            : targets.target(body.channel, e, r)
        if (!target)
          return ok({
            channel: body.channel,
            ok: false,
            error: `channel '${body.channel}' is switched off or not configured`,
          })
        const sent = await targets.deliver(target, n)
        const out = sent.ok ? { ok: true } : { ok: false, error: sent.error }
        audit({ principal, request, server }, 'site.test', body.channel, out)
        return ok({ channel: body.channel, ...out })
      },
      {
        permission: 'site:write',
        transform: ({ body }) => rejectUnknown(TestBody, body, 'body'),
        body: TestBody,
        detail: tag(
          'Send a test message through one channel',
          'channel: inapp, chatbot, webhook, email or a routing channel id; to: mail recipients for this test (default notification.emailTo). Answers 200 {channel, ok, error?}: the error says why the send failed (a wrong port, refused credentials, a masked password written back).',
        ),
      },
    )
    .get(
      '/api/v1/site/messages',
      async ({ query }) =>
        ok(
          await store.messages({
            page: query.page ?? 1,
            size: query.size ?? 50,
            unread: query.unread,
            event: query.event,
          }),
        ),
      {
        permission: 'messages:read',
        query: t.Object({
          page: t.Optional(PageNumber(1)),
          size: t.Optional(t.Integer({ minimum: 1, maximum: 500 })),
          unread: t.Optional(t.Boolean()),
          event: t.Optional(t.String()),
        }),
        detail: tag(
          'In-app messages, newest first',
          'Answers {items, total, unread, page, size}; unread=true lists only unread ones.',
        ),
      },
    )
    .get(
      '/api/v1/site/messages/stream',
      async ({ headers, query, request, set }) => {
        const who = ctx.auth.authorize(await ctx.auth.identify(headers, query), 'messages:read')
        await count(who, set.headers)
        const release = slots.take(who)
        const revoked = whileTrusted(ctx.auth, { headers, query, gone: request.signal }, 'messages:read')
        let unsubscribe: () => void = () => undefined
        // Every way the stream ends comes here (it may come more than once): the slot is freed.
        const off = () => {
          unsubscribe()
          release()
        }
        let beat: Timer | undefined
        const stream = new ReadableStream<string>({
          start(c) {
            c.enqueue(': connected\n\n')
            const end = () => {
              clearInterval(beat)
              release()
              try {
                c.close()
              } catch {
                // Already closed by the client.
              }
            }
            unsubscribe = hub.subscribe((chunk) => c.enqueue(chunk), end)
            revoked.addEventListener(
              'abort',
              () => {
                off()
                try {
                  c.enqueue(REVOKED_END)
                } catch {
                  // Already closed by the client.
                }
                end()
              },
              { once: true },
            )
            beat = setInterval(() => c.enqueue(': keep-alive\n\n'), KEEP_ALIVE_MS)
            request.signal.addEventListener('abort', () => {
              off()
              clearInterval(beat)
            })
          },
          cancel() {
            off()
            clearInterval(beat)
          },
        })
        return new Response(stream, {
          headers: {
            'content-type': 'text/event-stream',
            'cache-control': 'no-cache',
            connection: 'keep-alive',
          },
        })
      },
      {
        detail: {
          security: PERMISSION_SECURITY,
          ...tag(
            'Server-sent events: each new in-app message as `event: message`',
            'Authenticated by Bearer, the service_token cookie or ?token= (EventSource cannot send headers); needs messages:read.',
            {
              '200': { description: 'text/event-stream of `event: message` entries' },
              '401': { description: 'Missing, invalid or expired token' },
              '403': { description: 'The token does not grant messages:read' },
              '429': {
                description:
                  'The caller’s rate limit, or `too_many_streams`: it holds `max_streams_per_principal` streams (16) in this process',
              },
            },
          ),
        },
      },
    )
    .post('/api/v1/site/messages/read-all', async () => ok({ marked: await store.markAllRead() }), {
      permission: 'messages:write',
      detail: tag('Mark every in-app message read'),
    })
    .post('/api/v1/site/messages/:id/read', async ({ params }) => ok(await store.markRead(params.id)), {
      permission: 'messages:write',
      params: t.Object({ id: t.String() }),
      detail: tag('Mark one in-app message read'),
    })
    .get('/api/v1/ops/notifications', async () => ok(maskSecrets(Routing, await store.routing())), {
      permission: 'site:read',
      detail: tag('The ops notification routing', 'Secrets of routing channels are masked.'),
    })
    .put(
      '/api/v1/ops/notifications',
      async ({ body, principal, request, server }) => {
        const before = await store.routing()
        // A secret sent back as read (masked) keeps the stored one, matched by channel id.
        const prev = Object.fromEntries(before.channels.map((c) => [c.id, c]))
        const next: Routing = {
          ...body,
          channels: body.channels.map(
            (c, i) =>
              unmaskSecrets(
                Routing.properties.channels.items,
                c,
                prev[c.id],
                `body.channels[${i}]`,
              ) as typeof c,
          ),
        }
        checkRouting(next)
        await store.setRouting(next)
        audit({ principal, request, server }, 'ops_notifications.put', 'routing', {
          before: maskSecrets(Routing, before) as Record<string, unknown>,
          after: maskSecrets(Routing, next) as Record<string, unknown>,
        })
        return ok(maskSecrets(Routing, next))
      },
      {
        permission: 'site:write',
        // The handler records ops_notifications.put; a refused attempt reads the same.
        audit: { action: 'ops_notifications.put', target: 'routing' },
        transform: ({ body }) => rejectUnknown(Routing, body, 'body'),
        body: Routing,
        detail: tag(
          'Replace the ops notification routing',
          '{channels: [{id, type webhook|chatbot, url, secret}], rules: [{event, channels, thresholdDays}]}. Events: alert.fired, certificate_expiring, certificate_expired, function.invoked (approval events are not produced yet: refused). Rules name routing channels or the built-in ones (inapp, chatbot, webhook, email). An event no rule names goes to every built-in channel that is on (function.invoked only when a call failed); certificate_expiring rules with thresholdDays apply when days_left is at most that.',
        ),
      },
    )
    .get(
      '/api/v1/site/:key',
      async ({ params }) => ok(await entry(keyOf(params.key, 'params.key', (m) => new NotFound(m)))),
      {
        permission: 'site:read',
        params: KeyParams,
        detail: tag('Read one setting: {key, value, origin}, secrets masked'),
      },
    )
    .put(
      '/api/v1/site/:key',
      async ({ params, body, principal, request, server }) => {
        const name = keyOf(params.key, 'params.key', (m) =>
          invalidField('params.key', m.replace(/^params\.key: /, '')),
        )
        if (!body || typeof body !== 'object' || Array.isArray(body) || !('value' in body))
          throw invalidField('body.value', 'required')
        const schema = KEYS[name].schema
        const all = await store.effective()
        const before = all[name].value
        const value = unmaskSecrets(schema, body.value, before, 'body.value')
        const err = Value.Errors(schema, value).First()
        // A pattern's reason is the schema's description (what it says in words), not the pattern.
        const description = (err?.schema as { description?: string } | undefined)?.description
        if (err)
          throw invalidField(
            'body.value',
            err.type === ValueErrorType.StringPattern && description
              ? `must be ${description}`
              : err.type === ValueErrorType.StringMaxLength
                ? `${PREFIX + name} is at most ${(err.schema as { maxLength?: number }).maxLength} characters`
                : err.message,
          )
        const moved = secretMoved(name, all, await store.effective({ key: name, value }))
        if (moved) throw invalidField('body.value', moved)
        await store.setOverride(name, value, principal.username)
        audit({ principal, request, server }, 'site.set', PREFIX + name, {
          before: masked(name, before) as never,
          after: masked(name, value) as never,
        })
        return ok(await entry(name))
      },
      {
        permission: 'site:write',
        // The handler records site.set (site.clear below); a refused attempt reads the same.
        audit: { action: 'site.set', target: '{key}' },
        params: KeyParams,
        body: T.Object({ value: T.Unknown() }, { additionalProperties: false }),
        detail: tag(
          'Set an override; takes effect at once',
          'Body {value}: a JSON value of the key\'s type (booleans for *Enabled and smtpInsecureSkipVerify, smtpEncryption none|ssl|starttls, smtpAuthType plain|login, smtpPort a number or digits, URLs http(s) or empty). A secret sent back exactly as read (masked) keeps the stored secret, for the same destination only: a URL changed around masked credentials, or a host or port changed while notification.smtpPassword is set, is 400 "enter the secret again" (set the password to "" first, change the host, then set it again).',
        ),
      },
    )
    .delete(
      '/api/v1/site/:key',
      async ({ params, principal, request, server }) => {
        const name = keyOf(params.key, 'params.key', (m) => new NotFound(m))
        const all = await store.effective()
        const after = await store.effective({ key: name })
        const moved = secretMoved(name, all, after)
        if (moved) throw invalidField('params.key', moved)
        const had = await store.clearOverride(name)
        // What was cleared and what holds now, masked as site.set records them.
        if (had)
          audit({ principal, request, server }, 'site.clear', PREFIX + name, {
            key: PREFIX + name,
            before: masked(name, all[name].value) as never,
            after: masked(name, after[name].value) as never,
          })
        return ok(await entry(name))
      },
      {
        permission: 'site:write',
        audit: { action: 'site.clear', target: '{key}' },
        params: KeyParams,
        detail: tag(
          'Clear the override: back to the file value (or the default)',
          'Idempotent: answers the now effective {key, value, origin}.',
        ),
      },
    )
}

const TestBody = T.Object(
  {
    channel: T.String({ minLength: 1 }),
    to: T.Optional(T.Array(T.String({ minLength: 3 }), { minItems: 1, maxItems: 20 })),
  },
  { additionalProperties: false },
)
