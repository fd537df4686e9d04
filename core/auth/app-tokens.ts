import { randomBytes } from 'node:crypto'
import { type Db, fromJson, iso, newId } from '../db'
import { sha256Hex } from '../digest'
import { NotFound } from '../http'
import { confirmCaller } from './caller'
import type { Principal } from './principal'
import { VerifiedCache } from './verified'

/** Spec 2 section 5: the three scopes of an application token; none implies another. */
export const SCOPES = ['config', 'trigger', 'query'] as const
export type Scope = (typeof SCOPES)[number]

/** Application tokens travel as `Authorization: Bearer lat_...` or `X-App-Token`. */
export const APP_TOKEN_PREFIX = 'lat_'
/** Server keys (spec 2's `X-API-Key`) travel in `X-API-Key`, beside SDK keys (`lok_`). */
export const SERVER_KEY_PREFIX = 'lsk_'

/**
 * The two scoped credentials of the notification service. Both are secret, shown once and
 * stored as their SHA-256; they differ only in the header they travel in.
 */
export const SCOPED_KINDS = {
  appToken: { stored: 'app', prefix: APP_TOKEN_PREFIX, label: 'app' },
  serverKey: { stored: 'server', prefix: SERVER_KEY_PREFIX, label: 'serverkey' },
} as const
export type ScopedKind = keyof typeof SCOPED_KINDS

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
 * Application tokens or server keys (spec 2 section 5), one store per kind over one table. Only
 * the SHA-256 of a token is stored; the token itself is shown once, at creation. Verified
 * tokens are cached; `forget()` drops the cache (a revocation here or, by change notice, on
 * another instance).
 */
export function scopedTokenStore(db: Db, kind: ScopedKind) {
  const { stored, prefix, label } = SCOPED_KINDS[kind]
  const cache = new VerifiedCache<AppPrincipal>()
  return {
    kind,
    /** `actor`: who asks, confirmed still trusted in the insert's transaction (`confirmCaller`). */
    async create(name: string, scopes: Scope[], createdBy: string, actor?: Principal) {
      const token = `${prefix}${randomBytes(24).toString('base64url')}`
      const row = await db.tx(async (tx) => {
        await confirmCaller(tx, actor)
        return tx.get<TokenRow>(
          `INSERT INTO auth_app_tokens (id, name, scopes, token_hash, prefix, created_by, created_at, kind)
           VALUES (?, ?, ?, ?, ?, ?, ?, ?) RETURNING ${COLS}`,
          [
            newId(),
            name,
            JSON.stringify(scopes),
            sha256Hex(token),
            token.slice(0, 8),
            createdBy,
            Date.now(),
            stored,
          ],
        )
      })
      return { ...toToken(row!), token }
    },
    /** By id (the time they were made): at most `limit` after the id `after` (all when absent). */
    async list(page: { limit?: number; after?: string } = {}) {
      const rows = await db.all<TokenRow>(
        `SELECT ${COLS} FROM auth_app_tokens WHERE kind = ?${page.after !== undefined ? ' AND id > ?' : ''} ORDER BY id${
          page.limit !== undefined ? ' LIMIT ?' : ''
        }`,
        [
          stored,
          ...(page.after !== undefined ? [page.after] : []),
          ...(page.limit !== undefined ? [page.limit] : []),
        ],
      )
      return rows.map(toToken)
    },
    async revoke(id: string) {
      const row = await db.get<TokenRow>(
        `UPDATE auth_app_tokens SET revoked_at = COALESCE(revoked_at, ?) WHERE id = ? AND kind = ? RETURNING ${COLS}`,
        [Date.now(), id, stored],
      )
      if (!row)
        throw new NotFound(`${kind === 'appToken' ? 'application token' : 'server key'} '${id}' not found`)
      cache.forget()
      return toToken(row)
    },
    forget() {
      cache.forget()
    },
    verify(token: string): Promise<AppPrincipal | undefined> {
      const hash = sha256Hex(token)
      return cache.verify(hash, async () => {
        const row = await db.get<TokenRow>(
          `SELECT ${COLS} FROM auth_app_tokens WHERE token_hash = ? AND kind = ?`,
          [hash, stored],
        )
        return row && row.revoked_at === null
          ? {
              kind,
              id: row.id,
              username: `${label}:${row.name}`,
              roles: [],
              scopes: fromJson<Scope[]>(row.scopes, []),
            }
          : null
      })
    },
  }
}
export type ScopedTokenStore = ReturnType<typeof scopedTokenStore>
