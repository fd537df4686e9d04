import { Forbidden, Unauthorized } from '../http'
import { APP_TOKEN_PREFIX, type AppPrincipal, SERVER_KEY_PREFIX, type Scope } from './app-tokens'
import { type Principal, wrongKind } from './principal'
import type { Permission } from './roles'
import type { AuthService } from './service'

/*
 * The `appScope` policy of spec 2 section 5: application tokens and server keys by scope, users
 * by permission. AuthService.authenticateApp answers with it.
 */

/** What an `appScope` route needs: one application-token scope (or an administrator). */
export type AppNeed = Scope | 'admin'
/**
 * `appScope: 'trigger'` checks users against the notification service's area (`notify`, spec 2);
 * another API family names the permission users need: `{ scope: 'config', permission: 'rules:write' }`.
 */
export type AppScopeOption = AppNeed | { scope: AppNeed; permission: Permission }

type Headers = Record<string, string | undefined>

/**
 * An application token (`Authorization: Bearer lat_...` or `X-App-Token`) or a server key
 * (`X-API-Key: lsk_...`) needs exactly the route's scope; with `anonymousAppScopes` anyone may
 * call (token management stays admin-only); a user token (or the admin token) needs the route's
 * permission; an SDK key is 403 (it reaches only the SDK surface). `bearer` is the request's
 * bearer token (AuthService.bearer).
 */
export async function authenticateApp(
  auth: Pick<
    AuthService,
    | 'appTokens'
    | 'serverKeys'
    | 'sdkKeys'
    | 'anonymousAppScopes'
    | 'verifyAccess'
    | 'verifyAdminToken'
    | 'authorize'
  >,
  bearer: string | undefined,
  option: AppScopeOption,
  headers: Headers,
): Promise<Principal | undefined> {
  const need = typeof option === 'string' ? option : option.scope
  const app = headers['x-app-token'] ?? (bearer?.startsWith(APP_TOKEN_PREFIX) ? bearer : undefined)
  if (app) {
    const p = await auth.appTokens.verify(app)
    if (!p) throw new Unauthorized('invalid or revoked application token')
    return scoped(p, need, 'application token')
  }
  const key = headers['x-api-key']
  if (key?.startsWith(SERVER_KEY_PREFIX)) {
    const p = await auth.serverKeys.verify(key)
    if (!p) throw new Unauthorized('invalid or revoked server key', 'invalid_api_key')
    return scoped(p, need, 'server key')
  }
  if (auth.anonymousAppScopes && need !== 'admin') return undefined
  const user = auth.verifyAccess(bearer) ?? auth.verifyAdminToken(headers['x-admin-token'])
  if (user) {
    if (need === 'admin') {
      if (!user.roles.includes('admin')) throw new Forbidden('administrator role required')
      return user
    }
    return auth.authorize(user, userPermission(option))
  }
  if (key && (await auth.sdkKeys.verify(key))) throw wrongKind('sdkKey')
  throw new Unauthorized(
    'missing, invalid or expired token (Authorization: Bearer, X-App-Token, or X-API-Key with a server key)',
  )
}

/** What users need on an `appScope` route: the option's permission, else the notification service's area. */
export function userPermission(option: AppScopeOption): Permission {
  if (typeof option !== 'string') return option.permission
  return option === 'query' ? 'notify:read' : 'notify:write'
}

function scoped(p: AppPrincipal, need: AppNeed, label: string): AppPrincipal {
  if (need === 'admin')
    throw new Forbidden(`a ${label} cannot manage credentials: administrator role required`)
  if (!p.scopes.includes(need)) throw new Forbidden(`${label} lacks scope '${need}'`)
  return p
}
