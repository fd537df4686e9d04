/**
 * The fields of the API's answers the console reads (the OpenAPI description at /v3/api-docs
 * has the whole shapes). Answers may carry more fields; the console ignores what it does not use.
 */

export type GameStatus = 'DEVELOPMENT' | 'TESTING' | 'LIVE' | 'MAINTENANCE' | 'DISCONTINUED'

export interface Game {
  id: string
  name: string
  genre: string
  platforms: string[]
  timezone: string
  defaultCurrency: string
  description: string
  status: GameStatus
  createdAt: string
  updatedAt: string
}

export interface Page<T> {
  items: T[]
  total: number
  page: number
  size: number
}

export interface EnvSettings {
  samplingRate: number
  rateLimit: { requestsPerMinutePerKey: number; burstPerSecondPerKey: number; requestsPerMinutePerIp: number }
  pii: { email: string; phone: string; ip: string }
  propertyAllowList: string[]
  retentionDays: number
}

export interface Environment {
  id: string
  gameId: string
  name: string
  type: 'DEVELOPMENT' | 'STAGING' | 'PRODUCTION'
  displayName: string
  description: string
  settings: EnvSettings
  apiKeys: { id: string; name: string; prefix: string; createdAt: string }[]
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
  key?: string
}

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
export const PLATFORMS = ['ANDROID', 'IOS', 'WEB'] as const

/** Status changes the API allows (spec 1); publish and unpublish are the LIVE and MAINTENANCE moves. */
export const NEXT_STATUS: Record<GameStatus, GameStatus[]> = {
  DEVELOPMENT: ['TESTING'],
  TESTING: ['LIVE', 'DEVELOPMENT'],
  LIVE: ['MAINTENANCE'],
  MAINTENANCE: ['LIVE', 'DISCONTINUED'],
  DISCONTINUED: [],
}
