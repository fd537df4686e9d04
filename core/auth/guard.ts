import { Elysia } from 'elysia'
import { Unauthorized } from '../http'
import { type Limiter, rateHeaders } from '../ratelimit'
import type { Permission } from './roles'
import { type AppScopeOption, AuthService, type Principal, userPermission } from './service'

type Headers = Record<string, string | undefined>

/**
 * Counts a request against the budget of `key` (`kind:id`), sets the X-RateLimit-* headers, and
 * throws 429 with Retry-After past the limit.
 */
export function bucketCounting(limiter: Limiter) {
  // Synchronous when the limiter is (core's in-memory one) or off: a fast route awaits nothing.
  return (key: string, headers: Record<string, unknown>): void | Promise<void> => {
    if (!limiter.enabled) return
    const d = limiter.hit(key)
    if (!(d instanceof Promise)) {
      Object.assign(headers, rateHeaders(d))
      return
    }
    return d.then((r) => {
      Object.assign(headers, rateHeaders(r))
    })
  }
}

/** `bucketCounting` under the principal's own key; the admin token is exempt. */
export function rateLimiting(limiter: Limiter) {
  const count = bucketCounting(limiter)
  return (principal: Principal, headers: Record<string, unknown>): void | Promise<void> =>
    principal.kind === 'admin' ? undefined : count(`${principal.kind}:${principal.id}`, headers)
}

/** What the OpenAPI description shows as the security of a `permission` route. */
export const PERMISSION_SECURITY: Array<Record<string, string[]>> = [{ bearer: [] }, { adminToken: [] }]

/**
 * `sdkOr`: a route of the SDK surface that users may call too (experiment assignment). `owner`
 * names the game and environment of the resource the request is about (throwing 404 when there
 * is none); an SDK key bound elsewhere is 403.
 */
export interface SdkOrOption {
  permission: Permission
  owner: (params: Record<string, string>) => Promise<{ gameId: string; environment: string }>
}

/**
 * The `permission` policy, given who the credentials name (a Bearer JWT or the `service_token`
 * cookie, else the `x-admin-token`): 403 when its roles do not grant `permission`; without one,
 * 403 for a valid credential of another kind (an SDK key, a server key, an application token),
 * else 401. Synchronous when it admits the caller: the hot path awaits nothing.
 */
function permitted(
  d: GuardDeps,
  who: Principal | undefined,
  headers: Headers,
  request: Request,
  permission: Permission,
): Principal | Promise<never> {
  if (!who) return d.auth.refuse(headers)
  d.identified?.set(request, who)
  return d.auth.authorize(who, permission)
}

/** The headers a refusal looks at, from a raw request. */
/** The headers the credentials of a raw request are read from (the cookie's site check among them). */
const rawHeaders = (h: globalThis.Headers): Headers => {
  const out: Headers = {}
  for (const name of [
    'authorization',
    'cookie',
    'x-api-key',
    'x-app-token',
    'origin',
    'host',
    'x-forwarded-host',
    'sec-fetch-site',
  ])
    out[name] = h.get(name) ?? undefined
  return out
}

/** `AuthService.bearer` over a raw request's headers. */
const rawBearer = (h: globalThis.Headers): string | undefined => AuthService.bearer(rawHeaders(h))

/**
 * Who a raw request's user credentials name (a Bearer JWT, the `service_token` cookie sent from
 * this site, else the `x-admin-token`), or undefined; refuses nobody (a public route's detail).
 */
export function requestPrincipal(auth: AuthService, request: Request): Principal | undefined {
  const h = request.headers
  return auth.verifyAccess(rawBearer(h)) ?? auth.verifyAdminToken(h.get('x-admin-token') ?? undefined)
}

/**
 * The `permission` macro for a raw request, for routes served from Bun's native router
 * (`ctx.fastRoute`), where no Elysia hook runs: the same credentials, the same 401 and 403, the
 * same count against the rate limit. `permission(name)` checks the name once (an undeclared area
 * fails at setup) and returns the per-request check, which answers the principal, synchronously
 * when the limiter is synchronous, fills `headers` with the X-RateLimit-* headers to send, and
 * throws 401, 403 or 429 (the fast route maps them to the path's error body).
 */
export function requestGuard(d: GuardDeps) {
  const count = rateLimiting(d.limiter)
  return {
    /**
     * Counts a request of a credential that is no principal (an agent's) in the same bucket as
     * users and keys, under `key`: `rateLimiting`'s headers and 429.
     */
    count: bucketCounting(d.limiter),
    permission(permission: Permission) {
      d.auth.permissions.check(permission)
      return (request: Request, headers: Record<string, string>): Principal | Promise<Principal> => {
        const who = requestPrincipal(d.auth, request)
        const principal = permitted(d, who, rawHeaders(request.headers), request, permission)
        if (principal instanceof Promise) return principal
        const counted = count(principal, headers)
        return counted instanceof Promise ? counted.then(() => principal) : principal
      }
    },
  }
}
export type RequestGuard = ReturnType<typeof requestGuard>

export interface GuardDeps {
  auth: AuthService
  limiter: Limiter
  /**
   * Filled with who a request authenticated as, also when the permission then refused it: the
   * audit trail of a 403 names its caller.
   */
  identified?: WeakMap<Request, Principal>
}

/**
 * The per-route policy, defined once for every plugin: `{ permission: 'games:write' }` needs a
 * Bearer JWT (or the `x-admin-token`) whose roles grant it; `{ apiKey: true }` needs an SDK key;
 * `{ sdkOr: { permission, owner } }` either, an SDK key only for its own game and environment;
 * `{ appScope: 'trigger' }` follows spec 2's rules (application tokens and server keys by scope,
 * users by permission). A valid credential of a kind the route does not take is 403 naming the
 * kind. Each puts `principal` in the handler context and counts the request against its rate
 * limit.
 *
 * Who is asking is decided before the request is read: in the `parse` hook (requests with a
 * body, before it is parsed) or the `transform` hook (before query and params are validated),
 * whichever runs first. So an anonymous caller gets 401, never a 400 that describes the schema,
 * and a client's refresh-on-401 fires even when its body is wrong.
 */
export function authGuard(d: GuardDeps) {
  const count = rateLimiting(d.limiter)
  const decided = new WeakMap<Request, Principal | null>()
  // What the OpenAPI description shows as the route's security (core/openapi.ts keeps it).
  const hooks = <P extends Principal | undefined>(
    who: (headers: Headers, request: Request) => P | Promise<P>,
    security: Array<Record<string, string[]>>,
    /** A check that needs the route's params, once the caller is known. */
    then?: (principal: P, params: Record<string, string>) => Promise<void>,
  ) => {
    const decide = async (ctx: {
      request: Request
      headers: Headers
      set: { headers: Record<string, unknown> }
    }) => {
      if (decided.has(ctx.request)) return
      const principal = await who(ctx.headers, ctx.request)
      decided.set(ctx.request, principal ?? null)
      if (principal) await count(principal, ctx.set.headers)
    }
    return {
      detail: { security },
      // Returning nothing lets the default body parser run afterwards. Arrow functions: Elysia
      // reads each hook's source to infer what it uses, and could not parse the compiled
      // binary's minified methods (a warning asking to report it, at the first request).
      parse: async (ctx: Parameters<typeof decide>[0]) => {
        await decide(ctx)
      },
      // Path params are known here, the query and body not yet validated: a check that needs
      // the resource (`then`) still answers before any 400.
      transform: async (ctx: Parameters<typeof decide>[0]) => {
        await decide(ctx)
        if (then)
          await then(
            (decided.get(ctx.request) ?? undefined) as P,
            (ctx as { params?: Record<string, string> }).params ?? {},
          )
      },
      resolve: async (ctx: Parameters<typeof decide>[0]) => {
        await decide(ctx)
        return { principal: (decided.get(ctx.request) ?? undefined) as P }
      },
    }
  }
  return new Elysia({ name: 'liveops.auth-guard' }).macro({
    permission: (permission: Permission) => {
      d.auth.permissions.check(permission)
      return hooks(
        (headers, request) =>
          permitted(
            d,
            d.auth.verifyAccess(AuthService.bearer(headers)) ??
              d.auth.verifyAdminToken(headers['x-admin-token']),
            headers,
            request,
            permission,
          ),
        PERMISSION_SECURITY,
      )
    },
    sdkOr: (option: SdkOrOption) => {
      d.auth.permissions.check(option.permission)
      return hooks(
        async (headers, request) => {
          const user =
            d.auth.verifyAccess(AuthService.bearer(headers)) ??
            d.auth.verifyAdminToken(headers['x-admin-token'])
          if (user || !headers['x-api-key']) return permitted(d, user, headers, request, option.permission)
          const key = await d.auth.verifyApiKey(headers['x-api-key'])
          if (!key) throw new Unauthorized('missing or invalid x-api-key', 'invalid_api_key')
          d.identified?.set(request, key)
          return key
        },
        [...PERMISSION_SECURITY, { apiKey: [] }],
        async (principal, params) => {
          if (principal.kind === 'sdkKey') d.auth.sdkReach(principal, await option.owner(params))
        },
      )
    },
    apiKey: (_: true) =>
      hooks(
        async (headers) => {
          const principal = await d.auth.verifyApiKey(headers['x-api-key'])
          if (!principal) throw new Unauthorized('missing or invalid x-api-key', 'invalid_api_key')
          return principal
        },
        [{ apiKey: [] }],
      ),
    appScope: (option: AppScopeOption) => {
      if (typeof option !== 'string') d.auth.permissions.check(option.permission)
      const scope = typeof option === 'string' ? option : option.scope
      if (scope !== 'admin') d.auth.scopeNeeds(scope, userPermission(option))
      const keys = scope === 'admin' ? [] : [{ serverKey: [] }]
      return hooks(
        (headers, request) => {
          if (d.identified) {
            const who = d.auth.verifyAccess(AuthService.bearer(headers))
            if (who) d.identified.set(request, who)
          }
          return d.auth.authenticateApp(option, headers)
        },
        [{ appToken: [] }, { bearer: [] }, { adminToken: [] }, ...keys],
      )
    },
  })
}
