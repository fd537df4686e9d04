import { Elysia, t } from 'elysia'
import { NotFound, invalidField } from '../../../core/http'
import type { PluginContext } from '../../../core/plugin'
import type { GamesService } from '../../games/types'
import { DAY } from '../lib/time'
import { zone } from '../lib/zone'
import type { DayRange, gameAnalytics } from './game'

type Game = ReturnType<typeof gameAnalytics>

/** Widest range one request may ask for. */
const MAX_DAYS = 366
const MAX_PERF_MS = 31 * DAY
const DEFAULT_DAYS = 30

const Params = t.Object({ gameId: t.String({ minLength: 1 }) })
const DateQuery = t.Object({
  startDate: t.Optional(
    t.String({ description: 'YYYY-MM-DD, a day of the game (its time zone); with endDate' }),
  ),
  endDate: t.Optional(
    t.String({ description: 'YYYY-MM-DD, inclusive; default: today, and the 30 days up to it' }),
  ),
  env: t.Optional(
    t.String({ minLength: 1, description: 'one environment; absent: every environment summed' }),
  ),
})
const TimeQuery = t.Object({
  startDate: t.Optional(
    t.String({ description: 'ISO 8601 date-time (inclusive, to the hour); default: 24 hours ago' }),
  ),
  endDate: t.Optional(t.String({ description: 'ISO 8601 date-time (exclusive); default: now' })),
  env: t.Optional(t.String({ minLength: 1 })),
})

const DATE = /^(\d{4})-(\d{2})-(\d{2})$/
function parseDate(value: string, field: string): number {
  const m = DATE.exec(value)
  const ms = m ? Date.UTC(Number(m[1]), Number(m[2]) - 1, Number(m[3])) : Number.NaN
  if (!m || Number.isNaN(ms) || new Date(ms).toISOString().slice(0, 10) !== value)
    throw invalidField(`query.${field}`, `must be a date YYYY-MM-DD, got '${value}'`)
  return ms
}

/** Checks both bounds: given together, in order, at most `maxDays` apart (the last `defaultDays` when absent). */
export function dayRange(
  q: { startDate?: string; endDate?: string },
  today: number,
  defaultDays = DEFAULT_DAYS,
  maxDays = MAX_DAYS,
): { from: number; to: number } {
  if ((q.startDate === undefined) !== (q.endDate === undefined))
    throw invalidField(
      q.startDate === undefined ? 'query.startDate' : 'query.endDate',
      'startDate and endDate go together',
    )
  if (q.startDate === undefined || q.endDate === undefined)
    return { from: today - (defaultDays - 1) * DAY, to: today }
  const from = parseDate(q.startDate, 'startDate')
  const to = parseDate(q.endDate, 'endDate')
  if (to < from) throw invalidField('query.endDate', `must not be before startDate (${q.startDate})`)
  if ((to - from) / DAY + 1 > maxDays)
    throw invalidField('query.endDate', `the range spans more than ${maxDays} days`)
  return { from, to }
}

const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})$/
function parseTime(value: string, field: string): number {
  const ms = ISO.test(value) ? Date.parse(value) : Number.NaN
  if (Number.isNaN(ms))
    throw invalidField(`query.${field}`, `must be an ISO 8601 date-time with its offset, got '${value}'`)
  return ms
}

export function timeRange(
  q: { startDate?: string; endDate?: string },
  now: number,
): { from: number; to: number } {
  const start = q.startDate === undefined ? undefined : parseTime(q.startDate, 'startDate')
  const to = q.endDate === undefined ? now : parseTime(q.endDate, 'endDate')
  const from = start ?? to - DAY
  if (to <= from) throw invalidField('query.endDate', 'must be after startDate')
  if (to - from > MAX_PERF_MS) throw invalidField('query.endDate', 'the range spans more than 31 days')
  return { from, to }
}

const Num = t.Number()
const PerfStat = t.Object({ avgValue: Num, count: t.Integer() })

/** A game analytics route's permission and OpenAPI detail. */
const doc = (summary: string, description?: string) => ({
  permission: 'analytics:read' as const,
  detail: {
    tags: ['game analytics'],
    summary,
    description,
    responses: { 404: { description: 'unknown game' } },
  },
})

const revenueOverviewDoc = doc(
  'Revenue of the range: payments (iap, subscription; success only, each order once) and ad impressions',
  "Amounts in the currency's main unit; totalRevenue = iap + subscription + ads.",
)

const revenueArpuDoc = doc('Per day: ARPU = revenue / active users (DAU), ARPPU = revenue / paying users')

const revenueByPlatformDoc = doc(
  "Payment revenue per platform (the payment's platform attribute), ARPU and ARPPU over the users and payers of the range on that platform (their latest session_start)",
)

const adsOverviewDoc = doc(
  'Ad revenue and impressions (ad_impression), eCPM = revenue / impressions x 1000, fill rate = filled / requested (ad_request)',
)

const adsByNetworkDoc = doc('The same per network, highest revenue first')

const sessionsOverviewDoc = doc(
  'Ended sessions (session_end): average duration (ms), events per session, bounce rate = share of sessions with exactly one event',
)

const sessionsTrendsDoc = doc('The same per day')

const performanceOverviewDoc = doc(
  'perf samples per metric (average value, count) and crashes (count; no value), between two date-times to the hour',
)

const performanceCrashesDoc = doc('Crash groups by crashHash, most frequent first')

const socialOverviewDoc = doc(
  'Friendships (friend_add), guild joins (guild_join), viral coefficient = users invited per active user, averaged over the days with users',
)

const socialRetentionImpactDoc = doc(
  'Users first seen in the range: D7 retention of those who did something social against the others; lift = social / non-social - 1',
  "Only cohorts whose day 7 has come (in the game's time zone) count, as /api/v1/analytics/retention shows the later cells as null.",
)

/**
 * Game analytics (spec 1, `/api/analytics/...`; the general error body). Dates are days of the
 * game's time zone; `env` narrows to one environment (absent: all summed).
 */
export function gameRoutes(guard: PluginContext<unknown>['guard'], games: GamesService, game: () => Game) {
  const scope = async (
    gameId: string,
    q: { startDate?: string; endDate?: string; env?: string },
  ): Promise<DayRange & { today: number }> => {
    const tz = await games.timezone(gameId)
    if (tz === undefined) throw new NotFound(`game '${gameId}' not found`)
    const today = zone(tz).today()
    return { gameId, env: q.env, ...dayRange(q, today), today }
  }
  const timeScope = async (gameId: string, q: { startDate?: string; endDate?: string; env?: string }) => {
    if (!(await games.gameExists(gameId))) throw new NotFound(`game '${gameId}' not found`)
    return { gameId, env: q.env, ...timeRange(q, Date.now()) }
  }
  const dated = { params: Params, query: DateQuery }
  return new Elysia({ name: 'analytics.game' })
    .use(guard)
    .get(
      '/api/analytics/revenue/:gameId/overview',
      async ({ params, query }) => game().revenueOverview(await scope(params.gameId, query)),
      {
        ...dated,
        ...revenueOverviewDoc,
        response: {
          200: t.Object({
            totalRevenue: Num,
            iapRevenue: Num,
            adRevenue: Num,
            subscriptionRevenue: Num,
            days: t.Integer(),
          }),
        },
      },
    )
    .get(
      '/api/analytics/revenue/:gameId/arpu',
      async ({ params, query }) => game().arpu(await scope(params.gameId, query)),
      {
        ...dated,
        ...revenueArpuDoc,
        response: {
          200: t.Array(
            t.Object({
              date: t.String(),
              arpu: Num,
              arppu: Num,
              payingUsers: t.Integer(),
              totalUsers: t.Integer(),
            }),
          ),
        },
      },
    )
    .get(
      '/api/analytics/revenue/:gameId/by-platform',
      async ({ params, query }) => game().byPlatform(await scope(params.gameId, query)),
      {
        ...dated,
        ...revenueByPlatformDoc,
        response: { 200: t.Array(t.Object({ platform: t.String(), revenue: Num, arpu: Num, arppu: Num })) },
      },
    )
    .get(
      '/api/analytics/ads/:gameId/overview',
      async ({ params, query }) => game().adsOverview(await scope(params.gameId, query)),
      {
        ...dated,
        ...adsOverviewDoc,
        response: {
          200: t.Object({
            totalRevenue: Num,
            totalImpressions: t.Integer(),
            avgEcpm: Num,
            avgFillRate: Num,
            networkCount: t.Integer(),
          }),
        },
      },
    )
    .get(
      '/api/analytics/ads/:gameId/by-network',
      async ({ params, query }) => game().adsByNetwork(await scope(params.gameId, query)),
      {
        ...dated,
        ...adsByNetworkDoc,
        response: {
          200: t.Array(
            t.Object({
              network: t.String(),
              revenue: Num,
              impressions: t.Integer(),
              ecpm: Num,
              fillRate: Num,
              requests: t.Integer(),
              filled: t.Integer(),
            }),
          ),
        },
      },
    )
    .get(
      '/api/analytics/sessions/:gameId/overview',
      async ({ params, query }) => game().sessionsOverview(await scope(params.gameId, query)),
      {
        ...dated,
        ...sessionsOverviewDoc,
        response: {
          200: t.Object({
            avgSessionDuration: Num,
            avgEventsPerSession: Num,
            avgBounceRate: Num,
            days: t.Integer(),
          }),
        },
      },
    )
    .get(
      '/api/analytics/sessions/:gameId/trends',
      async ({ params, query }) => game().sessionTrends(await scope(params.gameId, query)),
      {
        ...dated,
        ...sessionsTrendsDoc,
        response: {
          200: t.Array(t.Object({ date: t.String(), avgDuration: Num, avgEvents: Num, bounceRate: Num })),
        },
      },
    )
    .get(
      '/api/analytics/performance/:gameId/overview',
      async ({ params, query }) => game().performance(await timeScope(params.gameId, query)),
      {
        params: Params,
        query: TimeQuery,
        ...performanceOverviewDoc,
        response: {
          200: t.Object({
            FPS: PerfStat,
            LAG: PerfStat,
            CRASH: PerfStat,
            MEMORY: PerfStat,
            LOAD_TIME: PerfStat,
          }),
        },
      },
    )
    .get(
      '/api/analytics/performance/:gameId/crashes',
      async ({ params, query }) => game().crashes(await timeScope(params.gameId, query)),
      {
        params: Params,
        query: TimeQuery,
        ...performanceCrashesDoc,
        response: {
          200: t.Array(
            t.Object({
              crashHash: t.String(),
              count: t.Integer(),
              firstSeen: t.String(),
              lastSeen: t.String(),
            }),
          ),
        },
      },
    )
    .get(
      '/api/analytics/social/:gameId/overview',
      async ({ params, query }) => game().socialOverview(await scope(params.gameId, query)),
      {
        ...dated,
        ...socialOverviewDoc,
        response: {
          200: t.Object({
            totalFriendships: t.Integer(),
            totalGuilds: t.Integer(),
            avgViralCoefficient: Num,
            days: t.Integer(),
          }),
        },
      },
    )
    .get(
      '/api/analytics/social/:gameId/retention-impact',
      async ({ params, query }) => {
        const q = await scope(params.gameId, query)
        return game().retentionImpact(q, q.today)
      },
      {
        ...dated,
        ...socialRetentionImpactDoc,
        response: {
          200: t.Object({ socialUsersD7Retention: Num, nonSocialUsersD7Retention: Num, retentionLift: Num }),
        },
      },
    )
}
