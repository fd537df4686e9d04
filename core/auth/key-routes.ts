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
      async () => {
        const tokens = await auth.appTokens.list()
        return ok({ tokens, count: tokens.length })
      },
      { appScope: 'admin', detail: tag('Application tokens (without their secrets)') },
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
      async () => {
        const keys = await auth.serverKeys.list()
        return ok({ keys, count: keys.length })
      },
      { permission: 'apikeys:read', detail: tag('Server keys (without their secrets)') },
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
