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

/** The stages an expansion reports in its `progress` (index 0). */
export const STAGE = { reading: 1, walking: 2, stepping: 3 } as const

/**
 * Where an expansion is, in memory it shares with the thread that started it (ical-thread.ts):
 * [stage, occurrences walked, when the current recurrence step began, when the thread began this
 * calendar (both epoch ms)]. A rule ical.js
 * can never satisfy loops inside one step until the thread is ended from outside; only this tells
 * that case from a calendar that is merely too big for the time allowed.
 */
export const progressOf = (shared: SharedArrayBuffer) => new Float64Array(shared, 0, 4)
export const newProgressBuffer = () => new SharedArrayBuffer(4 * Float64Array.BYTES_PER_ELEMENT)

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
export function expandCalendar(
  text: string,
  from: number,
  until: number,
  progress: Float64Array<ArrayBufferLike> = new Float64Array(4),
): StoredPeriod[] {
  progress[3] = Date.now()
  progress[0] = STAGE.reading
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
    return expand(root, from, until, progress)
  } finally {
    for (const tzid of added) ICAL.TimezoneService.remove(tzid)
  }
}

function expand(
  root: ICAL.Component,
  from: number,
  until: number,
  progress: Float64Array<ArrayBufferLike>,
): StoredPeriod[] {
  const vevents = root.getAllSubcomponents('vevent')
  const masters = new Map<string, ICAL.Event>()
  const exceptions: ICAL.Event[] = []
  for (const v of vevents) {
    // `exceptions: []`: left to itself, ical.js relates to every event each override of the
    // whole calendar, whatever its UID, building it again for each (20,000 events took a minute
    // to read). Overrides are related below, to the event of their UID only (RFC 5545 3.8.4.4).
    const ev = new ICAL.Event(v, { exceptions: [] })
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
    progress[1] = ++walked
    if (walked > MAX_OCCURRENCES)
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
  // A rule that never occurs loops inside ical.js, making its iterator or taking one step of it.
  const inRule = <T>(f: () => T): T => {
    progress[2] = Date.now()
    progress[0] = STAGE.stepping
    const out = f()
    progress[0] = STAGE.walking
    return out
  }
  progress[0] = STAGE.walking
  for (const ev of masters.values()) {
    if (!ev.startDate) continue
    const z = zonesOf(ev)
    if (!ev.isRecurring()) {
      push(instant(ev.startDate, z.start), instant(ev.endDate, z.end))
      continue
    }
    const it = inRule(() => ev.iterator())
    for (let next = inRule(() => it.next()); next; next = inRule(() => it.next())) {
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
  // ical.js escapes a line feed in a text value but writes a lone carriage return as it is, which
  // ends the line for many readers: a roster writer's description added properties of its own.
  const summary = (description || `${id} on call`).replace(/\r\n?/g, '\n')
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
    ev.addPropertyWithValue('summary', summary)
    cal.addSubcomponent(ev)
  })
  return cal.toString()
}
