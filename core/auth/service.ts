import { timingSafeEqual } from 'node:crypto'
import type { Changes } from '../changes'
import { type Db, newId } from '../db'
import { keptKey } from '../digest'
import { Forbidden, Unauthorized, invalidField } from '../http'
import type { Logger } from '../log'
import { type AccessSubject, AccessTokens } from './access'
import { type AppScopeOption, authenticateApp } from './app-scope'
import {
  APP_TOKEN_PREFIX,
  SERVER_KEY_PREFIX,
  type Scope,
  type ScopedTokenStore,
  scopedTokenStore,
} from './app-tokens'
import { bearerOf } from './bearer'
import { type Principal, wrongKind } from './principal'
import { type Permission, Permissions, primaryRole } from './roles'
import { type ApiKey, type KeyFilter, type SdkKeyStore, sdkKeyStore } from './sdk-keys'
import { type Charge, Sessions, type Tokens } from './sessions'
import { LoginThrottle, type ThrottleSettings, type ThrottleStore } from './throttle'
import { UserRules } from './user-rules'
import {
  type NewUser,
  type StoredUser,
  type User,
  type UserPatch,
  type UserStore,
  checkRoles,
  newUserFields,
  publicUser,
  userStore,
} from './users'

export type { Principal, PrincipalKind } from './principal'
export { REACH } from './principal'
export type { AppNeed, AppScopeOption } from './app-scope'
export { userPermission } from './app-scope'
export { cookieFromOwnSite } from './bearer'
export type { ApiKey } from './sdk-keys'
export type { Tokens } from './sessions'
export type { NewUser, User } from './users'

/**
 * Verified against when no user matches, so an unknown account costs a known one's time. A hash
 * of a random password nobody kept, made with `Bun.password.hash`'s defaults (the parameters
 * every user's hash has); a constant, so building an app costs no hashing.
 */
export const DUMMY_HASH =
  '$argon2id$v=19$m=65536,t=2,p=1$dXijYDDkl+RaPpw38oSOKNYjdSEpiWx/YGcpNhRANgs$7U/TTRNwQJMsGz65VTrCTCM4HM7UeHtGZvnV7XIyw2Y'

export interface AuthSettings {
  jwtSecret: string
  accessTtlS: number
  refreshTtlS: number
  adminToken: string
  throttle: ThrottleSettings
}

type Headers = Record<string, string | undefined>

/**
 * Users, passwords, JWTs, rotating refresh tokens, SDK keys, server keys, application tokens and
 * the admin token: who a request is, and what each kind of credential may reach
 * (docs/security.md). Access tokens are verified from memory (`AccessTokens`); a change of trust
 * reaches every instance through `Sessions`.
 */
export class AuthService {
  /** The role table: core's areas and every enabled plugin's, declared before any route exists. */
  readonly permissions = new Permissions()
  /**
   * Spec 2 `auth.enabled: false` (a setting of the notification service): `appScope` routes other
   * than token management accept anonymous callers. Application tokens are checked all the same.
   */
  anonymousAppScopes = false
  /** Spec 2 application tokens (scopes config, trigger, query). */
  readonly appTokens: ScopedTokenStore
  /** Spec 2 `X-API-Key`: server keys, scoped as application tokens are. */
  readonly serverKeys: ScopedTokenStore
  readonly sdkKeys: SdkKeyStore
  readonly users: UserStore
  readonly rules: UserRules
  /** Failed logins and refreshes per account and client address. */
  readonly throttle: LoginThrottle
  private readonly access: AccessTokens
  private readonly sessions: Sessions

  constructor(
    db: Db,
    readonly settings: AuthSettings,
    log: Logger,
    /** Where failed attempts are counted: the state every instance shares (core/shared.ts); memory when absent. */
    throttleStore?: ThrottleStore,
  ) {
    this.appTokens = scopedTokenStore(db, 'appToken')
    this.serverKeys = scopedTokenStore(db, 'serverKey')
    this.sdkKeys = sdkKeyStore(db)
    this.users = userStore(db)
    this.rules = new UserRules(this.permissions)
    this.throttle = new LoginThrottle(settings.throttle, log, throttleStore)
    this.access = new AccessTokens(settings.jwtSecret, settings.accessTtlS)
    this.sessions = new Sessions(
      db,
      this.users,
      this.access,
      settings.refreshTtlS,
      this.throttle,
      log,
      () => {
        this.sdkKeys.forget()
        this.serverKeys.forget()
        this.appTokens.forget()
      },
    )
  }

  /** Loads the trust the store withdrew; with `changes`, follows the other instances too. */
  async init(changes?: Changes): Promise<void> {
    await this.sessions.start(changes)
  }

  stop(): void {
    this.sessions.stop()
  }

  /** Reads what the store changed lately (the safety net for a lost change notice); runs on a timer. */
  sync(): Promise<void> {
    return this.sessions.sync()
  }

  // -- users ----------------------------------------------------------------------------------

  countUsers(): Promise<number> {
    return this.users.count()
  }

  /**
   * `passwordHash`: the hash of `input.password`, when the caller started it earlier (bootstrap).
   * `actor`: who asks (the rules of `UserRules`); absent for the server itself.
   */
  async createUser(input: NewUser, passwordHash?: Promise<string>, actor?: Principal): Promise<User> {
    const { email, username } = newUserFields(input)
    this.rules.create(actor, input.roles)
    const hash = await (passwordHash ?? Bun.password.hash(input.password))
    return publicUser(await this.users.create(input, hash, username, email, actor))
  }

  listUsers(page: number, size: number): Promise<{ items: User[]; total: number }> {
    return this.users.list(page, size)
  }

  async getUser(id: string): Promise<User> {
    return publicUser(await this.users.get(id))
  }

  /**
   * Changes a user. A new password, other roles or disabling end the user's sessions on every
   * instance before this resolves: its access tokens are refused, its refresh tokens revoked.
   */
  async updateUser(id: string, patch: UserPatch, actor?: Principal, address = 'unknown'): Promise<User> {
    if (patch.roles) checkRoles(patch.roles, 'body.roles')
    if (patch.password !== undefined && patch.password.length < 8)
      throw invalidField('body.password', 'must be at least 8 characters')
    const check = (before: User) => this.rules.update(actor, before, patch)
    // Refused before the costly hash; checked again on the row the transaction reads.
    const before = await this.users.get(id)
    check(before)
    if (patch.password !== undefined && actor?.kind === 'user' && actor.id === id)
      await this.confirmOwnPassword(before, patch.currentPassword, address)
    const hash = patch.password !== undefined ? await Bun.password.hash(patch.password) : null
    const { user, trustChanged } = await this.users.update(id, patch, hash, check, actor)
    if (trustChanged || patch.disabled !== undefined)
      await this.sessions.withdrawUser(id, user.tokenGen, !user.disabled)
    return publicUser(user)
  }

  /**
   * A user changing its own password proves it knows the current one, through the login
   * throttle (a stolen session guessing it here is counted and locked as at login).
   */
  private async confirmOwnPassword(user: StoredUser, current: string | undefined, address: string) {
    if (current === undefined)
      throw invalidField('body.currentPassword', 'required to change your own password')
    await this.throttle.attempt(address, user.id, async () => {
      await this.throttle.check(address, user.id)
      if (await Bun.password.verify(current, user.passwordHash))
        return this.throttle.succeed(address, user.id)
      await this.throttle.fail(address, 'login', user.id)
      throw new Forbidden('body.currentPassword: is not your current password', 'invalid_credentials')
    })
  }

  async deleteUser(id: string, actor?: Principal): Promise<void> {
    await this.users.remove(id, (before) => this.rules.remove(actor, before), actor)
    await this.sessions.withdrawUser(id, 0, false)
  }

  // -- login and tokens -----------------------------------------------------------------------

  /**
   * Checks a password by email or username, throttled per account and per client address (see
   * `LoginThrottle`). An unknown user costs the same hash verification as a known one, so the
   * answer's timing does not tell which accounts exist; both answer the same 401.
   */
  async checkPassword(by: 'email' | 'username', value: string, password: string, address = 'unknown') {
    const id = by === 'email' ? value.trim().toLowerCase() : value.trim()
    const user = await this.users.find(by, id)
    // A known user is throttled by its id, so email and username logins share one budget.
    // An unknown name is counted by its digest past 64 characters: the throttle's shared-state
    // keys must fit MySQL's VARCHAR(191) (a 300-character email answered 500, audit-sec2 L2).
    const unknown = keptKey(id, 64)
    const account = user ? user.id : `${by}:${unknown}`
    return this.throttle.attempt(address, account, async () => {
      await this.throttle.check(address, account)
      const valid = await Bun.password.verify(password, user ? user.passwordHash : DUMMY_HASH)
      if (!user || !valid) {
        await this.throttle.fail(address, 'login', account)
        throw new Unauthorized('invalid credentials', 'invalid_credentials')
      }
      // The same answer as a wrong password: a distinct one told a guesser the password was right.
      if (user.disabled) throw new Unauthorized('invalid credentials', 'invalid_credentials')
      await this.throttle.succeed(address, account)
      return user
    })
  }

  /** When the login `family` ends (`refresh_ttl_s` after it began), renewals included. */
  loginEnds(family: string): number {
    return this.sessions.loginEnds(family)
  }

  /** An access token of the user's current generation; `family` ties it to a login. */
  accessToken(user: AccessSubject & { tokenGen?: number }, family?: string): string {
    return this.access.sign(user, user.tokenGen, family)
  }

  /** Spec 1 login answer: an access token and the first refresh token of a new login family. */
  issue(user: StoredUser): Promise<Tokens> {
    return this.sessions.issue(user)
  }

  /** Spec 2 login answer: an access token of a new login family; no refresh token (none is handed out). */
  startLogin(user: StoredUser): string {
    return this.access.sign(user, user.tokenGen, newId())
  }

  /** Ends the login a user access token belongs to: its refresh and access tokens stop working. */
  async signOut(principal: Principal): Promise<void> {
    if (!principal.family) throw new Unauthorized("only a signed-in user's access token can sign out")
    await this.sessions.endFamily(principal.family, principal.id)
  }

  /** `charge`: counts the rotation in its user's rate-limit budget (`Sessions.refresh`). */
  refresh(refreshToken: string, address = 'unknown', charge?: Charge): Promise<Tokens> {
    return this.sessions.refresh(refreshToken, address, charge)
  }

  /** Deletes the refresh tokens nobody can use any more (`Sessions.purge`); a scheduled job. */
  async purgeRefreshTokens(signal?: AbortSignal): Promise<void> {
    await this.sessions.purge(signal)
  }

  /** The principal behind an access token, or undefined when missing, invalid, expired or withdrawn. */
  verifyAccess(token: string | undefined): Principal | undefined {
    return this.access.verify(token)
  }

  /**
   * Bearer header, then the spec 2 cookie `service_token` (on a request from this site only:
   * `cookieFromOwnSite`), then the query parameter `token`.
   */
  static bearer(headers: Headers, query?: Record<string, unknown>): string | undefined {
    return bearerOf(headers, query)
  }

  /** Throws 401 without a principal and 403 when none of its roles grants the permission. */
  authorize(principal: Principal | undefined, permission: Permission): Principal {
    if (!principal) throw new Unauthorized('missing, invalid or expired token')
    if (!this.permissions.allows(principal.roles, permission))
      throw new Forbidden(`permission '${permission}' required`)
    return principal
  }

  /**
   * The refusal of a request no credential the route takes authenticated: 403 naming the kind
   * when it carries a valid credential of another kind (an SDK key, a server key, an application
   * token; `admin` also the admin token), else 401.
   */
  async refuse(headers: Headers, also: { admin?: boolean } = {}): Promise<never> {
    if (also.admin && this.verifyAdminToken(headers['x-admin-token'])) throw wrongKind('admin')
    const bearer = AuthService.bearer(headers)
    const app = headers['x-app-token'] ?? (bearer?.startsWith(APP_TOKEN_PREFIX) ? bearer : undefined)
    if (app && (await this.appTokens.verify(app))) throw wrongKind('appToken')
    const key = headers['x-api-key']
    if (key?.startsWith(SERVER_KEY_PREFIX) && (await this.serverKeys.verify(key)))
      throw wrongKind('serverKey')
    if (key && (await this.sdkKeys.verify(key))) throw wrongKind('sdkKey')
    throw new Unauthorized('missing, invalid or expired token')
  }

  /** The caller of a route that takes users (and the admin token): the principal, or `refuse`. */
  identify(headers: Headers, query?: Record<string, unknown>): Principal | Promise<never> {
    return (
      this.verifyAccess(AuthService.bearer(headers, query)) ??
      this.verifyAdminToken(headers['x-admin-token']) ??
      this.refuse(headers)
    )
  }

  primaryRole = primaryRole

  // -- admin token ----------------------------------------------------------------------------

  verifyAdminToken(value: string | undefined): Principal | undefined {
    const expected = this.settings.adminToken
    if (!expected || !value || value.length !== expected.length) return undefined
    if (!timingSafeEqual(Buffer.from(value), Buffer.from(expected))) return undefined
    return { kind: 'admin', id: 'admin-token', username: 'admin-token', roles: ['admin'] }
  }

  // -- scoped credentials ---------------------------------------------------------------------

  /** Spec 2 section 5: who an `appScope` route's caller is (core/auth/app-scope.ts). */
  authenticateApp(option: AppScopeOption, headers: Headers): Promise<Principal | undefined> {
    return authenticateApp(this, AuthService.bearer(headers), option, headers)
  }

  private reach = new Map<Scope, Set<Permission>>()

  /** Records that a route of `scope` asks users for `permission` (the guard, as routes are defined). */
  scopeNeeds(scope: Scope, permission: Permission): void {
    const set = this.reach.get(scope) ?? new Set()
    this.reach.set(scope, set)
    set.add(permission)
  }

  /** The permissions a key of `scope` stands in for: what the routes of that scope ask of users. */
  scopeReach(scope: Scope): Permission[] {
    return [...(this.reach.get(scope) ?? [])].sort()
  }

  /** Revokes a server key or application token; it stops working on every instance at once. */
  async revokeScoped(store: ScopedTokenStore, id: string) {
    const revoked = await store.revoke(id)
    await this.sessions.keysRevoked()
    return revoked
  }

  // -- SDK keys -------------------------------------------------------------------------------

  /** `actor`: who asks, confirmed still trusted in the insert's transaction (core/auth/caller.ts). */
  createApiKey(input: {
    name: string
    gameId?: string
    environment?: string
    createdBy?: string
    actor?: Principal
  }) {
    return this.sdkKeys.create(input)
  }

  /** By id; `active`: not revoked; `limit` after the id `after` (all when absent). */
  listApiKeys(filter: KeyFilter = {}): Promise<ApiKey[]> {
    return this.sdkKeys.list(filter)
  }

  async revokeApiKey(id: string): Promise<ApiKey> {
    const key = await this.sdkKeys.revoke(id)
    await this.sessions.keysRevoked()
    return key
  }

  /** Revokes every key bound to a game (or one of its environments), for example when it is deleted. */
  async revokeApiKeysOf(gameId: string, environment?: string): Promise<void> {
    if (await this.sdkKeys.revokeOf(gameId, environment)) await this.sessions.keysRevoked()
  }

  /**
   * The SDK key of an `x-api-key`, or undefined. A valid server key is 403: the same header, a
   * kind that does not reach the SDK surface.
   */
  async verifyApiKey(key: string | undefined): Promise<Principal | undefined> {
    if (!key) return undefined
    if (key.startsWith(SERVER_KEY_PREFIX)) {
      if (await this.serverKeys.verify(key)) throw wrongKind('serverKey')
      return undefined
    }
    return this.sdkKeys.verify(key)
  }

  /** 403 when `principal` is an SDK key bound to another game or environment than the resource's. */
  sdkReach(principal: Principal, owner: { gameId: string; environment: string }): void {
    if (principal.kind !== 'sdkKey') return
    if (principal.gameId !== owner.gameId || principal.environment !== owner.environment)
      throw new Forbidden(
        "this SDK key is bound to another game or environment: an SDK key reaches only its own game's and environment's SDK surface",
        'wrong_game',
      )
  }
}
