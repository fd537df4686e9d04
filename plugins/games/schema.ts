import { t } from 'elysia'
import { Enum, PageNumber } from '../../core/schema'
import { ReadOnly } from '../../core/strict'
import { ENV_TYPES, EnvironmentSettings, GAME_STATUSES, GENRES, PII_ACTIONS } from './types'

const PiiAction = Enum(PII_ACTIONS)

export const PLATFORMS = ['ANDROID', 'IOS', 'WEB'] as const

export const Genre = Enum(GENRES)
export const GameStatus = Enum(GAME_STATUSES)
export const EnvType = Enum(ENV_TYPES)
export const Platform = Enum(PLATFORMS)

export const Game = t.Object({
  id: t.String(),
  name: t.String(),
  genre: Genre,
  platforms: t.Array(t.String()),
  timezone: t.String(),
  defaultCurrency: t.String(),
  description: t.String(),
  status: GameStatus,
  createdAt: t.String({ description: 'ISO 8601 UTC' }),
  updatedAt: t.String({ description: 'ISO 8601 UTC' }),
})
export type Game = typeof Game.static

const Name = t.String({ minLength: 1, maxLength: 200 })
const Timezone = t.String({
  minLength: 1,
  maxLength: 64,
  description: 'IANA time-zone name, for example Europe/Berlin',
})
const Currency = t.String({ pattern: '^[A-Z]{3}$', description: 'ISO 4217 code, for example USD' })

export const GameCreate = t.Object(
  {
    name: Name,
    genre: Genre,
    platforms: t.Array(Platform, { uniqueItems: true, maxItems: 3 }),
    timezone: Timezone,
    defaultCurrency: Currency,
    description: t.Optional(t.String({ maxLength: 2000 })),
  },
  { additionalProperties: false },
)

export const GameUpdate = t.Object(
  {
    name: t.Optional(Name),
    description: t.Optional(t.String({ maxLength: 2000 })),
    genre: t.Optional(Genre),
    platforms: t.Optional(t.Array(Platform, { uniqueItems: true, maxItems: 3 })),
    timezone: t.Optional(Timezone),
    defaultCurrency: t.Optional(Currency),
    status: t.Optional(GameStatus),
    id: ReadOnly(),
    createdAt: ReadOnly(),
    updatedAt: ReadOnly('read-only: ignored, it changes with every write'),
  },
  { additionalProperties: false },
)

export const GameList = t.Object({
  items: t.Array(Game),
  total: t.Integer(),
  page: t.Integer(),
  size: t.Integer(),
})

export const ListQuery = t.Object({
  page: t.Optional(PageNumber(0, '0-based page; 0 when absent')),
  size: t.Optional(t.Integer({ minimum: 1, maximum: 100, description: 'page size; 20 when absent' })),
  sort: t.Optional(
    t.String({ description: 'field[,asc|desc]; fields: name, genre, status, createdAt, updatedAt' }),
  ),
  status: t.Optional(GameStatus),
  genre: t.Optional(Genre),
})

export const SettingsPatch = t.Partial(
  t.Object({
    samplingRate: t.Number({ minimum: 0, maximum: 1 }),
    // Written out without defaults: Elysia fills defaults in, and a patch must not reset what it omits.
    rateLimit: t.Partial(
      t.Object({
        requestsPerMinutePerKey: t.Integer({ minimum: 0 }),
        burstPerSecondPerKey: t.Integer({ minimum: 0 }),
        requestsPerMinutePerIp: t.Integer({ minimum: 0 }),
      }),
      { additionalProperties: false },
    ),
    pii: t.Partial(t.Object({ email: PiiAction, phone: PiiAction, ip: PiiAction }), {
      additionalProperties: false,
    }),
    propertyAllowList: t.Array(t.String({ minLength: 1 }), { maxItems: 500 }),
    retentionDays: t.Integer({ minimum: 1, maximum: 3650 }),
  }),
  { additionalProperties: false },
)
export type SettingsPatch = typeof SettingsPatch.static

const ApiKeyRef = t.Object({ id: t.String(), name: t.String(), prefix: t.String(), createdAt: t.String() })

export const Environment = t.Object({
  id: t.String(),
  gameId: t.String(),
  name: t.String(),
  type: EnvType,
  displayName: t.String(),
  description: t.String(),
  settings: EnvironmentSettings,
  apiKeys: t.Array(ApiKeyRef, {
    description:
      'active API keys bound to this environment (keys themselves are shown only once, at creation)',
  }),
  createdAt: t.String(),
  updatedAt: t.String(),
})

/** The longest environment name (`EnvName`): a longer one names none. */
export const ENV_NAME_MAX = 32
/**
 * Game ids are UUIDs (36 characters, made by the service): a path or query id longer than this
 * names no game, and is answered 404 without a read (not remembered either).
 */
export const GAME_ID_MAX = 64

export const EnvName = t.String({
  pattern: `^[a-z][a-z0-9-]{0,${ENV_NAME_MAX - 1}}$`,
  description: 'lower case, the key in paths',
})

export const EnvironmentCreate = t.Object(
  {
    name: EnvName,
    type: EnvType,
    displayName: t.Optional(t.String({ maxLength: 200 })),
    description: t.Optional(t.String({ maxLength: 2000 })),
    settings: t.Optional(SettingsPatch),
  },
  { additionalProperties: false },
)

export const EnvironmentUpdate = t.Object(
  {
    type: t.Optional(EnvType),
    displayName: t.Optional(t.String({ maxLength: 200 })),
    description: t.Optional(t.String({ maxLength: 2000 })),
    settings: t.Optional(SettingsPatch),
    id: ReadOnly(),
    gameId: ReadOnly(),
    name: ReadOnly('read-only: the key in paths; accepted when unchanged, else 400'),
    createdAt: ReadOnly(),
    updatedAt: ReadOnly('read-only: ignored, it changes with every write'),
    apiKeys: ReadOnly('read-only: ignored; manage keys through /api/api-keys'),
  },
  { additionalProperties: false },
)

export const ApiKeyCreate = t.Object(
  {
    name: t.String({ minLength: 1, maxLength: 100 }),
    gameId: t.String({ minLength: 1 }),
    environment: EnvName,
  },
  { additionalProperties: false },
)
export const ApiKey = t.Object({
  id: t.String(),
  name: t.String(),
  prefix: t.String({ description: 'first characters of the key, to recognise it' }),
  gameId: t.Union([t.String(), t.Null()]),
  environment: t.Union([t.String(), t.Null()]),
  createdBy: t.Union([t.String(), t.Null()]),
  createdAt: t.String(),
  lastUsedAt: t.Optional(t.String()),
  revokedAt: t.Optional(t.String()),
})
export const ApiKeyCreated = t.Composite([ApiKey, t.Object({ key: t.String({ description: 'shown once' }) })])
