import { Elysia, t } from 'elysia'
import { PERMISSION_SECURITY, rateLimiting } from '../../../core/auth/guard'
import type { Principal } from '../../../core/auth/principal'
import { whileTrusted } from '../../../core/auth/while-trusted'
import { NotFound } from '../../../core/http'
import type { PluginContext } from '../../../core/plugin'
import type { GamesService } from '../../games/types'
import { intParam } from '../schema'
import { type RealtimeHub, type Scope, SeriesOut, type realtimeStore } from './realtime'

type Ctx = Pick<PluginContext<unknown>, 'guard' | 'auth' | 'rateLimiter'>
type Store = ReturnType<typeof realtimeStore>

const gameId = t.String({ minLength: 1 })
const env = t.String({ minLength: 1 })

/** 404 unless the game and its environment exist. */
export async function knownScope(games: GamesService, s: Scope): Promise<string | undefined> {
  const tz = await games.timezone(s.gameId)
  if (tz === undefined) throw new NotFound(`game '${s.gameId}' not found`)
  if (!(await games.environment(s.gameId, s.env)))
    throw new NotFound(`environment '${s.env}' of game '${s.gameId}' not found`)
  return tz
}

const realtimeDoc = {
  tags: ['analytics'],
  security: PERMISSION_SECURITY,
  summary: 'Realtime dashboard as server-sent events (text/event-stream)',
  description: [
    'Authenticated by the Bearer header, the service_token cookie or ?token= (the access token: EventSource cannot send headers); needs analytics:read.',
    'The stream starts with `retry:` advice, then every `interval_ms` (plugin setting, default 5 s) an `event: snapshot` with an `id:` and JSON data {gameId, env, ts, day, onlineNow, eventsPerMinute, eventsThisMinute, revenueToday, activeToday}; a `: ping` comment every `heartbeat_ms` (2.5 s) keeps proxies from closing it.',
    'onlineNow: distinct users (heartbeat, session_start) of this minute and the one before (HyperLogLog); eventsPerMinute: events of the last whole minute of event time; eventsThisMinute: of this minute so far; revenueToday: successful payments of the game’s today in its time zone (main currency unit); activeToday: distinct users with login or session_start today.',
    'Ids are the snapshot time in epoch ms, strictly increasing. With Last-Event-ID (header, or ?lastEventId=) inside the stream’s history (the last `history` snapshots, 10 minutes at the defaults) the missed snapshots are replayed after a comment saying how many; an id outside it gets a comment saying so and a fresh snapshot.',
    'One computation per game and environment per tick, from rollups, shared by every client. Opening a stream counts against the caller’s rate limit; beyond `max_clients_per_principal` streams of one caller (16) in a process: 429 `too_many_streams`; beyond `max_clients` per process: 503 with Retry-After. When the game is deleted the stream sends `event: end` and closes.',
  ].join('\n\n'),
  responses: {
    200: {
      description: 'event: snapshot frames (data: the JSON above), : ping comments',
      content: { 'text/event-stream': { schema: { type: 'string' as const } } },
    },
    401: { description: 'missing, invalid or expired token' },
    403: { description: 'the token does not grant analytics:read' },
    404: { description: 'unknown game or environment' },
    429: {
      description:
        'the caller’s rate limit, or `too_many_streams`: it holds `max_clients_per_principal` streams in this process',
    },
    503: { description: 'this process holds its maximum of realtime clients (Retry-After)' },
  },
}

const realtimeSeriesDoc = {
  tags: ['analytics'],
  summary: 'Realtime curve: online users, events and revenue per minute of the last N minutes',
  description:
    'Oldest first, this minute (so far) last; a minute without data is zeros. online: distinct users (heartbeat, session_start) of the minute (HyperLogLog, ~1.6% error); events: events of the minute (event time); revenue: successful payments of the minute (main currency unit).',
  responses: { 404: { description: 'unknown game or environment' } },
}

/** `GET /api/v1/analytics/realtime` (server-sent events) and `/realtime/series`. */
export function realtimeRoutes(ctx: Ctx, games: GamesService, hub: RealtimeHub, store: () => Store) {
  const count = rateLimiting(ctx.rateLimiter)
  /** Who each stream request authenticated as (its `transform`), for its slot in the handler. */
  const callers = new WeakMap<Request, Principal>()
  return new Elysia({ name: 'analytics.realtime' })
    .use(ctx.guard)
    .get(
      '/api/v1/analytics/realtime',
      async ({ query, headers, request }) => {
        const scope = { gameId: query.gameId, env: query.env }
        await knownScope(games, scope)
        const who =
          callers.get(request) ??
          ctx.auth.authorize(await ctx.auth.identify(headers, query), 'analytics:read')
        const release = hub.slots.take(who)
        const revoked = whileTrusted(ctx.auth, { headers, query, gone: request.signal }, 'analytics:read')
        let stream: ReadableStream<Uint8Array>
        try {
          const resume = headers['last-event-id'] ?? query.lastEventId
          stream = hub.open(scope, resume, request.signal, revoked, release)
        } catch (e) {
          release()
          throw e
        }
        return new Response(stream, {
          headers: {
            'content-type': 'text/event-stream; charset=utf-8',
            'cache-control': 'no-cache, no-transform',
            // nginx would otherwise buffer the stream.
            'x-accel-buffering': 'no',
          },
        })
      },
      {
        // Before the query is validated: an anonymous caller gets 401, never a 400. EventSource
        // cannot send headers, so the access token may also come as ?token= or the cookie.
        // Counted against the caller's rate limit as the `permission` macro counts every other
        // request (which cannot read ?token=): uncounted, one viewer opened 10,000 streams.
        transform: async ({ headers, query, request, set }) => {
          const who = ctx.auth.authorize(await ctx.auth.identify(headers, query), 'analytics:read')
          await count(who, set.headers)
          callers.set(request, who)
        },
        query: t.Object({
          gameId,
          env,
          token: t.Optional(
            t.String({ description: 'the access token, for clients that cannot send headers (EventSource)' }),
          ),
          lastEventId: t.Optional(
            t.String({ description: 'as the Last-Event-ID header, for a first connection that resumes' }),
          ),
        }),
        detail: realtimeDoc,
      },
    )
    .get(
      '/api/v1/analytics/realtime/series',
      async ({ query }) => {
        const scope = { gameId: query.gameId, env: query.env }
        const minutes = intParam(query.minutes, 'minutes', 1, 1440, 60)
        await knownScope(games, scope)
        return store().series(scope, minutes, hub.clock())
      },
      {
        permission: 'analytics:read',
        query: t.Object({
          gameId,
          env,
          minutes: t.Optional(
            t.String({ pattern: '^-?[0-9]+$', description: 'integer, default 60, 1..1440' }),
          ),
        }),
        response: { 200: SeriesOut },
        detail: realtimeSeriesDoc,
      },
    )
}
