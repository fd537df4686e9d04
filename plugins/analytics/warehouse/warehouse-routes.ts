import { Elysia, t } from 'elysia'
import { NotFound, ServiceUnavailable } from '../../../core/http'
import type { PluginContext } from '../../../core/plugin'
import type { GamesService } from '../../games/types'
import type { IngestService } from '../../ingest/types'
import * as S from '../schema'
import type { warehouseStore } from './warehouse'

type Warehouse = ReturnType<typeof warehouseStore>

/** Documented beside each read's success answer. */
const MISSING = {
  404: { description: 'unknown game, or unknown environment when one is named' },
  503: { description: 'no analytics warehouse is configured (WAREHOUSE_DSN)' },
}

/**
 * The warehouse family of the server analytics (`/api/v1/analytics/warehouse/*`, the
 * invocation reads) and the server-side writes, moved from ingest (issue 16 point 5).
 */
export function warehouseRoutes(
  guard: PluginContext<unknown>['guard'],
  games: GamesService,
  ingest: IngestService,
  warehouse: () => Warehouse | undefined,
) {
  /**
   * The warehouse, once the game (and the environment, when named) is known: 503 without a
   * warehouse, then 404 for a mistyped id, which would otherwise read as a game with no players.
   */
  const wh = async (q: { gameId: string; env?: string }): Promise<Warehouse> => {
    const w = warehouse()
    if (!w) throw new ServiceUnavailable('no analytics warehouse is configured (WAREHOUSE_DSN)')
    if (!(await games.gameExists(q.gameId))) throw new NotFound(`game '${q.gameId}' not found`)
    if (q.env !== undefined && !(await games.environment(q.gameId, q.env)))
      throw new NotFound(`environment '${q.env}' of game '${q.gameId}' not found`)
    return w
  }
  return new Elysia({ name: 'analytics.warehouse' })
    .use(guard)
    .post('/api/v1/analytics/ingest', ({ body }) => ingest.write(body, { payments: false }), {
      permission: 'analytics:write',
      // Events, not configuration: the data plane is not audited.
      audit: false,
      body: t.Array(t.Unknown()),
      response: { 200: S.ServerIngestOut },
      detail: { tags: ['analytics'], summary: 'Server-side event write (not sampled)' },
    })
    .post('/api/v1/analytics/payments/ingest', ({ body }) => ingest.write(body, { payments: true }), {
      permission: 'analytics:write',
      audit: false,
      body: t.Array(t.Unknown()),
      response: { 200: S.ServerIngestOut },
      detail: {
        tags: ['analytics'],
        summary: 'Server-side payment write',
        description:
          "The game server's verified payments. A payment of an order and status a signed client stored first supersedes the client's: every revenue figure, product counter and transaction list then holds the server's values (docs/security.md, 'Superseding payments'); a second server write of the same order and status is a duplicate, counted once.",
      },
    })
    .get(
      '/api/v1/analytics/warehouse/dau',
      async ({ query }) =>
        (await wh(query)).dau({ ...query, days: S.intParam(query.days, 'days', 1, 90, 14) }),
      {
        permission: 'analytics:read',
        query: S.DauQuery,
        response: { 200: S.DauOut },
        detail: {
          tags: ['analytics'],
          responses: MISSING,
          summary: 'DAU (login, session_start) and new users (first sight) per UTC day and environment',
        },
      },
    )
    .get(
      '/api/v1/analytics/warehouse/online',
      async ({ query }) =>
        (await wh(query)).online({ ...query, minutes: S.intParam(query.minutes, 'minutes', 1, 1440, 60) }),
      {
        permission: 'analytics:read',
        query: S.OnlineQuery,
        response: { 200: S.OnlineOut },
        detail: {
          tags: ['analytics'],
          responses: MISSING,
          summary:
            'Per-minute approximate distinct online users (heartbeat, session_start; HyperLogLog, ~1.6% error), summed over environments',
        },
      },
    )
    .get(
      '/api/v1/analytics/warehouse/revenue',
      async ({ query }) =>
        (await wh(query)).revenue({ ...query, days: S.intParam(query.days, 'days', 1, 90, 14) }),
      {
        permission: 'analytics:read',
        query: S.DauQuery,
        response: { 200: S.RevenueOut },
        detail: {
          tags: ['analytics'],
          responses: MISSING,
          summary: 'Revenue, refunds (cents) and failed payments per UTC day',
        },
      },
    )
    .get(
      '/api/v1/analytics/invocations/summary',
      async ({ query }) =>
        (await wh(query)).summary({ ...query, hours: S.intParam(query.hours, 'hours', 1, 720, 24) }),
      {
        permission: 'analytics:read',
        query: S.SummaryQuery,
        response: { 200: S.SummaryOut },
        detail: {
          tags: ['analytics'],
          responses: MISSING,
          summary: 'Function invocations over the last hours; p95 from a log histogram (within ~5%)',
        },
      },
    )
    .get(
      '/api/v1/analytics/invocations/trend',
      async ({ query }) =>
        (await wh(query)).trend({
          ...query,
          interval: query.interval ?? 'hour',
          limit: S.intParam(query.limit, 'limit', 1, 720, query.interval === 'day' ? 14 : 24),
        }),
      {
        permission: 'analytics:read',
        query: S.TrendQuery,
        response: { 200: S.TrendOut },
        detail: {
          tags: ['analytics'],
          responses: MISSING,
          summary: 'Invocations and failures per hour (last 24 by default) or day (last 14)',
        },
      },
    )
    .get(
      '/api/v1/analytics/invocations',
      // The one raw read of the family: ingest owns the invocation rows.
      async ({ query }) => {
        await wh(query)
        return ingest.invocations({
          ...query,
          page: S.intParam(query.page, 'page', 0, 1_000_000, 0),
          pageSize: S.intParam(query.pageSize, 'pageSize', 1, 100, 20),
        })
      },
      {
        permission: 'analytics:read',
        query: S.InvocationsQuery,
        response: { 200: S.InvocationsOut },
        detail: {
          tags: ['analytics'],
          responses: MISSING,
          summary: 'Invocation records, newest first, paged (pageSize at most 100)',
        },
      },
    )
}
