import { Elysia, t } from 'elysia'
import { NotFound, invalidField } from '../../../core/http'
import type { PluginContext } from '../../../core/plugin'
import { Enum } from '../../../core/schema'
import type { GamesService } from '../../games/types'
import { dayRange } from '../game/game-routes'
import { DAY, HOUR, MINUTE } from '../lib/time'
import { type Zone, zone } from '../lib/zone'
import { intParam } from '../schema'
import type { behaviorAnalytics } from './behavior'
import { DIMENSIONS, type Dimension } from './behavior-rollup'
import type { levelAnalytics } from './levels'

type Behavior = ReturnType<typeof behaviorAnalytics>
type Levels = ReturnType<typeof levelAnalytics>

/** Raw reads (funnels, paths, event lists) span at most this much client time. */
export const MAX_RAW_MS = 7 * DAY
const UNITS = { second: 1000, minute: MINUTE, hour: HOUR, day: DAY } as const

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

const Int = (description: string) => t.Optional(t.String({ pattern: '^-?[0-9]+$', description }))
const Num = (description: string) => t.Optional(t.String({ pattern: '^-?[0-9]+(\\.[0-9]+)?$', description }))
const scope = { gameId: t.String({ minLength: 1 }), env: t.String({ minLength: 1 }) }
const Days = (def: number, max: number) => ({
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
const Times = (def: string, max: string) => ({
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
const Paging = {
  page: Int('0-based, default 0'),
  pageSize: Int('default 20, 1..100'),
}
const list = (v: string | undefined) =>
  v === undefined
    ? []
    : v
        .split(',')
        .map((s) => s.trim())
        .filter(Boolean)

const Step = t.Object(
  {
    event: t.String({ minLength: 1, description: 'event name' }),
    properties: t.Optional(
      t.Record(t.String(), t.Union([t.String(), t.Number(), t.Boolean()]), {
        description: 'attributes the event must carry (top level or in attrs), compared as text',
      }),
    ),
  },
  { additionalProperties: false },
)
const FunnelIn = t.Object(
  {
    steps: t.Array(Step, { minItems: 2, maxItems: 10, description: '2 to 10 steps, in order' }),
    window: t.Optional(
      t.Object(
        {
          value: t.Integer({ minimum: 1, description: 'conversion window length' }),
          unit: Enum(['second', 'minute', 'hour', 'day']),
        },
        {
          additionalProperties: false,
          description: 'every step within this long of the first; default 1 day, at most 7 days',
        },
      ),
    ),
    order: t.Optional(
      Enum(['ordered', 'strict', 'any'], {
        description:
          'ordered (default): steps in order, other events between allowed; strict: in order with no other event of the user between steps; any: the steps in any order',
      }),
    ),
    startDate: t.Optional(
      t.String({ description: 'date or ISO 8601 date-time; default 24 hours before endDate' }),
    ),
    endDate: t.Optional(
      t.String({
        description: 'date (inclusive) or ISO 8601 date-time (exclusive); default now; at most 7 days',
      }),
    ),
  },
  { additionalProperties: false },
)

const NOT_FOUND = { 404: { description: 'unknown game or environment' } }
const doc = (summary: string, description: string) => ({
  permission: 'analytics:read' as const,
  detail: { tags: ['analytics'], summary, description, responses: NOT_FOUND },
})
const DIMENSION_VALUES = Object.keys(DIMENSIONS) as [Dimension, ...Dimension[]]

/**
 * Behavior, payment detail and level routes of the server analytics (spec 1 "other endpoints",
 * issue 17), each scoped by `gameId` and `env` (404 for an unknown one), days in the game's
 * time zone, errors in the analytics body.
 */
export function behaviorRoutes(
  guard: PluginContext<unknown>['guard'],
  games: GamesService,
  behavior: () => Behavior,
  levels: () => Levels,
) {
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
  const aggregates = {
    query: t.Object({
      ...Days(7, 92),
      top: Int('event names, by count: default 10, 1..100'),
      events: t.Optional(t.String({ description: 'comma-separated event names: only these' })),
    }),
    ...doc(
      'Event aggregates: per event name its count and distinct users over the range and per day; the top names by count',
      "From the behavior rollup (day counters and HyperLogLog user sketches kept at ingest: users are exact for a few, within about 1.6% beyond). Days are the game's; default the last 7 days, at most 92.",
    ),
  }
  const aggregate = async ({ query }: { query: typeof aggregates.query.static }) => {
    const events = list(query.events)
    return behavior().aggregates({
      ...(await days(query, 7, 92)),
      top: intParam(query.top, 'top', 1, 100, 10),
      events: events.length ? events : undefined,
    })
  }
  return (
    new Elysia({ name: 'analytics.behavior' })
      .use(guard)
      .get('/api/v1/analytics/behavior', aggregate, aggregates)
      // Spec 1 names the path with its trailing slash: served, but described once (without it), as
      // the linters want one path and one operationId per operation (issue 38 point 4).
      .get('/api/v1/analytics/behavior/', aggregate, {
        ...aggregates,
        detail: { ...aggregates.detail, hide: true },
      })
      .get(
        '/api/v1/analytics/behavior/events',
        async ({ query }) => {
          const p = paging(query)
          if ((p.page + 1) * p.pageSize > 10_000)
            throw invalidField(
              'query.page',
              'pages reach at most the 10,000 newest events: narrow the range or the filters',
            )
          return behavior().events({
            ...(await times(query, DAY, MAX_RAW_MS)),
            ...p,
            event: query.event,
            userId: query.userId,
          })
        },
        {
          query: t.Object({
            ...Times('24 hours', '7 days'),
            event: t.Optional(t.String({ minLength: 1, description: 'one event name' })),
            userId: t.Optional(t.String({ minLength: 1 })),
            ...Paging,
          }),
          ...doc(
            'Raw events of a time range, newest first (client time), paged, with their properties; total counts every match',
            'Filters: event name, userId, range (default the last 24 hours, at most 7 days). Pages reach the 10,000 newest matches.',
          ),
        },
      )
      .get(
        '/api/v1/analytics/behavior/paths',
        async ({ query }) =>
          behavior().paths({
            ...(await times(query, DAY, MAX_RAW_MS)),
            top: intParam(query.top, 'top', 1, 100, 10),
            length: intParam(query.length, 'length', 2, 20, 5),
            by: query.by ?? 'session',
            startEvent: query.startEvent,
            exclude: list(query.exclude),
          }),
        {
          query: t.Object({
            ...Times('24 hours', '7 days'),
            top: Int('paths: default 10, 1..100'),
            length: Int('steps per path: default 5, 2..20'),
            by: t.Optional(
              Enum(['session', 'user'], { description: 'one path per session (default) or per user' }),
            ),
            startEvent: t.Optional(t.String({ minLength: 1, description: 'paths begin at this event' })),
            exclude: t.Optional(
              t.String({ description: 'comma-separated event names left out (e.g. heartbeat)' }),
            ),
          }),
          ...doc(
            'Top paths: the most frequent sequences of event names per session (or per user), with counts and share',
            'Per user, events in client-time order; a session begins at each session_start or after 30 minutes without an event. Repeats in a row count as one step; a path keeps its first `length` steps, from its first startEvent when given (sessions without it are left out). share = count / paths counted. From raw events of the range (default the last 24 hours, at most 7 days); events without a user are left out.',
          ),
        },
      )
      .post(
        '/api/v1/analytics/behavior/funnel',
        async ({ query, body }) => {
          // The scope from the query, as every analytics route (spec 1); the range in the body.
          const r = await times(
            { ...query, startDate: body.startDate, endDate: body.endDate },
            DAY,
            MAX_RAW_MS,
            'body',
          )
          const window = body.window ? body.window.value * UNITS[body.window.unit] : DAY
          if (window > MAX_RAW_MS) throw invalidField('body.window', 'must be at most 7 days')
          return behavior().funnel({ ...r, steps: body.steps, window, order: body.order ?? 'ordered' })
        },
        {
          // A query sent as POST: nothing changes.
          audit: false,
          query: t.Object(scope),
          body: FunnelIn,
          ...doc(
            'Funnel: users reaching each of 2-10 ordered steps within a conversion window, conversion and drop-off per step, median times',
            'Per user, each occurrence of the first step starts an attempt (any step, for order any); the user counts at the furthest step any attempt reached, times from the earliest attempt reaching it. Every step happens within the window of the first (inclusive: exactly the window still converts). ordered: in order, other events between allowed; strict: in order, no other event of the user between two steps; any: the steps in any order, step k = users who did any k distinct steps. conversionFromFirst = users / users of step 1; conversionFromPrevious = users / users of the step before; dropOff = users of the step before - users. Every step inside the range (default the last 24 hours, at most 7 days), from raw events; events without a user are left out.',
          ),
        },
      )
      .get(
        '/api/v1/analytics/behavior/adoption',
        async ({ query }) => behavior().adoption(await days(query, 30, 92)),
        {
          query: t.Object(Days(30, 92)),
          ...doc(
            'Feature adoption from feature_use: per feature its users, uses, share of active users, first and last use',
            "Active users: those who logged in or started a session in the range, and every feature user. Distinct users from the rollup's sketches (exact for a few, within about 1.6% beyond). Default the last 30 days, at most 92.",
          ),
        },
      )
      .get(
        '/api/v1/analytics/behavior/adoption/breakdown',
        async ({ query }) =>
          behavior().adoptionBreakdown({
            ...(await days(query, 30, 92)),
            feature: query.feature,
            dimension: query.dimension,
          }),
        {
          query: t.Object({
            ...Days(30, 92),
            feature: t.String({ minLength: 1 }),
            dimension: Enum(DIMENSION_VALUES, {
              description:
                'an attribute of the feature_use event: platform, app_version (or appVersion), country',
            }),
          }),
          ...doc(
            "One feature's users and uses per value of a dimension (platform, app_version, country)",
            "Values are the feature_use event's own attributes (platform and country upper-cased); share = users with the value / the feature's users. Uses without the attribute are in no value.",
          ),
        },
      )
      .get(
        '/api/v1/analytics/payments/product-trend',
        async ({ query }) =>
          behavior().productTrend({
            ...(await days(query, 30, 366)),
            top: intParam(query.top, 'top', 1, 50, 10),
          }),
        {
          query: t.Object({ ...Days(30, 366), top: Int('products by revenue: default 10, 1..50') }),
          ...doc(
            'Revenue per product per day (product_id of successful payments, each order once) and the top products',
            "Amounts in the currency's main unit; refunds per product beside. A payment without product_id is under productId null. Default the last 30 days, at most 366.",
          ),
        },
      )
      .get(
        '/api/v1/analytics/payments/transactions',
        async ({ query }) =>
          behavior().transactions({
            ...(await times(query, 30 * DAY, 366 * DAY)),
            ...paging(query),
            status: query.status,
            userId: query.userId,
            productId: query.productId,
          }),
        {
          query: t.Object({
            ...Times('30 days', '366 days'),
            status: t.Optional(Enum(['success', 'refunded', 'failed'])),
            userId: t.Optional(t.String({ minLength: 1 })),
            productId: t.Optional(t.String({ minLength: 1 })),
            ...Paging,
          }),
          ...doc(
            'Payments of a range, newest first (client time), paged: each order and status once',
            'Filters status, userId, productId; range default the last 30 days, at most 366.',
          ),
        },
      )
      .get(
        '/api/v1/analytics/levels',
        async ({ query }) => levels().levels({ ...(await days(query, 30, 366)), episode: query.episode }),
        {
          query: t.Object({
            ...Days(30, 366),
            episode: t.Optional(t.String({ description: 'one episode only' })),
          }),
          ...doc(
            'Per level: starts, completes, fails, players, pass rate, average duration; and the level funnel',
            'passRate = level_complete / level_start events of the range; failRate = level_fail / level_start; players: distinct users with any level event of it; avgDurationMs: mean duration_ms of its level_complete events (null without any). Levels of every episode with one name are merged unless episode is given. funnel: players per level in play order (numbers by value), shareOfFirst = players / players of the first level. Default the last 30 days, at most 366.',
          ),
        },
      )
      .get(
        '/api/v1/analytics/levels/episodes',
        async ({ query }) => levels().episodes(await days(query, 30, 366)),
        {
          query: t.Object(Days(30, 366)),
          ...doc(
            'Per episode: levels, starts, completes, fails, players, pass rate, average duration',
            'As /levels, summed over the levels of each episode (events without episode: ""); players are distinct over the episode.',
          ),
        },
      )
      .get(
        '/api/v1/analytics/levels/maps',
        async ({ query }) => {
          const bound = (v: string | undefined, field: string) => {
            if (v === undefined) return undefined
            const x = Number(v)
            if (!Number.isFinite(x) || Math.abs(x) > 1e12)
              throw invalidField(`query.${field}`, 'must be a number within ±1e12')
            return x
          }
          const bounds = {
            minX: bound(query.minX, 'minX'),
            maxX: bound(query.maxX, 'maxX'),
            minY: bound(query.minY, 'minY'),
            maxY: bound(query.maxY, 'maxY'),
          }
          if (bounds.minX !== undefined && bounds.maxX !== undefined && bounds.maxX <= bounds.minX)
            throw invalidField('query.maxX', 'must be greater than minX')
          if (bounds.minY !== undefined && bounds.maxY !== undefined && bounds.maxY <= bounds.minY)
            throw invalidField('query.maxY', 'must be greater than minY')
          return levels().map({
            ...(await times(query, 7 * DAY, 92 * DAY)),
            map: query.map,
            cells: intParam(query.cells, 'cells', 1, 100, 20),
            limit: intParam(query.limit, 'limit', 1, 1000, 100),
            bounds,
          })
        },
        {
          query: t.Object({
            ...Times('7 days', '92 days'),
            map: t.String({ description: 'the map attribute of level_fail ("" for none)' }),
            cells: Int('cells per axis of the heat grid: default 20, 1..100'),
            limit: Int('newest death points: default 100, 1..1000'),
            minX: Num('grid bounds (default: the deaths of the range)'),
            maxX: Num('grid bound'),
            minY: Num('grid bound'),
            maxY: Num('grid bound'),
          }),
          ...doc(
            'Death points of a map: a cells x cells heat grid of level_fail x/y and the newest points',
            'grid[row][column]: row by y from minY, column by x from minX; each cell spans (max - min) / cells, the maximum falls in the last cell; deaths outside given bounds are not in the grid. Only level_fail events with numeric x and y count. Default the last 7 days, at most 92.',
          ),
        },
      )
  )
}
