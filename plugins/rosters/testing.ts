/** iCalendar time `20260101T000000Z`. */
const stamp = (ms: number) => new Date(ms).toISOString().replace(/[-:]/g, '').replace(/\.\d+/, '')

/**
 * A calendar with one one-second event recurring by `rrule` from `start` (tests and benches of
 * the import's bounds: `FREQ=SECONDLY` storms, rules that never occur).
 */
export const recurringCalendar = (start: number, rrule: string) =>
  [
    'BEGIN:VCALENDAR',
    'VERSION:2.0',
    'PRODID:-//liveops-tests//EN',
    'BEGIN:VEVENT',
    'UID:recurring@liveops-tests',
    `DTSTAMP:${stamp(start)}`,
    `DTSTART:${stamp(start)}`,
    `DTEND:${stamp(start + 1000)}`,
    `RRULE:${rrule}`,
    'END:VEVENT',
    'END:VCALENDAR',
    '',
  ].join('\r\n')
