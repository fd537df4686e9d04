import { Elysia, t } from 'elysia'
import { ServiceUnavailable, invalidField, ok } from '../../core/http'
import type { PluginContext } from '../../core/plugin'
import { rejectUnknown } from '../../core/strict'
import { toCalendar } from './ical'
import { expandInThread } from './ical-thread'
import { ID_PATTERN, RosterBody, type RostersConfig, checkPeriods, instant } from './schema'
import { MAX_ROSTERS, type RosterStore } from './store'

/** The longest iCalendar text an import takes, in characters (1 MiB of ASCII). */
export const MAX_ICS_CHARS = 1_048_576

const tags = (summary: string, description?: string) => ({
  tags: ['notify rosters'],
  summary,
  ...(description ? { description } : {}),
})
const Id = t.Object({ id: t.String() })
const read = { scope: 'query', permission: 'rosters:read' } as const
const write = { scope: 'config', permission: 'rosters:write' } as const

export function rosterRoutes(ctx: PluginContext<RostersConfig>, store: RosterStore) {
  return new Elysia({ name: 'rosters' })
    .use(ctx.guard)
    .onBeforeHandle(() => {
      if (!ctx.config.manager) throw new ServiceUnavailable('roster manager is not configured')
    })
    .get(
      '/api/v1/rosters',
      async ({ query }) => {
        let limit = MAX_ROSTERS
        if (query.limit !== undefined) {
          limit = Number(query.limit)
          if (!/^\d+$/.test(query.limit) || limit < 1 || limit > MAX_ROSTERS)
            throw invalidField(
              'query.limit',
              `must be an integer from 1 to ${MAX_ROSTERS}, got '${query.limit}'`,
            )
        }
        const rosters = await store.list(limit + 1, query.after)
        const more = rosters.length > limit
        if (more) rosters.length = limit
        return ok({ rosters, count: rosters.length, ...(more ? { next_after: rosters[limit - 1].id } : {}) })
      },
      {
        appScope: read,
        query: t.Object({ limit: t.Optional(t.String()), after: t.Optional(t.String({ maxLength: 64 })) }),
        detail: tags(
          `The rosters with their periods, by id: at most limit (1-${MAX_ROSTERS}, ${MAX_ROSTERS}, as many as there may be) after the id \`after\``,
          `A store holds at most ${MAX_ROSTERS} rosters, so one answer lists them all; next_after (the last id) is present when more follow: send it as after. 400 naming query.limit.`,
        ),
      },
    )
    .post(
      '/api/v1/rosters',
      async ({ body }) => {
        if (!body.id) throw invalidField('body.id', 'required')
        return ok(
          await store.create(body.id, body.description ?? '', checkPeriods(body.periods)),
          'roster created',
        )
      },
      {
        appScope: write,
        transform: ({ body }) => rejectUnknown(RosterBody, body, 'body'),
        body: RosterBody,
        detail: tags(
          `Create a roster {id, description?, periods: [{start, end}]}; 409 for a taken id, or past ${MAX_ROSTERS} rosters`,
          'Periods are RFC 3339 timestamps with offset, pushed whole by an external scheduler. Refused with 400: a missing timestamp, ' +
            'a zero-length or inverted period, overlapping periods (touching ones are fine), more than 512, none. Out-of-order periods are sorted by start. ' +
            'A rule with silence {roster} is silenced while a period covers now.',
        ),
      },
    )
    .get('/api/v1/rosters/:id', async ({ params }) => ok(await store.get(params.id)), {
      appScope: read,
      params: Id,
      detail: tags('One roster; 404 when unknown'),
    })
    .put(
      '/api/v1/rosters/:id',
      async ({ params, body }) =>
        ok(await store.replace(params.id, body.description, checkPeriods(body.periods)), 'roster updated'),
      {
        appScope: write,
        params: Id,
        transform: ({ body }) => rejectUnknown(RosterBody, body, 'body'),
        body: RosterBody,
        detail: tags(
          "Replace a roster's periods (the URL id wins; description kept unless given); effective at once; 404 when unknown",
        ),
      },
    )
    .delete(
      '/api/v1/rosters/:id',
      async ({ params }) => {
        await store.remove(params.id)
        return ok({ id: params.id }, 'roster deleted')
      },
      {
        appScope: write,
        params: Id,
        detail: tags('Delete a roster: rules keep their silence, which stops applying at once'),
      },
    )
    .post(
      '/api/v1/rosters/:id/import',
      async ({ params, body, query }) => {
        if (!new RegExp(ID_PATTERN).test(params.id)) throw invalidField('params.id', 'not a valid roster id')
        if (typeof body !== 'string' || !body.trim())
          throw invalidField('body', 'an iCalendar text is required')
        const from = query.from === undefined ? Date.now() : instant(query.from, 'query.from')
        const until =
          query.until === undefined
            ? from + ctx.config.import_horizon_days * 86_400_000
            : instant(query.until, 'query.until')
        if (until <= from) throw invalidField('query.until', 'must be after from')
        const periods = checkPeriods(
          await expandInThread(body, from, until, {
            timeoutMs: ctx.config.import_timeout_ms,
            concurrency: ctx.config.import_concurrency,
          }),
        )
        return ok(await store.replace(params.id, undefined, periods, true), 'roster imported')
      },
      {
        appScope: write,
        params: Id,
        parse: 'text',
        // Real exports are kilobytes; the parser builds many times the text (9.5 MB calendars
        // grew the server by ~300 MB that it kept), so a larger text is refused before it is parsed.
        body: t.String({ maxLength: MAX_ICS_CHARS }),
        query: t.Object({ from: t.Optional(t.String()), until: t.Optional(t.String()) }),
        detail: {
          ...tags(
            "Replace a roster's periods from an iCalendar text (created when missing)",
            'The body is the .ics text as calendar apps export it: VEVENTs with RRULE, RDATE, EXDATE, RECURRENCE-ID overrides and VTIMEZONE (TZID) definitions. ' +
              'Occurrences touching [from, until) are kept (from defaults to now, until to from + import_horizon_days, 90); overlapping or touching shifts are merged. ' +
              'The text is at most 1,048,576 characters (MAX_ICS_CHARS; 400 naming body). ' +
              'The result obeys the roster rules (at most 512 periods). Expansion stops, with 400, past 4096 occurrences up to the end of the window (those before it count) ' +
              'or after import_timeout_ms (3 s), and runs on a thread of its own. ' +
              'At most import_concurrency imports (2) run at once in a process; one more answers 429 with Retry-After.',
          ),
          responses: {
            409: { description: `A new roster past the ${MAX_ROSTERS} a store holds: delete one first` },
            429: {
              description:
                'import_concurrency imports are running already (Retry-After: when the first ends at the latest)',
            },
          },
        },
      },
    )
    .get(
      '/api/v1/rosters/:id/export.ics',
      async ({ params }) => {
        const r = await store.get(params.id)
        return new Response(toCalendar(r.id, r.description, r.periods), {
          headers: {
            'content-type': 'text/calendar; charset=utf-8',
            'content-disposition': `attachment; filename="${r.id}.ics"`,
          },
        })
      },
      {
        appScope: read,
        params: Id,
        detail: {
          ...tags('The roster as an iCalendar text (one VEVENT per period, UTC)'),
          responses: {
            200: {
              description: 'An iCalendar file (RFC 5545), sent as an attachment named <id>.ics',
              content: { 'text/calendar': { schema: { type: 'string' } } },
            },
          },
        },
      },
    )
}
