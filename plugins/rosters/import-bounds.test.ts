import { afterAll, beforeAll, expect, test } from 'bun:test'
import { type TestApp, engineFree, forEachEngine, makeApp } from '../../test/helpers'
import { MAX_OCCURRENCES, STAGE, expandCalendar } from './ical'
import { timedOut } from './ical-thread'
import { MAX_ICS_CHARS } from './routes'
import { recurringCalendar } from './testing'

// Audit L4: every import held a thread, its calendar's memory and a core until it ended, with no
// limit on how many ran at once. Past `import_concurrency` an import is refused at once (429), and
// a timeout says what took the time instead of always blaming a rule that never occurs.

const DAY = 86_400_000
const calendar = (lines: string[]) =>
  ['BEGIN:VCALENDAR', 'VERSION:2.0', 'PRODID:-//liveops-tests//EN', ...lines, 'END:VCALENDAR', ''].join(
    '\r\n',
  )
const vevent = (uid: string, ...props: string[]) => [
  'BEGIN:VEVENT',
  `UID:${uid}`,
  'DTSTAMP:20261101T000000Z',
  ...props,
  'END:VEVENT',
]

forEachEngine((engine) => {
  let a: TestApp
  let admin: string
  beforeAll(async () => {
    a = await makeApp(engine, {
      plugins: { notify: {}, rules: {}, rosters: { import_timeout_ms: 2000, import_concurrency: 2 } },
    })
    admin = await a.token('admin')
  })
  afterAll(() => a.stop())
  const importCal = (id: string, raw: string) =>
    a.req('POST', `/api/v1/rosters/${id}/import`, {
      token: admin,
      raw,
      headers: { 'content-type': 'text/calendar' },
    })

  test('past import_concurrency imports at once the extra ones answer 429 at once; the others run to their end; a later import succeeds', async () => {
    // Feb 30 never comes: each of these holds its thread until import_timeout_ms.
    const never = recurringCalendar(Date.now() - DAY, 'FREQ=SECONDLY;BYMONTH=2;BYMONTHDAY=30')
    const finished: number[] = []
    const answers = await Promise.all(
      [0, 1, 2, 3].map((i) =>
        importCal(`slow-${i}`, never).then((r) => {
          finished.push(r.status)
          return r
        }),
      ),
    )
    expect(answers.map((r) => r.status).sort()).toEqual([400, 400, 429, 429])
    // Refused without waiting for a running one: both 429s came back before either 400.
    expect(finished).toEqual([429, 429, 400, 400])
    for (const r of answers.filter((r) => r.status === 429)) {
      expect(r.headers.get('retry-after')).toBe('2')
      expect(r.body).toEqual({
        code: 429,
        message: expect.stringContaining('2 calendar imports are running'),
        data: { retry_after: 2 },
      })
    }
    for (const r of answers.filter((r) => r.status === 400))
      expect(r.body.message).toContain('did not expand within 2000 ms (a recurrence rule that never')
    const later = await importCal('later', recurringCalendar(Date.now() + DAY, 'FREQ=DAILY;COUNT=3'))
    expect(later.status).toBe(200)
    expect(later.body.data.periods).toHaveLength(3)
  })

  test('a calendar text past MAX_ICS_CHARS is 400 naming body before it is parsed; one at it is parsed', async () => {
    // Real exports are kilobytes; 9.5 MB calendars had grown the server by ~300 MB it kept.
    const event = vevent('big', 'DTSTART:20261201T090000Z', 'DTEND:20261201T100000Z')
    const at = calendar(event)
    const padded = (n: number) => `${at.slice(0, -2)}${' '.repeat(n - at.length)}\r\n`
    const over = await importCal('too-long', padded(MAX_ICS_CHARS + 1))
    expect(over.status).toBe(400)
    expect(over.body.data.field).toBe('body')
    expect((await a.req('GET', '/api/v1/rosters/too-long', { token: admin })).status).toBe(404)
    const fits = await importCal('long-enough', padded(MAX_ICS_CHARS))
    expect(fits.status).toBe(200)
  })
})

engineFree('an import that timed out', () => {
  const limit = 3000
  const now = 1_000_000
  // As the thread left it: the stage, occurrences walked, when its step began, when it began the calendar.
  const progress = (stage: number, walked: number, stepAt: number, began = now - limit) =>
    new Float64Array([stage, walked, stepAt, began])

  test('inside one recurrence step for half the time the thread spent on the calendar or more: a rule that never or too rarely occurs', () => {
    const e = timedOut(progress(STAGE.stepping, 3, now - 1500), limit, now)
    expect(e.status).toBe(400)
    expect(e.message).toBe(
      'body: the calendar did not expand within 3000 ms (a recurrence rule that never or too rarely occurs)',
    )
    // The thread began late (a loaded machine): 400 ms in one step of its 600 on the calendar.
    expect(timedOut(progress(STAGE.stepping, 0, now - 400, now - 600), limit, now).message).toContain(
      'a recurrence rule that never or too rarely occurs',
    )
  })

  test('otherwise the import was too much work for its limit, and the message says where it was', () => {
    const reading = timedOut(progress(STAGE.reading, 0, 0), limit, now)
    expect(reading.message).toBe(
      'body: the import took longer than its limit of 3000 ms (rosters.import_timeout_ms) while reading the calendar: import a smaller calendar or a narrower window',
    )
    expect(reading.details).toEqual({ field: 'body', reason: 'import timed out' })
    for (const [stage, stepAt] of [
      [STAGE.walking, now - 5],
      [STAGE.stepping, now - 5],
      [STAGE.stepping, now - 1400],
    ])
      expect(timedOut(progress(stage, 812, stepAt), limit, now).message).toContain(
        'longer than its limit of 3000 ms (rosters.import_timeout_ms) while expanding its events (812 occurrences so far)',
      )
  })
})

engineFree('reading a calendar', () => {
  test('20,000 single events end at the occurrence bound (reading them took a minute, past any timeout), and report their progress', () => {
    const lines: string[] = []
    for (let i = 0; i < 20_000; i++) {
      const h = String(i % 24).padStart(2, '0')
      lines.push(...vevent(`u${i}`, `DTSTART:20261201T${h}0000Z`, `DTEND:20261201T${h}3000Z`))
    }
    const progress = new Float64Array(4)
    expect(() =>
      expandCalendar(calendar(lines), Date.UTC(2026, 10, 29), Date.UTC(2026, 11, 30), progress),
    ).toThrow(`recur more than ${MAX_OCCURRENCES} times`)
    expect([progress[0], progress[1]]).toEqual([STAGE.walking, MAX_OCCURRENCES + 1])
  })

  test("an override changes only the event of its own UID, not another's occurrence at the same time", () => {
    const ics = calendar([
      ...vevent('a@x', 'DTSTART:20261207T090000Z', 'DTEND:20261207T100000Z', 'RRULE:FREQ=DAILY;COUNT=2'),
      ...vevent('b@x', 'DTSTART:20261207T090000Z', 'DTEND:20261207T093000Z', 'RRULE:FREQ=DAILY;COUNT=2'),
      ...vevent(
        'b@x',
        'RECURRENCE-ID:20261208T090000Z',
        'DTSTART:20261208T140000Z',
        'DTEND:20261208T143000Z',
      ),
    ])
    expect(expandCalendar(ics, Date.UTC(2026, 11, 1), Date.UTC(2026, 11, 31))).toEqual([
      { start: '2026-12-07T09:00:00.000Z', end: '2026-12-07T10:00:00.000Z' },
      { start: '2026-12-08T09:00:00.000Z', end: '2026-12-08T10:00:00.000Z' },
      { start: '2026-12-08T14:00:00.000Z', end: '2026-12-08T14:30:00.000Z' },
    ])
  })
})
