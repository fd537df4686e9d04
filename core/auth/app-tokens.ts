import { randomBytes } from 'node:crypto'
import { type Db, fromJson, iso, newId } from '../db'
import { NotFound } from '../http'
import type { Principal } from './service'

/** Spec 2 section 5: the three scopes of an application token; none implies another. */
export const SCOPES = ['config', 'trigger', 'query'] as const
export type Scope = (typeof SCOPES)[number]

export const APP_TOKEN_PREFIX = 'lat_'
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

export type AppPrincipal = Principal & { scopes: Scope[] }

/**
 * Application tokens for integrators (spec 2 section 5). Only the SHA-256 of a token is stored;
 * the token itself is shown once, at creation.
 */
export function appTokenStore(db: Db) {
  const cache = new Map<string, AppPrincipal | null>()
  return {
    async create(name: string, scopes: Scope[], createdBy: string) {
      const token = `${APP_TOKEN_PREFIX}${randomBytes(24).toString('base64url')}`
      const row = await db.get<TokenRow>(
        `INSERT INTO auth_app_tokens (id, name, scopes, token_hash, prefix, created_by, created_at) VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING ${COLS}`,
        [newId(), name, JSON.stringify(scopes), sha256(token), token.slice(0, 8), createdBy, Date.now()],
      )
      return { ...toToken(row!), token }
    },
    async list() {
      return (await db.all<TokenRow>(`SELECT ${COLS} FROM auth_app_tokens ORDER BY created_at, id`)).map(
        toToken,
      )
    },
    async revoke(id: string) {
      const row = await db.get<TokenRow>(
        `UPDATE auth_app_tokens SET revoked_at = COALESCE(revoked_at, ?) WHERE id = ? RETURNING ${COLS}`,
        [Date.now(), id],
      )
      if (!row) throw new NotFound(`application token '${id}' not found`)
      cache.clear()
      return toToken(row)
    },
    async verify(token: string): Promise<AppPrincipal | undefined> {
      const hash = sha256(token)
      const hit = cache.get(hash)
      if (hit !== undefined) return hit ?? undefined
      const row = await db.get<TokenRow>(`SELECT ${COLS} FROM auth_app_tokens WHERE token_hash = ?`, [hash])
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
