import { Elysia, t } from 'elysia'
import type { ConsumerStatus, EventLogService, ParkedEvent } from '../../../core/event-log-types'
import { NotFound, invalidField } from '../../../core/http'
import type { PluginContext } from '../../../core/plugin'

const Consumer = t.Object({
  name: t.String({ description: 'the consumer (analytics, behavior, realtime, exposures)' }),
  delivered: t.Integer({ description: 'rows of the log it has taken in since it began' }),
  lagEvents: t.Integer({ description: 'committed rows it has not taken in yet' }),
  lagSeconds: t.Number({ description: 'age of the oldest of them' }),
  asOf: t.String({ format: 'date-time', description: 'its results hold every event received before this' }),
  runningOn: t.Union([t.String(), t.Null()], { description: 'the instance holding its lease' }),
  rebuilding: t.Boolean({ description: 'a rebuild is asked or under way' }),
  lastError: t.Union([t.String(), t.Null()], {
    description: "its last batch's error, cleared by the next success",
  }),
  parked: t.Integer({
    description:
      "rows it set aside: its code failed on each, read alone, three times with an error that was not the store's " +
      '(logged with the error as "consumer parked a row"); a rebuild delivers them again',
  }),
})
const Consumers = t.Object({ items: t.Array(Consumer) })
const RebuildBody = t.Object(
  {
    from: t.Optional(
      t.String({
        description:
          'a date (YYYY-MM-DD) from which results are recomputed, the rest kept; absent: the whole log. analytics and ' +
          "behavior recompute each game from the start of that date in the game's time zone; realtime and exposures " +
          'from its UTC midnight.',
      }),
    ),
  },
  { additionalProperties: false },
)
const Name = t.Object({ name: t.String() })
const Parked = t.Object({
  total: t.Integer({ description: 'rows set aside, all told' }),
  items: t.Array(
    t.Object({
      seq: t.Integer({ description: "the row's place in the log: its commit" }),
      pos: t.Integer({ description: 'and its id in the log' }),
      eventId: t.Union([t.String(), t.Null()], { description: "the client's event_id, when it sent one" }),
      gameId: t.String(),
      env: t.String(),
      event: t.String(),
      ts: t.String({ format: 'date-time', description: "the event's time" }),
      error: t.String({ description: "what the consumer's code threw on it, the last time" }),
      parkedAt: t.String({ format: 'date-time' }),
    }),
  ),
})
const ParkedQuery = t.Object({
  limit: t.Optional(t.Integer({ minimum: 1, maximum: 1000, description: 'rows, newest first; absent: 100' })),
})
const parkedOut = (p: ParkedEvent) => ({
  seq: p.at.seq,
  pos: p.at.pos,
  eventId: p.eventId,
  gameId: p.gameId,
  env: p.env,
  event: p.event,
  ts: new Date(p.ts).toISOString(),
  error: p.error,
  parkedAt: new Date(p.parkedAt).toISOString(),
})
const DATE = /^\d{4}-\d{2}-\d{2}$/

const out = (s: ConsumerStatus) => ({
  name: s.name,
  delivered: s.delivered,
  lagEvents: s.lagEvents,
  lagSeconds: s.lagSeconds,
  asOf: new Date(s.asOf).toISOString(),
  runningOn: s.leaseOwner,
  rebuilding: s.rebuilding,
  lastError: s.lastError,
  parked: s.parked,
})

/** A `YYYY-MM-DD` date as the epoch ms of its UTC midnight; a bad one is a 400 naming `field`. */
export function dateParam(field: string, v: string): number {
  const ms = Date.parse(`${v}T00:00:00Z`)
  if (!DATE.test(v) || Number.isNaN(ms) || new Date(ms).toISOString().slice(0, 10) !== v)
    throw invalidField(field, 'must be a date YYYY-MM-DD')
  return ms
}

/**
 * The event log's consumers (issue 35): their lag and state (`GET`, everyone who reads
 * analytics), and a rebuild of one from the raw events the log keeps (`POST`, admins): after a
 * definition was fixed, or for a new analytic over existing history. Ingestion goes on; the
 * instance holding the consumer's lease does the work. `liveops rebuild` asks the same.
 */
export function consumerRoutes(guard: PluginContext<unknown>['guard'], events: EventLogService) {
  const known = (name: string) => {
    if (!events.names().includes(name)) throw new NotFound(`consumer '${name}' not found`)
  }
  return new Elysia({ name: 'analytics.consumers' })
    .use(guard)
    .get('/api/v1/analytics/consumers', async () => ({ items: (await events.status()).map(out) }), {
      permission: 'analytics:read',
      response: { 200: Consumers },
      detail: {
        tags: ['analytics'],
        summary: "The event log's consumers: lag, completeness (asOf), the instance running each, rebuilds",
      },
    })
    .get(
      '/api/v1/analytics/consumers/:name/parked',
      async ({ params, query }) => {
        known(params.name)
        const { total, items } = await events.parked(params.name, query.limit ?? 100)
        return { total, items: items.map(parkedOut) }
      },
      {
        permission: 'analytics:read',
        params: Name,
        query: ParkedQuery,
        response: { 200: Parked },
        detail: {
          tags: ['analytics'],
          summary:
            'The rows a consumer set aside: its code failed on each, read alone, three times (a rebuild delivers them again)',
          responses: { 404: { description: 'no such consumer' } },
        },
      },
    )
    .post(
      '/api/v1/analytics/consumers/:name/rebuild',
      async ({ params, body, set }) => {
        known(params.name)
        const from = body?.from === undefined ? undefined : dateParam('body.from', body.from)
        try {
          await events.rebuild(params.name, from)
        } catch (e) {
          if (from !== undefined) throw invalidField('body.from', String((e as Error).message))
          throw e
        }
        set.status = 202
        const s = (await events.status()).find((c) => c.name === params.name)
        return s ? out(s) : undefined
      },
      {
        permission: 'analytics:write',
        params: Name,
        body: t.Optional(RebuildBody),
        response: { 202: Consumer },
        audit: 'analytics.consumer.rebuild',
        detail: {
          tags: ['analytics'],
          summary: "Recompute a consumer's results from the raw events (admins); answers 202 as it begins",
          responses: { 404: { description: 'no such consumer' } },
        },
      },
    )
}
