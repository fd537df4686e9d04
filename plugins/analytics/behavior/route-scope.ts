import { t } from 'elysia'
import { NotFound, invalidField } from '../../../core/http'
import type { GamesService } from '../../games/types'
import { dayRange } from '../game/game-routes'
import { DAY } from '../lib/time'
import { type Zone, zone } from '../lib/zone'
import { intParam } from '../schema'

/** Raw reads (funnels, paths, event lists) span at most this much client time. */
export const MAX_RAW_MS = 7 * DAY
const DATE = /^(\d{4})-(\d{2})-(\d{2})$/
const DATE_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})$/

/** A date `YYYY-MM-DD` as its UTC midnight (the game's day), or undefined when it is no date. */
function parseDay(value: string): number | undefined {
  const m = DATE.exec(value)
  if (!m) return undefined
  const ms = Date.UTC(Number(m[1]), Number(m[2]) - 1, Number(m[3]))
  return new Date(ms).toISOString().slice(0, 10) === value ? ms : undefined
}

/** The instant a local day (its UTC midnight) begins in the zone. */
const dayStart = (z: Zone, day: number) => day - z.offset(day - z.offset(day))

/**
 * Client time `[from, to)` of a raw read. Each bound is a date (the game's day: a start at its
 * first instant, an end inclusive, to the day's end) or an ISO 8601 date-time with its offset.
 * Absent end: now; absent start: `def` ms before the end. Reversed or wider than `max`: 400.
 */
export function timeRange(
  q: { startDate?: string; endDate?: string },
  z: Zone,
  now: number,
  def: number,
  max: number,
  at = 'query',
): { from: number; to: number } {
  const parse = (value: string, field: 'startDate' | 'endDate') => {
    const day = parseDay(value)
    if (day !== undefined) return dayStart(z, field === 'endDate' ? day + DAY : day)
    const ms = DATE_TIME.test(value) ? Date.parse(value) : Number.NaN
    if (Number.isNaN(ms))
      throw invalidField(
        `${at}.${field}`,
        `must be a date YYYY-MM-DD or an ISO 8601 date-time with its offset, got '${value}'`,
      )
    return ms
  }
  const to = q.endDate === undefined ? now : parse(q.endDate, 'endDate')
  const from = q.startDate === undefined ? to - def : parse(q.startDate, 'startDate')
  if (to <= from) throw invalidField(`${at}.endDate`, 'must be after startDate')
  if (to - from > max)
    throw invalidField(`${at}.endDate`, `the range spans more than ${Math.round(max / DAY)} days`)
  return { from, to }
}

export const Int = (description: string) => t.Optional(t.String({ pattern: '^-?[0-9]+$', description }))
export const Num = (description: string) =>
  t.Optional(t.String({ pattern: '^-?[0-9]+(\\.[0-9]+)?$', description }))
export const scope = { gameId: t.String({ minLength: 1 }), env: t.String({ minLength: 1 }) }
export const Days = (def: number, max: number) => ({
  ...scope,
  startDate: t.Optional(
    t.String({
      description: `YYYY-MM-DD, a day of the game (its time zone); with endDate; default the last ${def} days`,
    }),
  ),
  endDate: t.Optional(
    t.String({ description: `YYYY-MM-DD, inclusive; at most ${max} days after startDate` }),
  ),
})
export const Times = (def: string, max: string) => ({
  ...scope,
  startDate: t.Optional(
    t.String({
      description: `a date YYYY-MM-DD (the game's day, from its start) or an ISO 8601 date-time with offset; default ${def} before endDate`,
    }),
  ),
  endDate: t.Optional(
    t.String({
      description: `a date (inclusive, to the day's end) or an ISO 8601 date-time (exclusive); default now; at most ${max} after startDate`,
    }),
  ),
})
export const Paging = {
  page: Int('0-based, default 0'),
  pageSize: Int('default 20, 1..100'),
}
export const list = (v: string | undefined) =>
  v === undefined
    ? []
    : v
        .split(',')
        .map((s) => s.trim())
        .filter(Boolean)

const NOT_FOUND = { 404: { description: 'unknown game or environment' } }
export const doc = (summary: string, description: string) => ({
  permission: 'analytics:read' as const,
  detail: { tags: ['analytics'], summary, description, responses: NOT_FOUND },
})

/** The scope helpers of the behavior, payment detail and level routes, over the games service. */
export function scoping(games: GamesService) {
  /** The game's zone and today in it; 404 for an unknown game or environment. */
  const scoped = async (q: { gameId: string; env: string }) => {
    const tz = await games.timezone(q.gameId)
    if (tz === undefined) throw new NotFound(`game '${q.gameId}' not found`)
    if (!(await games.environment(q.gameId, q.env)))
      throw new NotFound(`environment '${q.env}' of game '${q.gameId}' not found`)
    const z = zone(tz)
    return { z, today: z.today() }
  }
  const days = async (
    q: { gameId: string; env: string; startDate?: string; endDate?: string },
    def: number,
    max: number,
  ) => {
    const { today } = await scoped(q)
    return { gameId: q.gameId, env: q.env, ...dayRange(q, today, def, max) }
  }
  const times = async (
    q: { gameId: string; env: string; startDate?: string; endDate?: string },
    def: number,
    max: number,
    at = 'query',
  ) => {
    const { z } = await scoped(q)
    return { gameId: q.gameId, env: q.env, ...timeRange(q, z, Date.now(), def, max, at) }
  }
  const paging = (q: { page?: string; pageSize?: string }) => {
    const pageSize = intParam(q.pageSize, 'pageSize', 1, 100, 20)
    const page = intParam(q.page, 'page', 0, 1_000_000, 0)
    return { page, pageSize }
  }
  return { scoped, days, times, paging }
}
