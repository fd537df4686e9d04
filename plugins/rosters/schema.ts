import type { Static } from '@sinclair/typebox'
import { t } from 'elysia'
import { invalidField } from '../../core/http'

export const ID_PATTERN = '^[a-zA-Z0-9][a-zA-Z0-9._-]{0,63}$'
export const MAX_PERIODS = 512

export const Period = t.Object(
  { start: t.Optional(t.String({ maxLength: 64 })), end: t.Optional(t.String({ maxLength: 64 })) },
  { additionalProperties: false },
)

export const RosterBody = t.Object(
  {
    /** Required on create; the URL wins on update. */
    id: t.Optional(t.String({ pattern: ID_PATTERN })),
    description: t.Optional(t.String({ maxLength: 2000 })),
    /** Checked by `checkPeriods`, so each fault names its period. */
    periods: t.Optional(t.Array(Period, { maxItems: 10_000 })),
  },
  { additionalProperties: false },
)

export const RostersConfig = t.Object(
  {
    /** Off: the roster routes answer 503 (spec 2: roster manager not configured) and no rule is silenced. */
    manager: t.Boolean({ default: true }),
    /** How often other instances' roster changes are picked up. */
    sync_ms: t.Integer({ minimum: 10, default: 1000 }),
    /** How far ahead an iCalendar import expands recurring events when no `until` is given. */
    import_horizon_days: t.Integer({ minimum: 1, maximum: 366, default: 90 }),
    /** How long one iCalendar import may take to parse and expand (on its own thread) before it is refused. */
    import_timeout_ms: t.Integer({ minimum: 100, maximum: 60_000, default: 3000 }),
    /**
     * How many iCalendar imports this process expands at once, each on a thread of its own; one
     * more answers 429 with Retry-After at once instead of queueing (a queued import would spend
     * its caller's time, and the server's memory for its body, waiting).
     */
    import_concurrency: t.Integer({ minimum: 1, maximum: 32, default: 2 }),
  },
  { additionalProperties: false, default: {} },
)

const RFC3339 = /^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$/

/** An RFC 3339 timestamp with its offset, as epoch ms; the error names the field. */
export function instant(value: unknown, field: string): number {
  if (value === undefined || value === null || value === '') throw invalidField(field, 'missing timestamp')
  if (typeof value !== 'string' || !RFC3339.test(value) || Number.isNaN(Date.parse(value)))
    throw invalidField(field, `'${String(value)}' is not an RFC 3339 timestamp with offset`)
  return Date.parse(value)
}

export interface StoredPeriod {
  start: string
  end: string
}

/**
 * Spec 2 behavior 8: a missing timestamp, a zero-length or inverted period, overlapping periods,
 * more than 512 periods or none are refused; periods given out of order are sorted by start.
 * Touching periods (one ends when the next starts) do not overlap.
 */
export function checkPeriods(periods: { start?: string; end?: string }[] | undefined): StoredPeriod[] {
  if (!periods?.length) throw invalidField('body.periods', 'at least one period is required')
  if (periods.length > MAX_PERIODS)
    throw invalidField('body.periods', `at most ${MAX_PERIODS} periods, got ${periods.length}`)
  const parsed = periods.map((p, i) => {
    const s = instant(p.start, `body.periods[${i}].start`)
    const e = instant(p.end, `body.periods[${i}].end`)
    if (e === s) throw invalidField(`body.periods[${i}]`, 'zero-length period (end equals start)')
    if (e < s) throw invalidField(`body.periods[${i}]`, 'inverted period (end before start)')
    return { i, s, e, p: { start: p.start!, end: p.end! } }
  })
  parsed.sort((a, b) => a.s - b.s || a.i - b.i)
  for (let k = 1; k < parsed.length; k++)
    if (parsed[k].s < parsed[k - 1].e)
      throw invalidField(
        `body.periods[${parsed[k].i}]`,
        `overlaps body.periods[${parsed[k - 1].i}] (${parsed[k - 1].p.start} to ${parsed[k - 1].p.end})`,
      )
  return parsed.map((x) => x.p)
}
export type RostersConfig = Static<typeof RostersConfig>
