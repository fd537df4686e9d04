import { Elysia, t } from 'elysia'
import type { RouteGuard } from '../audit'
import { Forbidden } from '../http'
import { Enum } from '../schema'
import { SCOPES, type Scope } from './app-tokens'
import type { AuthService, Principal } from './service'

const ScopedBody = t.Object(
  {
    name: t.String({ minLength: 1, maxLength: 200 }),
    scopes: t.Array(Enum(SCOPES), { minItems: 1, uniqueItems: true }),
  },
  { additionalProperties: false },
)
const Id = t.Object({ id: t.String() })
/** The most one page of keys or tokens lists. */
export const KEYS_PAGE_MAX = 1_000
/** Opt-in paging of a key list: without `limit`, every one, as before. */
export const KeyPage = t.Object({
  limit: t.Optional(
    t.Integer({
      minimum: 1,
      maximum: KEYS_PAGE_MAX,
      description: `at most this many (1-${KEYS_PAGE_MAX}); all when absent`,
    }),
  ),
  after: t.Optional(t.String({ maxLength: 64, description: 'the id listed last on the page before' })),
})
/** One page of `limit` (read one more to know whether more follow), with `next_after` then. */
async function paged<T extends { id: string }>(
  q: typeof KeyPage.static,
  list: (page: { limit?: number; after?: string }) => Promise<T[]>,
): Promise<{ items: T[]; next_after?: string }> {
  const items = await list({ after: q.after, limit: q.limit === undefined ? undefined : q.limit + 1 })
  if (q.limit === undefined || items.length <= q.limit) return { items }
  items.length = q.limit
  return { items, next_after: items[q.limit - 1].id }
}
const pageNote =
  'By id, the order they were made. limit (1-1,000) and after page the list: next_after (the last id) is present when more follow, send it as after; without limit, all of them.'
const ok = <T>(data: T, message = 'ok') => ({ code: 0, message, data })
const tag = (summary: string, description?: string, responses?: Record<string, { description: string }>) => ({
  tags: ['auth'],
  summary,
  ...(description ? { description } : {}),
  ...(responses ? { responses } : {}),
})

/**
 * The notification service's scoped credentials (spec 2 section 5): application tokens
 * (`/api/v1/app-tokens`, admins) and server keys (`/api/v1/server-keys`, the `apikeys` area),
 * which every `appScope` route of any plugin accepts by scope. Each is shown once, at creation.
 */
export function keyRoutes(auth: AuthService, guard: RouteGuard) {
  /**
   * Nobody makes a key that reaches further than they do: each scope needs every permission the
   * `appScope` routes of that scope ask of users.
   */
  const checkCeiling = (principal: Principal, scopes: readonly Scope[]) => {
    for (const scope of scopes) {
      const lacking = auth.scopeReach(scope).filter((p) => !auth.permissions.allows(principal.roles, p))
      if (lacking.length)
        throw new Forbidden(
          `body.scopes: a key with scope '${scope}' reaches ${lacking.join(', ')}, which your roles do not grant`,
        )
    }
  }

  return new Elysia({ name: 'liveops.auth.keys' })
    .use(guard)
    .post(
      '/api/v1/app-tokens',
      async ({ body, principal }) =>
        ok(
          await auth.appTokens.create(body.name, body.scopes, principal?.username ?? 'admin', principal),
          'application token created',
        ),
      {
        appScope: 'admin',
        body: ScopedBody,
        detail: tag(
          'Create an application token (admins); the token is shown once. Scopes config, trigger, query do not imply each other',
        ),
      },
    )
    .get(
      '/api/v1/app-tokens',
      async ({ query }) => {
        const { items: tokens, next_after } = await paged(query, (p) => auth.appTokens.list(p))
        return ok({ tokens, count: tokens.length, ...(next_after ? { next_after } : {}) })
      },
      {
        appScope: 'admin',
        query: KeyPage,
        detail: tag('Application tokens (without their secrets)', pageNote),
      },
    )
    .delete(
      '/api/v1/app-tokens/:id',
      async ({ params }) =>
        ok(await auth.revokeScoped(auth.appTokens, params.id), 'application token revoked'),
      {
        appScope: 'admin',
        params: Id,
        detail: tag('Revoke an application token; it stops working at once, on every instance'),
      },
    )
    .post(
      '/api/v1/server-keys',
      async ({ body, principal, set }) => {
        checkCeiling(principal, body.scopes)
        set.status = 201
        const { token, ...made } = await auth.serverKeys.create(
          body.name,
          body.scopes,
          principal.username,
          principal,
        )
        return ok({ ...made, key: token }, 'server key created')
      },
      {
        permission: 'apikeys:write',
        body: ScopedBody,
        detail: tag(
          'Create a server key (spec 2 X-API-Key): secret, scoped, shown only in this answer',
          'Sent as `X-API-Key: lsk_...` by servers calling the notification service. Scopes config, trigger and query ' +
            'do not imply each other; a key reaches exactly the `appScope` routes of its scopes. A caller may give only ' +
            'scopes whose routes its own roles reach (403 naming the permissions otherwise): a developer makes query keys, ' +
            'an admin any.',
          {
            '201': { description: 'Created; `data.key` is the key, shown once' },
            '403': { description: 'A scope beyond the caller' },
          },
        ),
      },
    )
    .get(
      '/api/v1/server-keys',
      async ({ query }) => {
        const { items: keys, next_after } = await paged(query, (p) => auth.serverKeys.list(p))
        return ok({ keys, count: keys.length, ...(next_after ? { next_after } : {}) })
      },
      {
        permission: 'apikeys:read',
        query: KeyPage,
        detail: tag('Server keys (without their secrets)', pageNote),
      },
    )
    .delete(
      '/api/v1/server-keys/:id',
      async ({ params }) => ok(await auth.revokeScoped(auth.serverKeys, params.id), 'server key revoked'),
      {
        permission: 'apikeys:write',
        params: Id,
        detail: tag('Revoke a server key; it stops working at once, on every instance', undefined, {
          '404': { description: 'No such server key' },
        }),
      },
    )
}
