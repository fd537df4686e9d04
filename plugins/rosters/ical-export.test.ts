import { describe, expect, test } from 'bun:test'
import ICAL from 'ical.js'
import { toCalendar } from './ical'

describe('a roster exported as iCalendar', () => {
  test("a description's line breaks stay inside its SUMMARY: no property of the writer's making", () => {
    const description = 'DBA\rATTACH:http://evil.test/x\r\nX-INJECTED:1\nlast line'
    const text = toCalendar('dba', description, [
      { start: '2026-03-02T08:00:00.000Z', end: '2026-03-02T16:00:00.000Z' },
    ])
    // Every physical line is a property of the calendar's own, or a folded continuation.
    const names = text
      .split(/\r\n|\r|\n/)
      .filter((l) => l && !l.startsWith(' '))
      .map((l) => l.split(/[:;]/, 1)[0])
    expect(names.filter((n) => ['ATTACH', 'X-INJECTED'].includes(n))).toEqual([])
    const ev = new ICAL.Event(new ICAL.Component(ICAL.parse(text)).getFirstSubcomponent('vevent')!)
    expect(ev.summary).toBe('DBA\nATTACH:http://evil.test/x\nX-INJECTED:1\nlast line')
  })
})
