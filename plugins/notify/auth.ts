import { randomBytes } from 'node:crypto'
import { Elysia } from 'elysia'
import { AuthService, type Principal } from '../../core/auth/service'
import { type Db, fromJson, iso, newId } from '../../core/db'
import { Forbidden, NotFound, Unauthorized } from '../../core/http'
import type { SCOPES } from './schema'

export type Scope = (typeof SCOPES)[number]
/** What a route needs: one of the three application-token scopes, or an administrator. */
export type Need = Scope | 'admin'

const PREFIX = 'lat_'
const sha256 = (s: string) => new Bun.CryptoHasher('sha256').update(s).digest('hex')

type TokenRow = {
  id: string
  name: string
  scopes: string
  prefix: string
  created_by: string | null
  created_at: number
  revoked_at: number | null
}
const COLS = 'id, name, scopes, prefix, created_by, created_at, revoked_at'
const toToken = (r: TokenRow) => ({
  id: r.id,
  name: r.name,
  scopes: fromJson<Scope[]>(r.scopes, []),
  prefix: r.prefix,
  created_by: r.created_by ?? undefined,
  created_at: iso(r.created_at)!,
  revoked_at: iso(r.revoked_at),
})

/**
 * Application tokens of the integrator surface (spec 2 section 5): each holds some of the scopes
 * config, trigger and query, which do not imply one another. They work whatever auth.enabled says.
 */
export function appTokenStore(db: Db) {
  const cache = new Map<string, (Principal & { scopes: Scope[] }) | null>()
  return {
    async create(name: string, scopes: Scope[], createdBy: string) {
      const token = `${PREFIX}${randomBytes(24).toString('base64url')}`
      const row = await db.get<TokenRow>(
        `INSERT INTO notify_app_tokens (id, name, scopes, token_hash, prefix, created_by, created_at) VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING ${COLS}`,
        [newId(), name, JSON.stringify(scopes), sha256(token), token.slice(0, 8), createdBy, Date.now()],
      )
      return { ...toToken(row!), token }
    },
    async list() {
      return (await db.all<TokenRow>(`SELECT ${COLS} FROM notify_app_tokens ORDER BY created_at, id`)).map(
        toToken,
      )
    },
    async revoke(id: string) {
      const row = await db.get<TokenRow>(
        `UPDATE notify_app_tokens SET revoked_at = COALESCE(revoked_at, ?) WHERE id = ? RETURNING ${COLS}`,
        [Date.now(), id],
      )
      if (!row) throw new NotFound(`application token '${id}' not found`)
      cache.clear()
      return toToken(row)
    },
    async verify(token: string): Promise<(Principal & { scopes: Scope[] }) | undefined> {
      const hash = sha256(token)
      const hit = cache.get(hash)
      if (hit !== undefined) return hit ?? undefined
      const row = await db.get<TokenRow>(`SELECT ${COLS} FROM notify_app_tokens WHERE token_hash = ?`, [hash])
      const p =
        row && row.revoked_at === null
          ? {
              kind: 'apiKey' as const,
              id: row.id,
              username: `app:${row.name}`,
              roles: [],
              scopes: fromJson<Scope[]>(row.scopes, []),
            }
          : null
      if (cache.size > 10_000) cache.clear()
      cache.set(hash, p)
      return p ?? undefined
    },
  }
}
export type AppTokenStore = ReturnType<typeof appTokenStore>

/**
 * Decides who may call a notification route:
 * - an application token (`Authorization: Bearer lat_...` or `X-App-Token`) needs exactly the
 *   route's scope, with or without auth.enabled;
 * - otherwise, with auth.enabled off, anyone may (except token management, always admin-only);
 * - with it on, a user token (or the admin token) needs notify:read for queries and notify:write
 *   for triggers and configuration; an `X-API-Key` may query and trigger but not configure.
 */
export async function authenticate(
  auth: AuthService,
  tokens: AppTokenStore,
  enabled: boolean,
  need: Need,
  headers: Record<string, string | undefined>,
): Promise<Principal | undefined> {
  const bearer = AuthService.bearer(headers)
  const app = headers['x-app-token'] ?? (bearer?.startsWith(PREFIX) ? bearer : undefined)
  if (app) {
    const p = await tokens.verify(app)
    if (!p) throw new Unauthorized('invalid or revoked application token')
    if (need === 'admin' || !p.scopes.includes(need))
      throw new Forbidden(`application token lacks scope '${need === 'admin' ? 'admin' : need}'`)
    return p
  }
  if (!enabled && need !== 'admin') return undefined
  const user = auth.verifyAccess(bearer) ?? auth.verifyAdminToken(headers['x-admin-token'])
  if (user) {
    if (need === 'admin') {
      if (!user.roles.includes('admin')) throw new Forbidden('administrator role required')
      return user
    }
    return auth.authorize(user, need === 'query' ? 'notify:read' : 'notify:write')
  }
  const key = await auth.verifyApiKey(headers['x-api-key'])
  if (key) {
    if (need === 'config' || need === 'admin')
      throw new Forbidden('an API key may query and trigger, not configure')
    return key
  }
  throw new Unauthorized(
    'missing, invalid or expired token (Authorization: Bearer, X-API-Key or X-App-Token)',
  )
}

/** `{ notifyAuth: 'query' | 'trigger' | 'config' | 'admin' }` on a route; puts `principal` in the context. */
export function notifyAuth(
  auth: AuthService,
  tokens: AppTokenStore,
  enabled: boolean,
  rateLimit: (p: Principal, headers: Record<string, unknown>) => void,
) {
  return new Elysia({ name: 'notify.auth' }).macro({
    notifyAuth: (need: Need) => ({
      async resolve({ headers, set }) {
        const principal = await authenticate(auth, tokens, enabled, need, headers)
        if (principal) rateLimit(principal, set.headers)
        return { principal }
      },
    }),
  })
}
