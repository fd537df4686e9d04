import { Elysia } from 'elysia'
import { Unauthorized } from '../http'
import { type RateLimiter, rateHeaders } from '../ratelimit'
import type { Permission } from './roles'
import { AuthService, type Principal } from './service'

/**
 * The per-route policy, defined once: `{ permission: 'games:write' }` needs a Bearer JWT (or
 * the `x-admin-token`) whose roles grant it; `{ apiKey: true }` needs an `x-api-key`. Both put
 * `principal` in the handler context and count the request against its rate limit, answering
 * with the X-RateLimit-* headers.
 */
/**
 * Counts a request against its principal's budget (the admin token is exempt), sets the
 * X-RateLimit-* headers, and throws 429 with Retry-After past the limit.
 */
export function rateLimiting(limiter: RateLimiter) {
  return (principal: Principal, headers: Record<string, unknown>) => {
    if (!limiter.enabled || principal.kind === 'admin') return
    Object.assign(headers, rateHeaders(limiter.hit(`${principal.kind}:${principal.id}`)))
  }
}

export function authGuard(auth: AuthService, limiter: RateLimiter) {
  const count = rateLimiting(limiter)
  const limit = (principal: Principal, set: { headers: Record<string, unknown> }) =>
    count(principal, set.headers)
  return new Elysia({ name: 'liveops.auth-guard' }).macro({
    permission: (permission: Permission) => ({
      resolve({ headers, set }) {
        const principal = auth.authorize(
          auth.verifyAccess(AuthService.bearer(headers)) ?? auth.verifyAdminToken(headers['x-admin-token']),
          permission,
        )
        limit(principal, set)
        return { principal }
      },
    }),
    apiKey: {
      async resolve({ headers, set }) {
        const principal = await auth.verifyApiKey(headers['x-api-key'])
        if (!principal) throw new Unauthorized('missing or invalid x-api-key', 'invalid_api_key')
        limit(principal, set)
        return { principal }
      },
    },
  })
}
