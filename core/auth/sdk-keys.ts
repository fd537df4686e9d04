import { randomBytes } from 'node:crypto'
import { type Db, iso, newId } from '../db'
import { atCap } from '../db/room'
import { sha256Hex } from '../digest'
import { Conflict, NotFound } from '../http'
import { confirmCaller } from './caller'
import type { Principal } from './principal'
import { VerifiedCache } from './verified'

/** SDK keys travel in `x-api-key`; server keys share the header with their own prefix. */
export const SDK_KEY_PREFIX = 'lok_'

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
const COLS = 'id, name, prefix, game_id, environment, created_by, created_at, last_used_at, revoked_at'
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
 * Active SDK keys a game may hold (409 for one more): an environment's list shows its active
 * keys, and 1,700 environments beside 1,000 keys had made one list 650 KB (the keys were read once
 * per environment).
 */
export const MAX_ACTIVE_KEYS_PER_GAME = 1_000
/** Key creations of a game take turns on engines with concurrent writers, so two cannot both pass the cap. */
const KEYS_LOCK = { pg: 72_410_006, mysql: 'liveops_sdk_keys', waitS: 10 }

/** What `list` filters on; `limit` keys by id after `after` (all when absent). */
export interface KeyFilter {
  gameId?: string
  environment?: string
  /** Only keys not revoked. */
  active?: boolean
  limit?: number
  after?: string
}

/**
 * SDK keys (spec 1 `x-api-key`): public, since they ship inside game clients, and bound to one
 * game and environment. Stored as their SHA-256 and shown once. Verified keys are cached, unknown
 * ones too (guessing costs no query); `forget()` drops the cache (`VerifiedCache`).
 */
export function sdkKeyStore(db: Db) {
  const cache = new VerifiedCache<Principal>()
  return {
    async create(input: {
      name: string
      gameId?: string
      environment?: string
      createdBy?: string
      /** Who asks, confirmed still trusted in the insert's transaction (`confirmCaller`). */
      actor?: Principal
    }): Promise<ApiKey & { key: string }> {
      const key = `${SDK_KEY_PREFIX}${randomBytes(24).toString('base64url')}`
      const row = await db.tx(async (tx) => {
        await confirmCaller(tx, input.actor)
        if (input.gameId !== undefined) {
          const where = { sql: 'game_id = ? AND revoked_at IS NULL', args: [input.gameId] }
          if (await atCap(tx, KEYS_LOCK, 'api_keys', MAX_ACTIVE_KEYS_PER_GAME, where))
            throw new Conflict(
              `game '${input.gameId}' has ${MAX_ACTIVE_KEYS_PER_GAME} active API keys, the most it may hold: revoke one first`,
              { field: 'gameId', max: MAX_ACTIVE_KEYS_PER_GAME },
            )
        }
        return tx.get<KeyRow>(
          `INSERT INTO api_keys (id, name, key_hash, prefix, game_id, environment, created_by, created_at)
           VALUES (?, ?, ?, ?, ?, ?, ?, ?) RETURNING ${COLS}`,
          [
            newId(),
            input.name,
            sha256Hex(key),
            key.slice(0, 8),
            input.gameId ?? null,
            input.environment ?? null,
            input.createdBy ?? null,
            Date.now(),
          ],
        )
      })
      return { ...toKey(row!), key }
    },

    /** By id (the time they were made): only the conditions given, so the game's index serves. */
    async list(filter: KeyFilter = {}): Promise<ApiKey[]> {
      const where: string[] = []
      const args: (string | number)[] = []
      if (filter.gameId !== undefined) {
        where.push('game_id = ?')
        args.push(filter.gameId)
      }
      if (filter.environment !== undefined) {
        where.push('environment = ?')
        args.push(filter.environment)
      }
      if (filter.active) where.push('revoked_at IS NULL')
      if (filter.after !== undefined) {
        where.push('id > ?')
        args.push(filter.after)
      }
      const rows = await db.all<KeyRow>(
        `SELECT ${COLS} FROM api_keys${where.length ? ` WHERE ${where.join(' AND ')}` : ''} ORDER BY id${
          filter.limit !== undefined ? ' LIMIT ?' : ''
        }`,
        filter.limit !== undefined ? [...args, filter.limit] : args,
      )
      return rows.map(toKey)
    },

    async revoke(id: string): Promise<ApiKey> {
      const row = await db.get<KeyRow>(
        `UPDATE api_keys SET revoked_at = COALESCE(revoked_at, ?) WHERE id = ? RETURNING ${COLS}`,
        [Date.now(), id],
      )
      if (!row) throw new NotFound(`API key '${id}' not found`)
      cache.forget()
      return toKey(row)
    },

    async revokeOf(gameId: string, environment?: string): Promise<number> {
      const n = await db.run(
        'UPDATE api_keys SET revoked_at = ? WHERE game_id = ? AND (CAST(? AS TEXT) IS NULL OR environment = ?) AND revoked_at IS NULL',
        [Date.now(), gameId, environment ?? null, environment ?? null],
      )
      cache.forget()
      return n
    },

    forget() {
      cache.forget()
    },

    verify(key: string): Promise<Principal | undefined> {
      const hash = sha256Hex(key)
      return cache.verify(hash, async () => {
        const row = await db.get<KeyRow>(`SELECT ${COLS} FROM api_keys WHERE key_hash = ?`, [hash])
        return row && row.revoked_at === null
          ? {
              kind: 'sdkKey',
              id: row.id,
              username: `sdkkey:${row.name}`,
              roles: [],
              gameId: row.game_id ?? undefined,
              environment: row.environment ?? undefined,
            }
          : null
      })
    },
  }
}
export type SdkKeyStore = ReturnType<typeof sdkKeyStore>
