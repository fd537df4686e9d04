import { Elysia, t } from 'elysia'
import type { RouteGuard } from '../audit'
import type { Bus } from '../bus'
import { NotFound, TooManyRequests, Unauthorized } from '../http'
import type { Limiter } from '../ratelimit'
import { Enum, PageNumber } from '../schema'
import { Secret } from '../secrets'
import { bucketCounting } from './guard'
import { ROLES } from './roles'
import { AuthService, type Principal } from './service'
import { clientAddress } from './throttle'

const Role = Enum(ROLES)
const UserOut = t.Object({ id: t.String(), email: t.String(), name: t.String(), roles: t.Array(t.String()) })
const UserFull = t.Object({
  id: t.String(),
  email: t.String(),
  username: t.String(),
  name: t.String(),
  roles: t.Array(t.String()),
  disabled: t.Boolean(),
  createdAt: t.String(),
  updatedAt: t.String(),
})
const Tokens = t.Object({
  token: t.String(),
  refreshToken: t.String(),
  expiresIn: t.Integer({ description: 'seconds until the access token expires' }),
  user: UserOut,
})
const V1User = t.Object({ id: t.String(), username: t.String(), role: t.String() })

const THROTTLE_DOC =
  'Failed attempts are limited per account and per client address: past `auth.login_throttle` ' +
  'failures the answer is 429 `too_many_attempts` with Retry-After, doubling from 1 s up to a cap ' +
  '(15 min for the address that keeps failing, 1 min for an account attacked from many addresses, ' +
  'never for an address that logged into it before). Unknown accounts take as long as known ones.'
const RENEWAL_429 =
  "Too many failed attempts (too_many_attempts), or the user's rate limit spent (rate_limit_exceeded): a renewal counts in it as the user's other calls do, before the token is used; Retry-After"
const USER_RULES =
  "Beyond `users:write`: nobody grants a role they do not hold (a role is held when the caller's roles grant every " +
  'permission it grants; admin holds all); only an admin creates, changes, disables or deletes an admin or sets ' +
  "another user's password or enables a disabled user; nobody changes their own roles (403). A user changing its " +
  'own password sends the current one as `currentPassword` (400 without it, 403 `invalid_credentials` when wrong, ' +
  'counted by the login throttle). The last active admin cannot be disabled, demoted or deleted (409).'

/**
 * Login and user management of spec 1 (`/api/auth`, `/api/users`) and the notification service's
 * own login family (`/api/v1/auth`, spec 2 section 5). Keys and tokens: core/auth/key-routes.ts.
 */
export function authRoutes(
  auth: AuthService,
  guard: RouteGuard,
  opts: { trustForwardedFor: boolean; bus?: Bus; limiter?: Limiter } = { trustForwardedFor: false },
) {
  const address = (request: Request, server: Parameters<typeof clientAddress>[1]) =>
    clientAddress(request, server, opts.trustForwardedFor)
  // A renewal counts in its user's rate-limit budget as the user's other calls do: rotations were
  // unlimited (5,341 a second from one viewer, each a row; audit 19 L2).
  const count = opts.limiter ? bucketCounting(opts.limiter) : () => undefined
  const charge = (headers: Record<string, unknown>) => (userId: string) => count(`user:${userId}`, headers)
  /** A password check that leaves an audit entry (`auth.login`), refused attempts included. */
  const login = async (by: 'email' | 'username', value: string, password: string, ip: string) => {
    try {
      const user = await auth.checkPassword(by, value, password, ip)
      void opts.bus?.emit('audit', {
        actor_kind: 'user',
        actor_id: user.id,
        actor_name: user.username,
        action: 'auth.login',
        target: value,
        ip,
        ok: true,
      })
      return user
    } catch (e) {
      // A locked account or address is not checked, so its refusals are not entries: one
      // address's 1,869 refused attempts in 10 s were 1,869 rows of the audit log (the throttle
      // logs each lock once).
      if (e instanceof TooManyRequests) throw e
      void opts.bus?.emit('audit', {
        actor_kind: 'user',
        actor_name: value,
        action: 'auth.login',
        target: value,
        ip,
        ok: false,
        details: { reason: (e as Error).message },
      })
      throw e
    }
  }
  const v1User = (u: { id: string; username: string; roles: string[] }) => ({
    id: u.id,
    username: u.username,
    role: auth.primaryRole(u.roles),
  })
  return new Elysia({ name: 'liveops.auth' })
    .use(guard)
    .model({ 'auth.Tokens': Tokens, 'auth.User': UserFull })
    .post(
      '/api/auth/login',
      async ({ body, request, server }) =>
        auth.issue(await login('email', body.email, body.password, address(request, server))),
      {
        // As long as a user's may be (a longer one is no user's, and was kept in the audit log whole).
        body: t.Object({
          email: t.String({ minLength: 1, maxLength: 191 }),
          password: t.String({ minLength: 1 }),
        }),
        response: { 200: 'auth.Tokens' },
        detail: {
          tags: ['auth'],
          summary: 'Log in with email and password; 401 on wrong credentials',
          description: THROTTLE_DOC,
          responses: {
            401: { description: 'Wrong credentials' },
            429: { description: 'Too many failed attempts (too_many_attempts, Retry-After)' },
          },
        },
      },
    )
    .post(
      '/api/auth/refresh',
      ({ body, request, server, set }) =>
        auth.refresh(body.refreshToken, address(request, server), charge(set.headers)),
      {
        body: t.Object({ refreshToken: t.String({ minLength: 1 }) }),
        response: { 200: 'auth.Tokens' },
        detail: {
          tags: ['auth'],
          summary:
            'Rotate a refresh token: answers a new access token and a new refresh token; a reused refresh token revokes its whole session family (401)',
          description: THROTTLE_DOC,
          responses: {
            401: { description: 'Unknown, expired or reused refresh token' },
            429: { description: RENEWAL_429 },
          },
        },
      },
    )
    .post(
      '/api/auth/logout',
      async (c) => {
        const who =
          auth.verifyAccess(AuthService.bearer(c.headers)) ?? (await auth.refuse(c.headers, { admin: true }))
        // Named in the entry core derives for this write (`auth.logout` read as anonymous before).
        ;(c as { principal?: Principal }).principal = who
        await auth.signOut(who)
        c.set.status = 204
      },
      {
        detail: {
          tags: ['auth'],
          summary: 'Sign out: ends the login family of the Bearer access token on every instance',
          description:
            "Every access and refresh token of this login stops working at once; other logins of the user are untouched. 204 on success; 401 without a signed-in user's access token.",
          security: [{ bearer: [] }],
          responses: {
            204: { description: 'Signed out' },
            401: { description: 'Missing, invalid or expired token' },
          },
        },
      },
    )
    .post(
      '/api/v1/auth/login',
      async ({ body, request, server }) => {
        const user = await login('username', body.username, body.password, address(request, server))
        // A login family like spec 1's, without a refresh token to hand out (one was stored all
        // the same): ending the family (or the user's trust) ends every token renewed from this one.
        return { token: auth.startLogin(user), user: v1User(user) }
      },
      {
        body: t.Object({
          username: t.String({ minLength: 1, maxLength: 64 }),
          password: t.String({ minLength: 1 }),
        }),
        response: { 200: t.Object({ token: t.String(), user: V1User }) },
        detail: {
          tags: ['auth'],
          summary: 'Notification-service login by username (no envelope)',
          description: THROTTLE_DOC,
          responses: {
            401: { description: 'Wrong credentials' },
            429: { description: 'Too many failed attempts (too_many_attempts, Retry-After)' },
          },
        },
      },
    )
    .post(
      '/api/v1/auth/refresh',
      async ({ headers, query, request, server, set }) => {
        const from = address(request, server)
        await auth.throttle.check(from)
        const principal = auth.verifyAccess(AuthService.bearer(headers, query))
        if (!principal) {
          await auth.throttle.fail(from, 'token refresh')
          return auth.refuse(headers, { admin: true })
        }
        await charge(set.headers)(principal.id)
        // A login ends `refresh_ttl_s` after it began, however often its tokens were renewed.
        if (principal.family && auth.loginEnds(principal.family) <= Date.now())
          throw new Unauthorized('the login reached its lifetime (auth.refresh_ttl_s): sign in again')
        const user = await auth.users.maybe(principal.id)
        if (!user || user.disabled) throw new Unauthorized('user no longer exists or is disabled')
        // The renewed token stays in its login family, so ending the family ends it too.
        return { code: 0, message: 'ok', data: { token: auth.accessToken(user, principal.family) } }
      },
      {
        // A token used, not a change: refused ones are throttled and logged by the throttle.
        audit: false,
        detail: {
          tags: ['auth'],
          summary: 'New token from a valid one (Bearer, cookie service_token or query token)',
          description: THROTTLE_DOC,
          security: [{ bearer: [] }],
          responses: {
            401: { description: 'Missing, invalid or expired token' },
            429: { description: RENEWAL_429 },
          },
        },
      },
    )
    .get(
      '/api/v1/auth/me',
      async ({ headers, query }) => {
        const principal =
          auth.verifyAccess(AuthService.bearer(headers, query)) ??
          (await auth.refuse(headers, { admin: true }))
        const user = await auth.getUser(principal.id).catch((e: unknown) => {
          // A store fault is a store fault (503), not a deleted user.
          throw e instanceof NotFound ? new NotFound('user no longer exists') : e
        })
        return { code: 0, message: 'ok', data: v1User(user) }
      },
      {
        detail: {
          tags: ['auth'],
          summary: 'The current user: 401 without a valid token, 404 when the user was deleted',
          security: [{ bearer: [] }],
          responses: { 404: { description: 'The user was deleted' } },
        },
      },
    )
    .get(
      '/api/auth/permissions',
      async ({ headers }) => {
        const principal = await auth.identify(headers)
        const table = auth.permissions.table()
        const held: string[] = []
        for (const area of Object.keys(table))
          for (const action of ['read', 'write'] as const)
            if (auth.permissions.allows(principal.roles, `${area}:${action}`)) held.push(`${area}:${action}`)
        return { roles: principal.roles, permissions: held, table }
      },
      {
        response: t.Object({
          roles: t.Array(t.String(), { description: 'the roles of the caller' }),
          permissions: t.Array(t.String(), { description: '`area:read` and `area:write` the caller holds' }),
          table: t.Record(t.String(), t.Object({ read: t.Array(t.String()), write: t.Array(t.String()) }), {
            description: 'every permission area with the roles that read and write it',
          }),
        }),
        detail: {
          tags: ['auth'],
          summary: 'What the caller may do: its roles, the permissions they grant, and the whole role table',
          description:
            'Clients (the console, scripts) show and enable only what the caller may do. Any signed-in user; 401 without a valid token.',
          security: [{ bearer: [] }, { adminToken: [] }],
        },
      },
    )
    .post('/api/users', ({ body, principal }) => auth.createUser(body, undefined, principal), {
      permission: 'users:write',
      // Closed, as the family's other bodies: a field the route does not take is a 400 naming it.
      body: t.Object(
        {
          // MySQL keeps emails in a VARCHAR(191), the narrowest of the three engines.
          email: t.String({ minLength: 3, maxLength: 191 }),
          username: t.Optional(t.String({ minLength: 1, maxLength: 64 })),
          name: t.Optional(t.String({ maxLength: 200 })),
          password: t.String({ minLength: 8, description: 'at least 8 characters' }),
          roles: t.Array(Role, { minItems: 1 }),
        },
        { additionalProperties: false },
      ),
      response: { 200: 'auth.User' },
      detail: {
        tags: ['users'],
        summary: 'Create a user (admin, operator)',
        description: USER_RULES,
        responses: {
          403: { description: 'A role the caller does not hold, or an admin made by a non-admin' },
        },
      },
    })
    .get(
      '/api/users',
      async ({ query }) => {
        const page = query.page ?? 0
        const size = query.size ?? 20
        return { ...(await auth.listUsers(page, size)), page, size }
      },
      {
        permission: 'users:read',
        query: t.Object({
          page: t.Optional(PageNumber(0)),
          size: t.Optional(t.Integer({ minimum: 1, maximum: 200 })),
        }),
        detail: { tags: ['users'], summary: 'List users, paged (admin, operator)' },
      },
    )
    .get('/api/users/:id', ({ params }) => auth.getUser(params.id), {
      permission: 'users:read',
      response: { 200: 'auth.User' },
      detail: { tags: ['users'], summary: 'Read a user' },
    })
    .put(
      '/api/users/:id',
      ({ params, body, principal, request, server }) =>
        auth.updateUser(params.id, body, principal, address(request, server)),
      {
        permission: 'users:write',
        // Closed: `email` or `username` sent here answered 200 and changed nothing (audit L5);
        // neither can be changed once the user exists, so they are refused, naming the field.
        body: t.Object(
          {
            name: t.Optional(t.String({ maxLength: 200 })),
            roles: t.Optional(t.Array(Role, { minItems: 1 })),
            password: t.Optional(t.String({ minLength: 8 })),
            currentPassword: t.Optional(
              Secret(
                t.String({
                  minLength: 1,
                  maxLength: 1024,
                  description: 'required to change your own password',
                }),
              ),
            ),
            disabled: t.Optional(t.Boolean()),
          },
          { additionalProperties: false },
        ),
        response: { 200: 'auth.User' },
        detail: {
          tags: ['users'],
          summary:
            "Update name, roles, password or the disabled flag; a new password, other roles or disabling end the user's sessions at once",
          description: USER_RULES,
          responses: {
            403: { description: 'Refused by the rules above' },
            409: { description: 'The last active admin would be disabled or demoted' },
          },
        },
      },
    )
    .post(
      '/api/users/:id/disable',
      ({ params, principal }) => auth.updateUser(params.id, { disabled: true }, principal),
      {
        permission: 'users:write',
        response: { 200: 'auth.User' },
        detail: {
          tags: ['users'],
          summary: 'Disable a user: its tokens stop working at once',
          description: USER_RULES,
          responses: {
            403: { description: 'An admin disabled by a non-admin' },
            409: { description: 'The last active admin' },
          },
        },
      },
    )
    .delete(
      '/api/users/:id',
      async ({ params, set, principal }) => {
        await auth.deleteUser(params.id, principal)
        set.status = 204
      },
      {
        permission: 'users:write',
        detail: {
          tags: ['users'],
          summary: 'Delete a user; its tokens stop working at once',
          description: USER_RULES,
          responses: {
            403: { description: 'An admin deleted by a non-admin' },
            409: { description: 'The last active admin' },
          },
        },
      },
    )
}
