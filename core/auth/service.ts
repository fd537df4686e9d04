import { randomBytes, timingSafeEqual } from 'node:crypto'
import { type Db, fromJson, iso, newId } from '../db'
import { Conflict, Forbidden, NotFound, Unauthorized, invalidField } from '../http'
import type { Logger } from '../log'
import { APP_TOKEN_PREFIX, type Scope, appTokenStore } from './app-tokens'
import { type Claims, signJwt, verifyJwt } from './jwt'
import { type Permission, Permissions, ROLES, primaryRole } from './roles'
import { LoginThrottle, type ThrottleSettings, type ThrottleStore } from './throttle'

/** What an `appScope` route needs: one application-token scope (or an administrator). */
export type AppNeed = Scope | 'admin'
/**
 * `appScope: 'trigger'` checks users against the notification service's area (`notify`, spec 2);
 * another API family names the permission users need: `{ scope: 'config', permission: 'rules:write' }`.
 */
export type AppScopeOption = AppNeed | { scope: AppNeed; permission: Permission }

export interface User {
  id: string
  email: string
  username: string
  name: string
  roles: string[]
  disabled: boolean
  createdAt: string
  updatedAt: string
}

/** Who made a request: a logged-in user, an SDK API key, or an internal service with the admin token. */
export interface Principal {
  kind: 'user' | 'apiKey' | 'admin'
  id: string
  username: string
  roles: string[]
  /** API keys are bound to one game and environment. */
  gameId?: string
  environment?: string
}

export interface ApiKey {
  id: string
  name: string
  prefix: string
  gameId: string | null
  environment: string | null
  createdBy: string | null
  createdAt: string
  lastUsedAt?: string
  revokedAt?: string
}

export interface Tokens {
  token: string
  refreshToken: string
  expiresIn: number
  user: { id: string; email: string; name: string; roles: string[] }
}

type UserRow = {
  id: string
  email: string
  username: string
  name: string
  password_hash: string
  roles: string
  disabled: number
  created_at: number
  updated_at: number
}
type KeyRow = {
  id: string
  name: string
  prefix: string
  game_id: string | null
  environment: string | null
  created_by: string | null
  created_at: number
  last_used_at: number | null
  revoked_at: number | null
}

const USER_COLS = 'id, email, username, name, password_hash, roles, disabled, created_at, updated_at'
const KEY_COLS = 'id, name, prefix, game_id, environment, created_by, created_at, last_used_at, revoked_at'

const toUser = (r: UserRow): User => ({
  id: r.id,
  email: r.email,
  username: r.username,
  name: r.name,
  roles: fromJson<string[]>(r.roles, []),
  disabled: !!r.disabled,
  createdAt: iso(r.created_at)!,
  updatedAt: iso(r.updated_at)!,
})
const toKey = (r: KeyRow): ApiKey => ({
  id: r.id,
  name: r.name,
  prefix: r.prefix,
  gameId: r.game_id,
  environment: r.environment,
  createdBy: r.created_by,
  createdAt: iso(r.created_at)!,
  lastUsedAt: iso(r.last_used_at),
  revokedAt: iso(r.revoked_at),
})

/**
 * Verified against when no user matches, so an unknown account costs a known one's time. A hash
 * of a random password nobody kept, made with `Bun.password.hash`'s defaults (the parameters
 * every user's hash has); a constant, so building an app costs no hashing.
 */
export const DUMMY_HASH =
  '$argon2id$v=19$m=65536,t=2,p=1$dXijYDDkl+RaPpw38oSOKNYjdSEpiWx/YGcpNhRANgs$7U/TTRNwQJMsGz65VTrCTCM4HM7UeHtGZvnV7XIyw2Y'

const sha256 = (s: string) => new Bun.CryptoHasher('sha256').update(s).digest('hex')
const randomToken = (bytes = 32) => randomBytes(bytes).toString('base64url')

export interface AuthSettings {
  jwtSecret: string
  accessTtlS: number
  refreshTtlS: number
  adminToken: string
  throttle: ThrottleSettings
}

export interface NewUser {
  email: string
  username?: string
  name?: string
  password: string
  roles: string[]
}

function checkRoles(roles: readonly string[], field: string) {
  if (!roles.length) throw invalidField(field, 'at least one role is required')
  for (const r of roles)
    if (!(ROLES as readonly string[]).includes(r))
      throw invalidField(field, `unknown role '${r}', expected one of ${ROLES.join(', ')}`)
}

/**
 * Users, passwords, JWTs, rotating refresh tokens, API keys and the admin token.
 *
 * Verified access tokens and API keys are cached in memory so the permission check on a hot
 * route costs a map lookup; disabling or deleting a user, or revoking a key, drops the cache
 * entries at once (for this process; other instances notice within the access-token lifetime).
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
  readonly appTokens: ReturnType<typeof appTokenStore>
  private tokenCache = new Map<string, { principal: Principal; exp: number }>()
  private keyCache = new Map<string, Principal | null>()
  private blocked = new Set<string>()
  /** Failed logins and refreshes per account and client address. */
  readonly throttle: LoginThrottle

  constructor(
    private db: Db,
    readonly settings: AuthSettings,
    log: Logger,
    /** Where failed attempts are counted: the state every instance shares (core/shared.ts); memory when absent. */
    throttleStore?: ThrottleStore,
  ) {
    this.appTokens = appTokenStore(db)
    this.throttle = new LoginThrottle(settings.throttle, log, throttleStore)
  }

  async init(): Promise<void> {
    const rows = await this.db.all<{ id: string }>('SELECT id FROM users WHERE disabled = 1')
    for (const r of rows) this.blocked.add(r.id)
  }

  // -- users ----------------------------------------------------------------------------------

  async countUsers(): Promise<number> {
    const r = await this.db.get<{ n: number }>('SELECT COUNT(*) AS n FROM users')
    return Number(r?.n ?? 0)
  }

  /** `passwordHash`: the hash of `input.password`, when the caller started it earlier (bootstrap). */
  async createUser(input: NewUser, passwordHash?: Promise<string>): Promise<User> {
    const email = input.email.trim().toLowerCase()
    if (!/^[^@\s]+@[^@\s]+$/.test(email)) throw invalidField('body.email', 'must be an email address')
    if (input.password.length < 8) throw invalidField('body.password', 'must be at least 8 characters')
    checkRoles(input.roles, 'body.roles')
    const username = (input.username ?? email.split('@')[0]).trim()
    if (!/^[A-Za-z0-9._-]{1,64}$/.test(username))
      throw invalidField('body.username', 'letters, digits, dot, dash and underscore, 1-64')
    const now = Date.now()
    const hash = await (passwordHash ?? Bun.password.hash(input.password))
    const row = await this.db.get<UserRow>(
      `INSERT INTO users (id, email, username, name, password_hash, roles, disabled, created_at, updated_at)
       VALUES (?, ?, ?, ?, ?, ?, 0, ?, ?) ON CONFLICT DO NOTHING RETURNING ${USER_COLS}`,
      [newId(), email, username, input.name?.trim() || username, hash, JSON.stringify(input.roles), now, now],
    )
    if (!row) throw new Conflict(`a user with email '${email}' or username '${username}' exists`)
    return toUser(row)
  }

  async listUsers(page: number, size: number): Promise<{ items: User[]; total: number }> {
    const [rows, total] = await Promise.all([
      this.db.all<UserRow>(`SELECT ${USER_COLS} FROM users ORDER BY created_at, id LIMIT ? OFFSET ?`, [
        size,
        page * size,
      ]),
      this.countUsers(),
    ])
    return { items: rows.map(toUser), total }
  }

  async getUser(id: string): Promise<User> {
    const row = await this.db.get<UserRow>(`SELECT ${USER_COLS} FROM users WHERE id = ?`, [id])
    if (!row) throw new NotFound(`user '${id}' not found`)
    return toUser(row)
  }

  async updateUser(
    id: string,
    patch: { name?: string; roles?: string[]; password?: string; disabled?: boolean },
  ): Promise<User> {
    if (patch.roles) checkRoles(patch.roles, 'body.roles')
    if (patch.password !== undefined && patch.password.length < 8)
      throw invalidField('body.password', 'must be at least 8 characters')
    const hash = patch.password !== undefined ? await Bun.password.hash(patch.password) : null
    const row = await this.db.get<UserRow>(
      `UPDATE users SET name = COALESCE(?, name), roles = COALESCE(?, roles), password_hash = COALESCE(?, password_hash),
       disabled = COALESCE(?, disabled), updated_at = ? WHERE id = ? RETURNING ${USER_COLS}`,
      [
        patch.name ?? null,
        patch.roles ? JSON.stringify(patch.roles) : null,
        hash,
        patch.disabled === undefined ? null : patch.disabled ? 1 : 0,
        Date.now(),
        id,
      ],
    )
    if (!row) throw new NotFound(`user '${id}' not found`)
    if (row.disabled) this.block(id)
    else this.blocked.delete(id)
    if (patch.roles || hash) this.dropTokens(id)
    return toUser(row)
  }

  async deleteUser(id: string): Promise<void> {
    const n = await this.db.tx(async (tx) => {
      await tx.run('UPDATE refresh_tokens SET revoked_at = ? WHERE user_id = ? AND revoked_at IS NULL', [
        Date.now(),
        id,
      ])
      return tx.run('DELETE FROM users WHERE id = ?', [id])
    })
    if (!n) throw new NotFound(`user '${id}' not found`)
    this.block(id)
  }

  private block(id: string) {
    this.blocked.add(id)
    this.dropTokens(id)
  }

  private dropTokens(userId: string) {
    for (const [t, v] of this.tokenCache) if (v.principal.id === userId) this.tokenCache.delete(t)
  }

  // -- login and tokens -----------------------------------------------------------------------

  /**
   * Checks a password by email or username, throttled per account and per client address (see
   * `LoginThrottle`). An unknown user costs the same hash verification as a known one, so the
   * answer's timing does not tell which accounts exist; both answer the same 401.
   */
  async checkPassword(
    by: 'email' | 'username',
    value: string,
    password: string,
    address = 'unknown',
  ): Promise<User> {
    const id = by === 'email' ? value.trim().toLowerCase() : value.trim()
    const row = await this.db.get<UserRow>(`SELECT ${USER_COLS} FROM users WHERE ${by} = ?`, [id])
    // A known user is throttled by its id, so email and username logins share one budget.
    const account = row ? row.id : `${by}:${id}`
    await this.throttle.check(address, account)
    const valid = await Bun.password.verify(password, row ? row.password_hash : DUMMY_HASH)
    if (!row || !valid) {
      await this.throttle.fail(address, 'login', account)
      throw new Unauthorized('invalid credentials', 'invalid_credentials')
    }
    if (row.disabled) throw new Unauthorized('user is disabled', 'user_disabled')
    await this.throttle.succeed(address, account)
    return toUser(row)
  }

  accessToken(user: Pick<User, 'id' | 'username' | 'email' | 'roles'>): string {
    const now = Math.floor(Date.now() / 1000)
    return signJwt(
      {
        sub: user.id,
        username: user.username,
        email: user.email,
        roles: user.roles,
        iat: now,
        exp: now + this.settings.accessTtlS,
        jti: randomToken(8),
      },
      this.settings.jwtSecret,
    )
  }

  /** Spec 1 login answer: an access token and the first refresh token of a new family. */
  async issue(user: User, familyId = newId()): Promise<Tokens> {
    const refreshToken = randomToken()
    const now = Date.now()
    await this.db.run(
      'INSERT INTO refresh_tokens (id, family_id, user_id, token_hash, expires_at, created_at) VALUES (?, ?, ?, ?, ?, ?)',
      [newId(), familyId, user.id, sha256(refreshToken), now + this.settings.refreshTtlS * 1000, now],
    )
    return {
      token: this.accessToken(user),
      refreshToken,
      expiresIn: this.settings.accessTtlS,
      user: { id: user.id, email: user.email, name: user.name, roles: user.roles },
    }
  }

  /**
   * Rotates a refresh token: each is good once. Presenting a used one means it leaked, so the
   * whole family (every token descended from that login) is revoked.
   */
  async refresh(refreshToken: string, address = 'unknown'): Promise<Tokens> {
    await this.throttle.check(address)
    const hash = sha256(refreshToken)
    const now = Date.now()
    const outcome = await this.db.tx(async (tx) => {
      const row = await tx.get<{
        id: string
        family_id: string
        user_id: string
        expires_at: number
        used_at: number | null
        revoked_at: number | null
      }>(
        'SELECT id, family_id, user_id, expires_at, used_at, revoked_at FROM refresh_tokens WHERE token_hash = ?',
        [hash],
      )
      if (!row) return { error: 'invalid refresh token' } as const
      if (row.used_at !== null || row.revoked_at !== null) {
        await tx.run('UPDATE refresh_tokens SET revoked_at = ? WHERE family_id = ? AND revoked_at IS NULL', [
          now,
          row.family_id,
        ])
        return { error: 'refresh token reused; its session was revoked', revoke: true } as const
      }
      if (row.expires_at <= now) return { error: 'refresh token expired' } as const
      const claimed = await tx.run('UPDATE refresh_tokens SET used_at = ? WHERE id = ? AND used_at IS NULL', [
        now,
        row.id,
      ])
      if (!claimed) return { error: 'invalid refresh token' } as const
      return { userId: row.user_id, familyId: row.family_id } as const
    })
    if ('error' in outcome) {
      await this.throttle.fail(address, 'token refresh')
      throw new Unauthorized(outcome.error, 'invalid_refresh_token')
    }
    const row = await this.db.get<UserRow>(`SELECT ${USER_COLS} FROM users WHERE id = ?`, [outcome.userId])
    if (!row || row.disabled)
      throw new Unauthorized('user no longer exists or is disabled', 'invalid_refresh_token')
    return this.issue(toUser(row), outcome.familyId)
  }

  /** The principal behind an access token, or undefined when missing, invalid, expired or blocked. */
  verifyAccess(token: string | undefined): Principal | undefined {
    if (!token) return undefined
    const now = Date.now()
    const cached = this.tokenCache.get(token)
    if (cached) {
      if (cached.exp > now) return cached.principal
      this.tokenCache.delete(token)
      return undefined
    }
    const claims: Claims | undefined = verifyJwt(token, this.settings.jwtSecret, now)
    if (!claims || this.blocked.has(claims.sub)) return undefined
    const principal: Principal = {
      kind: 'user',
      id: claims.sub,
      username: String(claims.username ?? ''),
      roles: Array.isArray(claims.roles) ? (claims.roles as string[]) : [],
    }
    if (this.tokenCache.size > 50_000) this.tokenCache.clear()
    this.tokenCache.set(token, { principal, exp: claims.exp * 1000 })
    return principal
  }

  /** Bearer header, then the spec 2 cookie `service_token`, then the query parameter `token`. */
  static bearer(
    headers: Record<string, string | undefined>,
    query?: Record<string, unknown>,
  ): string | undefined {
    const h = headers.authorization
    if (h?.startsWith('Bearer ')) return h.slice(7).trim()
    const cookie = headers.cookie?.match(/(?:^|;\s*)service_token=([^;]+)/)?.[1]
    if (cookie) return decodeURIComponent(cookie)
    const q = query?.token
    return typeof q === 'string' && q ? q : undefined
  }

  /** Throws 401 without a principal and 403 when none of its roles grants the permission. */
  authorize(principal: Principal | undefined, permission: Permission): Principal {
    if (!principal) throw new Unauthorized('missing, invalid or expired token')
    if (!this.permissions.allows(principal.roles, permission))
      throw new Forbidden(`permission '${permission}' required`)
    return principal
  }

  primaryRole = primaryRole

  // -- admin token ----------------------------------------------------------------------------

  verifyAdminToken(value: string | undefined): Principal | undefined {
    const expected = this.settings.adminToken
    if (!expected || !value || value.length !== expected.length) return undefined
    if (!timingSafeEqual(Buffer.from(value), Buffer.from(expected))) return undefined
    return { kind: 'admin', id: 'admin-token', username: 'admin-token', roles: ['admin'] }
  }

  // -- API keys -------------------------------------------------------------------------------

  /**
   * Spec 2 section 5: an application token (`Authorization: Bearer lat_...` or `X-App-Token`)
   * needs exactly the route's scope; with `anonymousAppScopes` anyone may call (token management
   * stays admin-only); a user token (or the admin token) needs the route's permission; an
   * `X-API-Key` may query and trigger but not configure. `strict` ignores `anonymousAppScopes`
   * (remote workers receive secrets).
   */
  async authenticateApp(
    option: AppScopeOption,
    headers: Record<string, string | undefined>,
    strict = false,
  ): Promise<Principal | undefined> {
    const need = typeof option === 'string' ? option : option.scope
    const bearer = AuthService.bearer(headers)
    const app = headers['x-app-token'] ?? (bearer?.startsWith(APP_TOKEN_PREFIX) ? bearer : undefined)
    if (app) {
      const p = await this.appTokens.verify(app)
      if (!p) throw new Unauthorized('invalid or revoked application token')
      if (need === 'admin' || !p.scopes.includes(need))
        throw new Forbidden(`application token lacks scope '${need}'`)
      return p
    }
    if (this.anonymousAppScopes && !strict && need !== 'admin') return undefined
    const user = this.verifyAccess(bearer) ?? this.verifyAdminToken(headers['x-admin-token'])
    if (user) {
      if (need === 'admin') {
        if (!user.roles.includes('admin')) throw new Forbidden('administrator role required')
        return user
      }
      const permission =
        typeof option === 'string' ? (need === 'query' ? 'notify:read' : 'notify:write') : option.permission
      return this.authorize(user, permission)
    }
    const key = await this.verifyApiKey(headers['x-api-key'])
    if (key) {
      if (need === 'config' || need === 'admin')
        throw new Forbidden('an API key may query and trigger, not configure')
      return key
    }
    throw new Unauthorized(
      'missing, invalid or expired token (Authorization: Bearer, X-API-Key or X-App-Token)',
    )
  }

  async createApiKey(input: {
    name: string
    gameId?: string
    environment?: string
    createdBy?: string
  }): Promise<ApiKey & { key: string }> {
    const key = `lok_${randomToken(24)}`
    const row = await this.db.get<KeyRow>(
      `INSERT INTO api_keys (id, name, key_hash, prefix, game_id, environment, created_by, created_at)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?) RETURNING ${KEY_COLS}`,
      [
        newId(),
        input.name,
        sha256(key),
        key.slice(0, 8),
        input.gameId ?? null,
        input.environment ?? null,
        input.createdBy ?? null,
        Date.now(),
      ],
    )
    return { ...toKey(row!), key }
  }

  async listApiKeys(filter: { gameId?: string; environment?: string } = {}): Promise<ApiKey[]> {
    const rows = await this.db.all<KeyRow>(
      `SELECT ${KEY_COLS} FROM api_keys WHERE (CAST(? AS TEXT) IS NULL OR game_id = ?) AND (CAST(? AS TEXT) IS NULL OR environment = ?) ORDER BY created_at, id`,
      [filter.gameId ?? null, filter.gameId ?? null, filter.environment ?? null, filter.environment ?? null],
    )
    return rows.map(toKey)
  }

  async revokeApiKey(id: string): Promise<ApiKey> {
    const row = await this.db.get<KeyRow>(
      `UPDATE api_keys SET revoked_at = COALESCE(revoked_at, ?) WHERE id = ? RETURNING ${KEY_COLS}`,
      [Date.now(), id],
    )
    if (!row) throw new NotFound(`API key '${id}' not found`)
    this.keyCache.clear()
    return toKey(row)
  }

  /** Revokes every key bound to a game (or one of its environments), for example when it is deleted. */
  async revokeApiKeysOf(gameId: string, environment?: string): Promise<void> {
    await this.db.run(
      'UPDATE api_keys SET revoked_at = ? WHERE game_id = ? AND (CAST(? AS TEXT) IS NULL OR environment = ?) AND revoked_at IS NULL',
      [Date.now(), gameId, environment ?? null, environment ?? null],
    )
    this.keyCache.clear()
  }

  /** The principal of an `x-api-key`, or undefined. Unknown keys are cached too, so guessing costs no query. */
  async verifyApiKey(key: string | undefined): Promise<Principal | undefined> {
    if (!key) return undefined
    const hash = sha256(key)
    const cached = this.keyCache.get(hash)
    if (cached !== undefined) return cached ?? undefined
    const row = await this.db.get<KeyRow>(`SELECT ${KEY_COLS} FROM api_keys WHERE key_hash = ?`, [hash])
    const principal: Principal | null =
      row && row.revoked_at === null
        ? {
            kind: 'apiKey',
            id: row.id,
            username: `apikey:${row.name}`,
            roles: ['developer'],
            gameId: row.game_id ?? undefined,
            environment: row.environment ?? undefined,
          }
        : null
    if (this.keyCache.size > 10_000) this.keyCache.clear()
    this.keyCache.set(hash, principal)
    return principal ?? undefined
  }
}
