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
}
