import { Elysia, t } from 'elysia'
import { type Db, fromJson } from '../../../core/db'
import { Generation } from '../../../core/generation'
import { NotFound, invalidField } from '../../../core/http'
import type { PluginContext } from '../../../core/plugin'
import { rejectUnknown } from '../../../core/strict'
import type { GamesService } from '../../games/types'
import type { IngestService } from '../../ingest/types'

const Query = t.Object({ gameId: t.String({ minLength: 1 }), env: t.String({ minLength: 1 }) })
const FilterOut = t.Object({
  gameId: t.String(),
  env: t.String(),
  samplingRate: t.Number(),
  dropEvents: t.Array(t.String()),
  updatedAt: t.Union([t.String(), t.Null()]),
})
const FilterIn = t.Object(
  {
    // What the GET answers may be sent back as it is (issue 35 point 6): the scope stays the query's.
    gameId: t.Optional(t.String({ description: "as GET answers it: must be the query's gameId" })),
    env: t.Optional(t.String({ description: "as GET answers it: must be the query's env" })),
    updatedAt: t.Optional(
      t.Union([t.String(), t.Null()], { description: 'as GET answers it: set by the server, ignored' }),
    ),
    samplingRate: t.Optional(t.Number({ minimum: 0, maximum: 1, description: 'share of users kept, 0..1' })),
    dropEvents: t.Optional(
      t.Array(t.String({ minLength: 1 }), { maxItems: 200, description: 'event names not stored' }),
    ),
  },
  { additionalProperties: false },
)

type Row = { game_id: string; env: string; sampling_ppm: number; drop_events: string; updated_at: number }
const toFilter = (gameId: string, env: string, r: Row | undefined) => ({
  gameId,
  env,
  samplingRate: r ? Number(r.sampling_ppm) / 1e6 : 1,
  dropEvents: r ? fromJson<string[]>(r.drop_events, []) : [],
  updatedAt: r ? new Date(Number(r.updated_at)).toISOString() : null,
})

/**
 * Sampling filters of the server analytics (`GET/PUT /api/v1/analytics/filters`): stored in the
 * main store and handed to ingestion, which follows them from the next request on. The rate
 * multiplies the environment's own sampling rate (users are kept or dropped whole); dropped
 * event names are not stored; payments and server-side writes are never filtered. Other
 * instances on the same store re-read a changed filter when its change notice arrives.
 */
/** Documented beside the success answer: an unknown game or environment. */
const NOT_FOUND = { 404: { description: 'unknown game or environment' } }

export function filterRoutes(
  guard: PluginContext<unknown>['guard'],
  db: Db,
  games: GamesService,
  ingest: IngestService,
  changes: PluginContext<unknown>['changes'],
) {
  /**
   * Every filter handed to ingestion here (a save, a notice's read, the periodic load): a read
   * of the filters under way meanwhile is read again, so an older one never replaces it.
   */
  const applied = new Generation()
  const apply = (gameId: string, env: string, f: ReturnType<typeof toFilter>) => {
    applied.bump()
    ingest.setFilter(gameId, env, { samplingRate: f.samplingRate, dropEvents: new Set(f.dropEvents) })
  }
  const known = async (q: { gameId: string; env: string }) => {
    if (!(await games.environment(q.gameId, q.env)))
      throw new NotFound(`environment '${q.env}' of game '${q.gameId}' not found`)
  }
  const read = (q: { gameId: string; env: string }) =>
    db.get<Row>('SELECT * FROM analytics_filters WHERE game_id = ? AND env = ?', [q.gameId, q.env])
  // Other instances sharing the store re-read a filter when told (PostgreSQL LISTEN/NOTIFY).
  changes.on('analytics.filters', async (d, origin) => {
    if (origin !== 'remote') return
    const q = { gameId: String(d.gameId), env: String(d.env) }
    const r = await applied.settled(() => read(q))
    if (r.settled) apply(q.gameId, q.env, toFilter(q.gameId, q.env, r.value))
  })
  return {
    /**
     * Hands every stored filter to ingestion: at start, and periodically (a change notice lost on
     * the way, or one whose read met this instance's own save, is caught up then).
     */
    async load() {
      const all = await applied.settled(() => db.all<Row>('SELECT * FROM analytics_filters'))
      for (const r of all.settled ? all.value : []) apply(r.game_id, r.env, toFilter(r.game_id, r.env, r))
    },
    routes: new Elysia({ name: 'analytics.filters' })
      .use(guard)
      .get(
        '/api/v1/analytics/filters',
        async ({ query }) => {
          await known(query)
          return toFilter(query.gameId, query.env, await read(query))
        },
        {
          permission: 'analytics:read',
          query: Query,
          response: { 200: FilterOut },
          detail: {
            tags: ['analytics'],
            responses: NOT_FOUND,
            summary: 'The sampling filter of a game and environment (none stored: rate 1, nothing dropped)',
          },
        },
      )
      .put(
        '/api/v1/analytics/filters',
        async ({ query, body }) => {
          for (const k of ['gameId', 'env'] as const)
            if (body[k] !== undefined && body[k] !== query[k])
              throw invalidField(`body.${k}`, `must be the query's ${k} (${query[k]}) when given`)
          await known(query)
          const before = toFilter(query.gameId, query.env, await read(query))
          const next = {
            ...before,
            samplingRate: body.samplingRate ?? before.samplingRate,
            dropEvents: body.dropEvents ? [...new Set(body.dropEvents)] : before.dropEvents,
          }
          const row = await db.get<Row>(
            `INSERT INTO analytics_filters (game_id, env, sampling_ppm, drop_events, updated_at) VALUES (?, ?, ?, ?, ?)
             ON CONFLICT (game_id, env) DO UPDATE SET sampling_ppm = excluded.sampling_ppm, drop_events = excluded.drop_events,
             updated_at = excluded.updated_at RETURNING *`,
            [
              query.gameId,
              query.env,
              Math.round(next.samplingRate * 1e6),
              JSON.stringify(next.dropEvents),
              Date.now(),
            ],
          )
          const saved = toFilter(query.gameId, query.env, row)
          apply(query.gameId, query.env, saved)
          await changes.publish('analytics.filters', { gameId: query.gameId, env: query.env })
          return saved
        },
        {
          permission: 'analytics:write',
          query: Query,
          body: FilterIn,
          transform: ({ body }) => rejectUnknown(FilterIn, body, 'body'),
          response: { 200: FilterOut },
          detail: {
            tags: ['analytics'],
            responses: NOT_FOUND,
            summary:
              'Saves the sampling filter (fields not named keep their value); ingestion follows it from the next request',
            description:
              'samplingRate multiplies the sampling rate of the environment, per user (a user is kept or dropped whole); dropEvents are not stored. Payments and server-side writes are never filtered.',
          },
        },
      ),
  }
}
