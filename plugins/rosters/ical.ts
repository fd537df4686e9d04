import ICAL from 'ical.js'
import { invalidField } from '../../core/http'
import { MAX_PERIODS, type StoredPeriod } from './schema'

const iso = (ms: number) => new Date(ms).toISOString()

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
  for (const tz of root.getAllSubcomponents('vtimezone')) ICAL.TimezoneService.register(tz)
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
  const push = (s: number, e: number) => {
    if (e > from && s < until && e > s) out.push([s, e])
    // Far more occurrences than a roster may hold means the window is too wide for this calendar.
    if (out.length > MAX_PERIODS * 8)
      throw invalidField('body', `the calendar expands to more than ${MAX_PERIODS} periods in the window`)
  }
  const windowEnd = ICAL.Time.fromJSDate(new Date(until), true)
  for (const ev of masters.values()) {
    if (!ev.startDate) continue
    if (!ev.isRecurring()) {
      push(ev.startDate.toJSDate().getTime(), ev.endDate.toJSDate().getTime())
      continue
    }
    const it = ev.iterator()
    for (let next = it.next(); next; next = it.next()) {
      if (next.compare(windowEnd) >= 0) break
      const occ = ev.getOccurrenceDetails(next)
      push(occ.startDate.toJSDate().getTime(), occ.endDate.toJSDate().getTime())
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
