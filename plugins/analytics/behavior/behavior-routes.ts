import { Elysia, t } from 'elysia'
import { invalidField } from '../../../core/http'
import type { PluginContext } from '../../../core/plugin'
import { Enum } from '../../../core/schema'
import type { GamesService } from '../../games/types'
import { DAY, HOUR, MINUTE } from '../lib/time'
import { intParam } from '../schema'
import type { behaviorAnalytics } from './behavior'
import { DIMENSIONS, type Dimension } from './behavior-rollup'
import type { levelAnalytics } from './levels'
import { levelRoutes } from './levels-routes'
import { Days, Int, MAX_RAW_MS, Paging, Times, doc, list, scope, scoping } from './route-scope'
import { WalkGate } from './walk-gate'

type Behavior = ReturnType<typeof behaviorAnalytics>
type Levels = ReturnType<typeof levelAnalytics>

const UNITS = { second: 1000, minute: MINUTE, hour: HOUR, day: DAY } as const
const Step = t.Object(
  {
    event: t.String({ minLength: 1, maxLength: 128, description: 'event name' }),
    // Bounded: each key is compared on every event of the step's name (a step of 600,000 keys
    // held the server for 51 s, sixteenth session's audit).
    properties: t.Optional(
      t.Record(
        t.String({ pattern: '^.{1,128}$' }),
        t.Union([t.String({ maxLength: 1024 }), t.Number(), t.Boolean()]),
        {
          maxProperties: 20,
          additionalProperties: false,
          description:
            'attributes the event must carry (top level or in attrs), compared as text: at most 20, names up to 128 characters, text values up to 1,024',
        },
      ),
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
const DIMENSION_VALUES = Object.keys(DIMENSIONS) as [Dimension, ...Dimension[]]

const behaviorEventsDoc = doc(
  'Raw events of a time range, newest first (client time), paged, with their properties; total counts every match',
  'Filters: event name, userId, range (default the last 24 hours, at most 7 days). Pages reach the 10,000 newest matches.',
)

/** A walk's doc: its 429 beside the 404 (see `WalkGate`). */
const walkDoc = (summary: string, description: string) => {
  const d = doc(
    summary,
    `${description} One paths or funnel read per caller at a time in a process: 429 past it.`,
  )
  return {
    ...d,
    detail: {
      ...d.detail,
      responses: {
        ...d.detail.responses,
        429: {
          description:
            'the caller’s rate limit, or `too_many_walks`: a paths or funnel read of the caller is running',
        },
      },
    },
  }
}

const behaviorPathsDoc = walkDoc(
  'Top paths: the most frequent sequences of event names per session (or per user), with counts and share',
  'Per user, events in client-time order; a session begins at each session_start or after 30 minutes without an event. Repeats in a row count as one step; a path keeps its first `length` steps, from its first startEvent when given (sessions without it are left out). share = count / paths counted. From raw events of the range (default the last 24 hours, at most 7 days); events without a user are left out.',
)

const behaviorFunnelDoc = walkDoc(
  'Funnel: users reaching each of 2-10 ordered steps within a conversion window, conversion and drop-off per step, median times',
  'Per user, each occurrence of the first step starts an attempt (any step, for order any); the user counts at the furthest step any attempt reached, times from the earliest attempt reaching it. Every step happens within the window of the first (inclusive: exactly the window still converts). ordered: in order, other events between allowed; strict: in order, no other event of the user between two steps; any: the steps in any order, step k = users who did any k distinct steps. conversionFromFirst = users / users of step 1; conversionFromPrevious = users / users of the step before; dropOff = users of the step before - users. Every step inside the range (default the last 24 hours, at most 7 days), from raw events; events without a user are left out.',
)

const behaviorAdoptionDoc = doc(
  'Feature adoption from feature_use: per feature its users, uses, share of active users, first and last use',
  "Active users: those who logged in or started a session in the range, and every feature user. Distinct users from the rollup's sketches (exact for a few, within about 1.6% beyond). Default the last 30 days, at most 92.",
)

const behaviorAdoptionBreakdownDoc = doc(
  "One feature's users and uses per value of a dimension (platform, app_version, country)",
  "Values are the feature_use event's own attributes (platform and country upper-cased); share = users with the value / the feature's users. Uses without the attribute are in no value.",
)

const paymentsProductTrendDoc = doc(
  'Revenue per product per day (product_id of successful payments, each order once) and the top products',
  "Amounts in the currency's main unit; refunds per product beside. A payment without product_id is under productId null. Default the last 30 days, at most 366.",
)

const paymentsTransactionsDoc = doc(
  'Payments of a range, newest first (client time), paged: each order and status once',
  'Filters status, userId, productId; range default the last 30 days, at most 366.',
)

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
  const { days, times, paging } = scoping(games)
  const walks = new WalkGate()
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
          ...behaviorEventsDoc,
        },
      )
      .get(
        '/api/v1/analytics/behavior/paths',
        async ({ query, principal }) =>
          walks.run(principal, async () =>
            behavior().paths({
              ...(await times(query, DAY, MAX_RAW_MS)),
              top: intParam(query.top, 'top', 1, 100, 10),
              length: intParam(query.length, 'length', 2, 20, 5),
              by: query.by ?? 'session',
              startEvent: query.startEvent,
              exclude: list(query.exclude),
            }),
          ),
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
          ...behaviorPathsDoc,
        },
      )
      .post(
        '/api/v1/analytics/behavior/funnel',
        async ({ query, body, principal }) => {
          // The scope from the query, as every analytics route (spec 1); the range in the body.
          const r = await times(
            { ...query, startDate: body.startDate, endDate: body.endDate },
            DAY,
            MAX_RAW_MS,
            'body',
          )
          const window = body.window ? body.window.value * UNITS[body.window.unit] : DAY
          if (window > MAX_RAW_MS) throw invalidField('body.window', 'must be at most 7 days')
          return walks.run(principal, () =>
            behavior().funnel({ ...r, steps: body.steps, window, order: body.order ?? 'ordered' }),
          )
        },
        {
          // A query sent as POST: nothing changes.
          audit: false,
          query: t.Object(scope),
          body: FunnelIn,
          ...behaviorFunnelDoc,
        },
      )
      .get(
        '/api/v1/analytics/behavior/adoption',
        async ({ query }) => behavior().adoption(await days(query, 30, 92)),
        {
          query: t.Object(Days(30, 92)),
          ...behaviorAdoptionDoc,
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
          ...behaviorAdoptionBreakdownDoc,
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
          ...paymentsProductTrendDoc,
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
          ...paymentsTransactionsDoc,
        },
      )
      .use(levelRoutes(guard, games, levels))
  )
}
