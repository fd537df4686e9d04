import { Elysia } from 'elysia'
import { Unauthorized } from '../http'
import { type Limiter, rateHeaders } from '../ratelimit'
import type { Permission } from './roles'
import { type AppScopeOption, AuthService, type Principal } from './service'

type Headers = Record<string, string | undefined>

/**
 * Counts a request against its principal's budget (the admin token is exempt), sets the
 * X-RateLimit-* headers, and throws 429 with Retry-After past the limit.
 */
export function rateLimiting(limiter: Limiter) {
  return async (principal: Principal, headers: Record<string, unknown>) => {
    if (!limiter.enabled || principal.kind === 'admin') return
    Object.assign(headers, rateHeaders(await limiter.hit(`${principal.kind}:${principal.id}`)))
  }
}

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
 * Bearer JWT (or the `x-admin-token`) whose roles grant it; `{ apiKey: true }` needs an
 * `x-api-key`; `{ appScope: 'trigger' }` follows spec 2's application-token rules. Each puts
 * `principal` in the handler context and counts the request against its rate limit.
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
      // Returning nothing lets the default body parser run afterwards.
      async parse(ctx: Parameters<typeof decide>[0]) {
        await decide(ctx)
      },
      transform: decide,
      async resolve(ctx: Parameters<typeof decide>[0]) {
        await decide(ctx)
        return { principal: (decided.get(ctx.request) ?? undefined) as P }
      },
    }
  }
  return new Elysia({ name: 'liveops.auth-guard' }).macro({
    permission: (permission: Permission) => {
      d.auth.permissions.check(permission)
      return hooks(
        (headers, request) => {
          const who =
            d.auth.verifyAccess(AuthService.bearer(headers)) ??
            d.auth.verifyAdminToken(headers['x-admin-token'])
          if (who) d.identified?.set(request, who)
          return d.auth.authorize(who, permission)
        },
        [{ bearer: [] }, { adminToken: [] }],
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
      const keys = scope === 'query' || scope === 'trigger' ? [{ apiKey: [] }] : []
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
