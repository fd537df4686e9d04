import ICAL from 'ical.js'
import { invalidField } from '../../core/http'
import { zoneOffset } from '../../core/zone'
import { MAX_PERIODS, type StoredPeriod } from './schema'

const iso = (ms: number) => new Date(ms).toISOString()

/**
 * Occurrences one import may walk, those before the window included: spec 2's 512 periods with
 * room for touching shifts that merge. Expansion stops as soon as it is passed (an
 * `RRULE:FREQ=SECONDLY` from months back ends here in milliseconds, not after millions of steps).
 */
export const MAX_OCCURRENCES = MAX_PERIODS * 8

/** Offsets of the TZIDs met so far (bounded: a calendar may name any number of made-up zones). */
const zones = new Map<string, ((ms: number) => number) | undefined>()

/**
 * The instant of an iCalendar time. A time in a zone the calendar defines (VTIMEZONE) or in UTC
 * is ical.js's own reading. A TZID the calendar does not define (exporters often name the IANA
 * zone without its VTIMEZONE) is read as that IANA zone's wall clock; a time with no zone at all
 * (floating) as UTC, never as the server's own zone. A TZID that is neither answers 400.
 */
function instant(t: ICAL.Time, tzid: string | undefined): number {
  if (t.zone && t.zone.tzid !== 'floating') return t.toJSDate().getTime()
  const wall = Date.UTC(t.year, t.month - 1, t.day, t.hour, t.minute, t.second)
  if (!tzid) return wall
  if (!zones.has(tzid)) {
    if (zones.size >= 1000) zones.clear()
    zones.set(tzid, zoneOffset(tzid))
  }
  const offset = zones.get(tzid)
  if (!offset)
    throw invalidField('body', `TZID '${tzid}' is neither defined by a VTIMEZONE nor a known time zone`)
  // The offset at the guess, then at the instant it gives (the two differ only across a change).
  return wall - offset(wall - offset(wall))
}

/** The TZID a property of the event names (DTSTART, DTEND), if any. */
const tzidOf = (ev: ICAL.Event, prop: string): string | undefined => {
  const v = ev.component.getFirstProperty(prop)?.getParameter('tzid')
  return typeof v === 'string' ? v : undefined
}

/**
 * Expands an iCalendar text (VEVENTs with RRULE, RDATE, EXDATE, RECURRENCE-ID overrides and
 * VTIMEZONE definitions, as calendar apps export them) into the absolute periods that touch the
 * window [from, until). ical.js does the parsing and the recurrence expansion. Overlapping or
 * touching shifts are merged, since a silence only asks whether any period covers an instant.
 */
export function expandCalendar(text: string, from: number, until: number): StoredPeriod[] {
  let root: ICAL.Component
  try {
    root = new ICAL.Component(ICAL.parse(text))
  } catch (e) {
    throw invalidField('body', `not an iCalendar text: ${(e as Error).message}`)
  }
  if (root.name !== 'vcalendar') throw invalidField('body', 'expected a VCALENDAR')
  // The calendar's zones are known to ical.js only while it is expanded (one synchronous call):
  // one import's VTIMEZONE never changes how another is read, nor overrides a built-in zone.
  const added: string[] = []
  for (const tz of root.getAllSubcomponents('vtimezone')) {
    const tzid = tz.getFirstPropertyValue('tzid')
    if (typeof tzid !== 'string' || ICAL.TimezoneService.has(tzid)) continue
    ICAL.TimezoneService.register(tz)
    added.push(tzid)
  }
  try {
    return expand(root, from, until)
  } finally {
    for (const tzid of added) ICAL.TimezoneService.remove(tzid)
  }
}

function expand(root: ICAL.Component, from: number, until: number): StoredPeriod[] {
  const vevents = root.getAllSubcomponents('vevent')
  const masters = new Map<string, ICAL.Event>()
  const exceptions: ICAL.Event[] = []
  for (const v of vevents) {
    const ev = new ICAL.Event(v)
    if (ev.isRecurrenceException()) exceptions.push(ev)
    else masters.set(ev.uid ?? `#${masters.size}`, ev)
  }
  for (const ex of exceptions) masters.get(ex.uid)?.relateException(ex)

  const out: [number, number][] = []
  let walked = 0
  const push = (s: number, e: number) => {
    if (e > from && s < until && e > s) out.push([s, e])
    // Far more occurrences than a roster may hold means the window is too wide for this calendar,
    // or its recurrences start too long before it.
    if (++walked > MAX_OCCURRENCES)
      throw invalidField(
        'body',
        `the calendar's events recur more than ${MAX_OCCURRENCES} times up to the end of the window (a roster holds ${MAX_PERIODS} periods): import a narrower window, or a calendar whose recurrences start nearer to it`,
      )
  }
  const windowEnd = ICAL.Time.fromJSDate(new Date(until), true)
  // An occurrence's times are in its event's zones (an override's own, else the master's); the
  // end's zone is the start's when DTEND names none (a DURATION, or no end).
  const zonesOf = (ev: ICAL.Event) => {
    const start = tzidOf(ev, 'dtstart')
    return { start, end: tzidOf(ev, 'dtend') ?? start }
  }
  for (const ev of masters.values()) {
    if (!ev.startDate) continue
    const z = zonesOf(ev)
    if (!ev.isRecurring()) {
      push(instant(ev.startDate, z.start), instant(ev.endDate, z.end))
      continue
    }
    const it = ev.iterator()
    for (let next = it.next(); next; next = it.next()) {
      if (next.compare(windowEnd) >= 0) break
      const occ = ev.getOccurrenceDetails(next)
      const oz = occ.item === ev ? z : zonesOf(occ.item)
      push(instant(occ.startDate, oz.start), instant(occ.endDate, oz.end))
    }
  }
  out.sort((a, b) => a[0] - b[0])
  const merged: [number, number][] = []
  for (const p of out) {
    const last = merged[merged.length - 1]
    if (last && p[0] <= last[1]) last[1] = Math.max(last[1], p[1])
    else merged.push([p[0], p[1]])
  }
  if (!merged.length) throw invalidField('body', 'the calendar has no event in the import window')
  if (merged.length > MAX_PERIODS)
    throw invalidField('body', `the calendar expands to ${merged.length} periods; at most ${MAX_PERIODS}`)
  return merged.map(([s, e]) => ({ start: iso(s), end: iso(e) }))
}

/** The roster as an iCalendar text: one VEVENT per period, in UTC. */
export function toCalendar(id: string, description: string, periods: StoredPeriod[]): string {
  const cal = new ICAL.Component(['vcalendar', [], []])
  cal.addPropertyWithValue('prodid', '-//liveops//rosters//EN')
  cal.addPropertyWithValue('version', '2.0')
  cal.addPropertyWithValue('x-wr-calname', id)
  const stamp = ICAL.Time.fromJSDate(new Date(), true)
  periods.forEach((p, i) => {
    const ev = new ICAL.Component('vevent')
    ev.addPropertyWithValue('uid', `${id}-${i}-${Date.parse(p.start)}@liveops`)
    ev.addPropertyWithValue('dtstamp', stamp)
    ev.addPropertyWithValue('dtstart', ICAL.Time.fromJSDate(new Date(p.start), true))
    ev.addPropertyWithValue('dtend', ICAL.Time.fromJSDate(new Date(p.end), true))
    ev.addPropertyWithValue('summary', description || `${id} on call`)
    cal.addSubcomponent(ev)
  })
  return cal.toString()
}
