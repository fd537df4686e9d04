import { Value } from '@sinclair/typebox/value'
import { type Db, fromJson, iso } from '../../core/db'
import { Conflict, NotFound, invalidField } from '../../core/http'
import type { Game, SettingsPatch } from './schema'
import { type Environment, EnvironmentSettings, type GAME_STATUSES } from './types'

/*
 * Games and environments as stored: their rows, how a row becomes an API object, and the rules a
 * write checks first (status moves, time zones, the default environments). plugins/games/store.ts
 * reads and writes them.
 */

export type Status = (typeof GAME_STATUSES)[number]

/** Status changes allowed through update (upstream); publish and unpublish are the usual doors. */
export const NEXT: Record<Status, readonly Status[]> = {
  DEVELOPMENT: ['TESTING'],
  TESTING: ['LIVE', 'DEVELOPMENT'],
  LIVE: ['MAINTENANCE'],
  MAINTENANCE: ['LIVE', 'DISCONTINUED'],
  DISCONTINUED: [],
}

/**
 * Environments a game may hold (409 for one more): each is listed, with its keys, in every read
 * of the game's environments (1,700 of them had made one list 650 KB).
 */
export const MAX_ENVIRONMENTS = 100

/**
 * Refuses one more environment past `MAX_ENVIRONMENTS` (409), in the creating transaction. The
 * game's row is locked (PostgreSQL, MySQL; SQLite has one writer), so creations in one game take
 * turns and two at once cannot both pass the cap.
 */
export async function roomForEnvironment(tx: Db, gameId: string): Promise<void> {
  const game = await tx.get(
    `SELECT id FROM games WHERE id = ?${tx.dialect === 'sqlite' ? '' : ' FOR UPDATE'}`,
    [gameId],
  )
  if (!game) throw new NotFound(`game '${gameId}' not found`)
  const n = await tx.get<{ n: number }>('SELECT COUNT(*) AS n FROM environments WHERE game_id = ?', [gameId])
  if (Number(n?.n ?? 0) >= MAX_ENVIRONMENTS)
    throw new Conflict(`game '${gameId}' has ${MAX_ENVIRONMENTS} environments, the most it may hold`, {
      field: 'name',
      max: MAX_ENVIRONMENTS,
    })
}

/** Every new game gets these, with the recommended retention. */
export const DEFAULT_ENVIRONMENTS = [
  { name: 'dev', type: 'DEVELOPMENT', displayName: 'Development', retentionDays: 7 },
  { name: 'staging', type: 'STAGING', displayName: 'Staging', retentionDays: 30 },
  { name: 'prod', type: 'PRODUCTION', displayName: 'Production', retentionDays: 365 },
] as const

export type GameRow = {
  id: string
  name: string
  genre: string
  platforms: string
  timezone: string
  default_currency: string
  description: string
  status: string
  created_at: number
  updated_at: number
}
export type EnvRow = {
  id: string
  game_id: string
  name: string
  type: string
  display_name: string
  description: string
  settings: string
  created_at: number
  updated_at: number
}

export const GAME_COLS =
  'id, name, genre, platforms, timezone, default_currency, description, status, created_at, updated_at'
export const ENV_COLS = 'id, game_id, name, type, display_name, description, settings, created_at, updated_at'
export const SORTABLE = {
  name: 'name',
  genre: 'genre',
  status: 'status',
  createdAt: 'created_at',
  updatedAt: 'updated_at',
}

export const toGame = (r: GameRow): Game => ({
  id: r.id,
  name: r.name,
  genre: r.genre as Game['genre'],
  platforms: fromJson<string[]>(r.platforms, []),
  timezone: r.timezone,
  defaultCurrency: r.default_currency,
  description: r.description,
  status: r.status as Status,
  createdAt: iso(r.created_at)!,
  updatedAt: iso(r.updated_at)!,
})

/** Settings with every default filled, so readers never meet a missing field. */
export function completeSettings(partial: unknown): EnvironmentSettings {
  return Value.Default(EnvironmentSettings, Value.Clone(partial ?? {})) as EnvironmentSettings
}

export function mergeSettings(
  base: EnvironmentSettings,
  patch: SettingsPatch | undefined,
): EnvironmentSettings {
  if (!patch) return base
  return {
    ...base,
    ...patch,
    rateLimit: { ...base.rateLimit, ...patch.rateLimit },
    pii: { ...base.pii, ...patch.pii },
  } as EnvironmentSettings
}

export const toEnv = (r: EnvRow): Environment => ({
  id: r.id,
  gameId: r.game_id,
  name: r.name,
  type: r.type as Environment['type'],
  displayName: r.display_name,
  description: r.description,
  settings: completeSettings(fromJson(r.settings, {})),
  createdAt: iso(r.created_at)!,
  updatedAt: iso(r.updated_at)!,
})

export function checkTimezone(tz: string) {
  try {
    new Intl.DateTimeFormat('en', { timeZone: tz })
  } catch {
    throw invalidField('body.timezone', `'${tz}' is not an IANA time-zone name`)
  }
}
