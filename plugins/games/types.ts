import { t } from 'elysia'
import { Enum } from '../../core/schema'

export const GENRES = [
  'RPG',
  'STRATEGY',
  'ACTION',
  'PUZZLE',
  'CASUAL',
  'SIMULATION',
  'SPORTS',
  'SHOOTER',
  'MMORPG',
  'MOBA',
  'BATTLE_ROYALE',
] as const
export const GAME_STATUSES = ['DEVELOPMENT', 'TESTING', 'LIVE', 'MAINTENANCE', 'DISCONTINUED'] as const
export const ENV_TYPES = ['DEVELOPMENT', 'STAGING', 'PRODUCTION'] as const
export const PII_ACTIONS = ['allow', 'deny', 'mask', 'drop'] as const

const PiiAction = Enum(PII_ACTIONS)

/**
 * Per-environment settings (spec 1 "Environment": API key, sampling rate, rate-limit policy,
 * PII policy, retention). Field names are ours; the spec leaves them "not shown".
 */
export const EnvironmentSettings = t.Object(
  {
    /** Share of events kept at ingestion, 0..1 (1 keeps everything). */
    samplingRate: t.Number({ minimum: 0, maximum: 1, default: 1 }),
    rateLimit: t.Object(
      {
        /** Ingestion requests per minute per API key (0: unlimited); spec 1 section 8: 1000. */
        requestsPerMinutePerKey: t.Integer({ minimum: 0, default: 1000 }),
        /** Ingestion requests per second per API key (0: no burst limit); spec 1 section 8: 100. */
        burstPerSecondPerKey: t.Integer({ minimum: 0, default: 100 }),
        /** Ingestion requests per minute per client IP (0: unlimited). */
        requestsPerMinutePerIp: t.Integer({ minimum: 0, default: 0 }),
      },
      {
        additionalProperties: false,
        // Written out whole: a default must itself be valid (the three fields are required).
        default: { requestsPerMinutePerKey: 1000, burstPerSecondPerKey: 100, requestsPerMinutePerIp: 0 },
      },
    ),
    /** What ingestion does with personal data found in event properties. */
    pii: t.Object(
      {
        email: PiiAction,
        phone: PiiAction,
        ip: PiiAction,
      },
      { additionalProperties: false, default: { email: 'mask', phone: 'mask', ip: 'drop' } },
    ),
    /** Event properties kept (empty: all). */
    propertyAllowList: t.Array(t.String(), { default: [] }),
    /** Days raw events are kept; the purge job deletes older ones. */
    retentionDays: t.Integer({ minimum: 1, maximum: 3650, default: 30 }),
  },
  { additionalProperties: false },
)
export type EnvironmentSettings = typeof EnvironmentSettings.static

export interface Environment {
  id: string
  gameId: string
  name: string
  type: (typeof ENV_TYPES)[number]
  displayName: string
  description: string
  settings: EnvironmentSettings
  createdAt: string
  updatedAt: string
}

/**
 * What the games plugin offers other plugins (`ctx.service('games')`). Reads are served from
 * an in-memory cache kept current on every write, so ingestion can call them per request.
 */
export interface GamesService {
  /** The environment, or undefined when the game or environment does not exist. */
  environment(gameId: string, name: string): Promise<Environment | undefined>
  gameExists(gameId: string): Promise<boolean>
  /** The game's IANA time zone (its days for analytics), or undefined when there is no such game. */
  timezone(gameId: string): Promise<string | undefined>
  /** Every environment of every game (for purge jobs and the like). */
  environments(): Promise<Environment[]>
  /**
   * Called after any game or environment is created, changed or deleted, here or on another
   * instance (`local`: by this one; a deleted game names no environment). A deletion made here
   * answers after the promise `fn` returns settles (it should not reject).
   */
  onChange(
    fn: (change: {
      gameId: string
      environment?: string
      deleted: boolean
      local?: boolean
    }) => void | Promise<void>,
  ): void
}

declare module '../../core/plugin' {
  interface Services {
    games: GamesService
  }
}
