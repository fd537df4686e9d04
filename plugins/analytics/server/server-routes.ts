import { Elysia, t } from 'elysia'
import { NotFound } from '../../../core/http'
import type { PluginContext } from '../../../core/plugin'
import { Enum } from '../../../core/schema'
import type { GamesService } from '../../games/types'
import { dayRange } from '../game/game-routes'
import { DAY } from '../lib/time'
import { zone } from '../lib/zone'
import { intParam } from '../schema'
import type { serverAnalytics } from './server'

type Server = ReturnType<typeof serverAnalytics>

const Scoped = {
  gameId: t.String({ minLength: 1 }),
  env: t.String({ minLength: 1 }),
  startDate: t.Optional(
    t.String({ description: 'YYYY-MM-DD, a day of the game (its time zone); with endDate' }),
  ),
  endDate: t.Optional(t.String({ description: 'YYYY-MM-DD, inclusive' })),
}
const Metric = t.Object({ value: t.Number(), previous: t.Number() })
const OverviewOut = t.Object({
  startDate: t.String(),
  endDate: t.String(),
  previousStartDate: t.String(),
  previousEndDate: t.String(),
  metrics: t.Object({
    dau: Metric,
    mau: Metric,
    newUsers: Metric,
    revenue: Metric,
    arpu: Metric,
    arppu: Metric,
    payingUsers: Metric,
    d1Retention: Metric,
  }),
})
const RetentionOut = t.Object({
  interval: t.String(),
  size: t.Integer(),
  cohorts: t.Array(
    t.Object({
      cohort: t.String(),
      users: t.Integer(),
      counts: t.Array(t.Union([t.Integer(), t.Null()])),
      retention: t.Array(t.Union([t.Number(), t.Null()])),
    }),
  ),
})

const PaymentsOut = t.Object({
  startDate: t.String(),
  endDate: t.String(),
  revenue: t.Number(),
  refunds: t.Number(),
  failed: t.Integer(),
  transactions: t.Integer(),
  payingUsers: t.Integer(),
  arppu: t.Number(),
  avgTransaction: t.Number(),
})
const PaymentsDailyOut = t.Array(
  t.Object({
    date: t.String(),
    revenue: t.Number(),
    refunds: t.Number(),
    transactions: t.Integer(),
    users: t.Integer(),
  }),
)

/** Documented beside the success answer: an unknown game or environment. */
const NOT_FOUND = { 404: { description: 'unknown game or environment' } }

const overviewDoc = {
  tags: ['analytics'],
  responses: NOT_FOUND,
  summary: 'KPIs of a period (default the last 7 days) beside the period as long just before it',
  description:
    "dau: average daily active users (login, session_start); mau: distinct users of the 30 days ending with the period; newUsers: first seen; revenue: successful payments (main currency unit); arpu = revenue / active users of the period; arppu = revenue / paying users; d1Retention: share of the users first seen in the period (its last day excluded) active the next day. Days are the game's (its time zone). At most 92 days.",
}

const retentionDoc = {
  tags: ['analytics'],
  responses: NOT_FOUND,
  summary:
    'Cohort retention: users first seen per day (week), and the share active 1..size days (weeks) after',
  description:
    "Cohorts of the range (default the last 14 days, or 8 weeks); an offset not reached yet is null. Active: login or session_start. Days are the game's.",
}

const paymentsDoc = {
  tags: ['analytics'],
  responses: NOT_FOUND,
  summary:
    'Payment summary of a period (default the last 30 days): revenue (successful, each order once), refunds, failed payments, transactions, paying users',
  description:
    "Amounts in the currency's main unit; arppu = revenue / paying users; avgTransaction = revenue / transactions. Days are the game's.",
}

/** Server analytics beyond the warehouse family (spec 1 "other endpoints"; the analytics error body). */
export function serverRoutes(
  guard: PluginContext<unknown>['guard'],
  games: GamesService,
  server: () => Server,
) {
  /** The game's environment and today in its time zone; 404 when either does not exist. */
  const scoped = async (q: { gameId: string; env: string }) => {
    const tz = await games.timezone(q.gameId)
    if (tz === undefined) throw new NotFound(`game '${q.gameId}' not found`)
    if (!(await games.environment(q.gameId, q.env)))
      throw new NotFound(`environment '${q.env}' of game '${q.gameId}' not found`)
    return zone(tz).today()
  }
  return new Elysia({ name: 'analytics.server' })
    .use(guard)
    .get(
      '/api/v1/analytics/overview',
      async ({ query }) => {
        const today = await scoped(query)
        const r = dayRange(query, today, 7, 92)
        return server().overview({ gameId: query.gameId, env: query.env, ...r })
      },
      {
        permission: 'analytics:read',
        query: t.Object(Scoped),
        response: { 200: OverviewOut },
        detail: overviewDoc,
      },
    )
    .get(
      '/api/v1/analytics/retention',
      async ({ query }) => {
        const today = await scoped(query)
        const interval = query.interval ?? 'day'
        const max = interval === 'day' ? 30 : 12
        const size = intParam(query.size, 'size', 1, max, interval === 'day' ? 30 : 8)
        if (interval === 'week' && query.startDate === undefined)
          return server().retention(
            { gameId: query.gameId, env: query.env, from: today - 55 * DAY, to: today, interval, size },
            today,
          )
        const r = dayRange(query, today, 14, 92)
        return server().retention({ gameId: query.gameId, env: query.env, ...r, interval, size }, today)
      },
      {
        permission: 'analytics:read',
        query: t.Object({
          ...Scoped,
          interval: t.Optional(
            Enum(['day', 'week'], {
              description: 'cohorts per day or per week (from Monday); absent: day',
            }),
          ),
          size: t.Optional(
            t.String({
              pattern: '^-?[0-9]+$',
              description: 'offsets: D1..D30 (default 30) or W1..W12 (default 8)',
            }),
          ),
        }),
        response: { 200: RetentionOut },
        detail: retentionDoc,
      },
    )
    .get(
      '/api/v1/analytics/payments',
      async ({ query }) =>
        server().payments({
          gameId: query.gameId,
          env: query.env,
          ...dayRange(query, await scoped(query), 30, 366),
        }),
      {
        permission: 'analytics:read',
        query: t.Object(Scoped),
        response: { 200: PaymentsOut },
        detail: paymentsDoc,
      },
    )
    .get(
      '/api/v1/analytics/payments/summary',
      async ({ query }) =>
        server().paymentsDaily({
          gameId: query.gameId,
          env: query.env,
          ...dayRange(query, await scoped(query), 30, 366),
        }),
      {
        permission: 'analytics:read',
        query: t.Object(Scoped),
        response: { 200: PaymentsDailyOut },
        detail: {
          tags: ['analytics'],
          responses: NOT_FOUND,
          summary:
            'Payments per day of a period (default the last 30 days): revenue, refunds, transactions, paying users',
        },
      },
    )
}
