import { Forbidden } from '../http'

/**
 * The kinds of credential core knows, each with a fixed reach (docs/security.md):
 * - `user`: a user's access token (JWT), reaching what the user's roles grant;
 * - `admin`: the `x-admin-token` of internal services, an administrator everywhere;
 * - `sdkKey`: an SDK key (`x-api-key: lok_...`), public, bound to one game and environment,
 *   reaching only the SDK surface;
 * - `serverKey`: a server key (`x-api-key: lsk_...`), secret, reaching the notification
 *   service's routes of its scopes;
 * - `appToken`: an application token (`Bearer lat_...` or `X-App-Token`), the same reach as a
 *   server key of the same scopes.
 */
export type PrincipalKind = 'user' | 'admin' | 'sdkKey' | 'serverKey' | 'appToken'

/** Who made a request. */
export interface Principal {
  kind: PrincipalKind
  id: string
  username: string
  roles: string[]
  /** SDK keys are bound to one game and environment. */
  gameId?: string
  environment?: string
  /** The login family of a user's access token (every token rotated from one login). */
  family?: string
  /**
   * A user's access token: the token generation it was signed with. A write that grants trust
   * compares it with the store's, in its transaction (core/auth/caller.ts).
   */
  gen?: number
}

/** The answer to a valid credential of a kind a route does not take: 403 naming the kind. */
export const REACH: Record<Exclude<PrincipalKind, 'user'>, string> = {
  sdkKey:
    'an SDK key reaches only the SDK surface (public config, assign, /v1/batch, /v1/logs, /v1/traces) of its own game and environment',
  serverKey:
    'a server key reaches only the notification service routes of its scopes (config, trigger, query)',
  appToken:
    'an application token reaches only the notification service routes of its scopes (config, trigger, query)',
  admin: "the admin token names no user: this route takes a user's access token",
}
export const wrongKind = (kind: Exclude<PrincipalKind, 'user'>) =>
  new Forbidden(REACH[kind], 'wrong_credential_kind')
