import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import ICAL from 'ical.js'
import { type TestApp, forEachEngine, makeApp } from '../../test/helpers'
import { httpSink } from '../notify/testing'

const BERLIN = `BEGIN:VTIMEZONE
TZID:Europe/Berlin
BEGIN:DAYLIGHT
TZOFFSETFROM:+0100
TZOFFSETTO:+0200
TZNAME:CEST
DTSTART:19700329T020000
RRULE:FREQ=YEARLY;BYMONTH=3;BYDAY=-1SU
END:DAYLIGHT
BEGIN:STANDARD
TZOFFSETFROM:+0200
TZOFFSETTO:+0100
TZNAME:CET
DTSTART:19701025T030000
RRULE:FREQ=YEARLY;BYMONTH=10;BYDAY=-1SU
END:STANDARD
END:VTIMEZONE`

/** Weekly Monday day shifts in Berlin across the 2026 DST change, one skipped, one moved, plus an overlapping extra shift. */
const ICS = `BEGIN:VCALENDAR
VERSION:2.0
PRODID:-//Example Corp//Calendar//EN
${BERLIN}
BEGIN:VEVENT
UID:dba-weekly@example.com
DTSTAMP:20260201T000000Z
DTSTART;TZID=Europe/Berlin:20260302T090000
DTEND;TZID=Europe/Berlin:20260302T170000
RRULE:FREQ=WEEKLY;COUNT=6
EXDATE;TZID=Europe/Berlin:20260316T090000
SUMMARY:DBA on call
END:VEVENT
BEGIN:VEVENT
UID:dba-weekly@example.com
DTSTAMP:20260201T000000Z
RECURRENCE-ID;TZID=Europe/Berlin:20260323T090000
DTSTART;TZID=Europe/Berlin:20260323T120000
DTEND;TZID=Europe/Berlin:20260323T200000
SUMMARY:DBA on call (late)
END:VEVENT
BEGIN:VEVENT
UID:extra@example.com
DTSTAMP:20260201T000000Z
DTSTART;TZID=Europe/Berlin:20260309T150000
DTEND;TZID=Europe/Berlin:20260309T180000
SUMMARY:Handover
END:VEVENT
END:VCALENDAR
`.replace(/\n/g, '\r\n')

forEachEngine((engine) => {
  let a: TestApp
  let admin: string
  const pager = httpSink()
  beforeAll(async () => {
    a = await makeApp(engine, {
      plugins: {
        'webhook-provider': {},
        notify: { channels: { pager: { type: 'webhook', url: pager.url } } },
        rules: {},
        rosters: {},
      },
    })
    admin = await a.token('admin')
  })
  afterAll(async () => {
    await a.stop()
    pager.stop()
  })
  const as = (method: string, path: string, body?: unknown, token: string | null = admin) =>
    a.req(method, path, { token, body })
  const hour = 3_600_000
  const at = (ms: number) => new Date(ms).toISOString()

  describe('rosters', () => {
    test('create sorts periods and keeps their offsets; read, list, replace (URL id wins), delete; 409, 404', async () => {
      const periods = [
        { start: '2031-05-02T09:00:00+02:00', end: '2031-05-02T17:00:00+02:00' },
        { start: '2031-05-01T09:00:00+02:00', end: '2031-05-01T17:00:00+02:00' },
        { start: '2031-05-02T17:00:00+02:00', end: '2031-05-03T01:30:00+02:00' },
      ]
      const r = await as('POST', '/api/v1/rosters', { id: 'night-ops', description: 'Night ops', periods })
      expect(r.status).toBe(200)
      expect(r.body.data).toMatchObject({
        id: 'night-ops',
        description: 'Night ops',
        periods: [periods[1], periods[0], periods[2]],
      })
      expect((await as('POST', '/api/v1/rosters', { id: 'night-ops', periods })).status).toBe(409)
      expect((await as('GET', '/api/v1/rosters/night-ops')).body.data.periods).toHaveLength(3)
      expect((await as('GET', '/api/v1/rosters')).body.data).toMatchObject({
        count: 1,
        rosters: [{ id: 'night-ops' }],
      })
      const put = await as('PUT', '/api/v1/rosters/night-ops', { id: 'zzz', periods: [periods[0]] })
      expect(put.body.data).toMatchObject({
        id: 'night-ops',
        description: 'Night ops',
        periods: [periods[0]],
      })
      expect((await as('PUT', '/api/v1/rosters/ghost', { periods })).status).toBe(404)
      expect((await as('DELETE', '/api/v1/rosters/night-ops')).body.data).toEqual({ id: 'night-ops' })
      expect((await as('GET', '/api/v1/rosters/night-ops')).status).toBe(404)
      expect((await as('DELETE', '/api/v1/rosters/night-ops')).status).toBe(404)
    })

    test('every spec 2 refusal answers 400 naming the period, and nothing is stored', async () => {
      const p = (start?: string, end?: string) => ({ start, end })
      const cases: Array<[unknown, string]> = [
        [[p(undefined, '2031-01-01T10:00:00Z')], 'body.periods[0].start: missing timestamp'],
        [[p('2031-01-01T10:00:00Z')], 'body.periods[0].end: missing timestamp'],
        [[p('2031-01-01T10:00:00Z', '2031-01-01T10:00:00Z')], 'body.periods[0]: zero-length'],
        [[p('2031-01-01T10:00:00Z', '2031-01-01T09:00:00Z')], 'body.periods[0]: inverted'],
        [
          [
            p('2031-01-01T08:00:00Z', '2031-01-01T12:00:00Z'),
            p('2031-01-01T11:00:00+01:00', '2031-01-01T13:00:00Z'),
          ],
          'body.periods[1]: overlaps body.periods[0]',
        ],
        [[p('2031-01-01T10:00:00', '2031-01-01T11:00:00Z')], 'body.periods[0].start'],
        [[p('yesterday', '2031-01-01T11:00:00Z')], 'body.periods[0].start'],
        [[], 'body.periods: at least one'],
        [undefined, 'body.periods: at least one'],
        [
          Array.from({ length: 513 }, (_, i) =>
            p(at(Date.UTC(2031, 0, 1) + i * hour), at(Date.UTC(2031, 0, 1) + i * hour + 1000)),
          ),
          'body.periods: at most 512',
        ],
      ]
      for (const [periods, msg] of cases) {
        const r = await as('POST', '/api/v1/rosters', { id: 'bad', periods })
        expect(r.status, msg).toBe(400)
        expect(r.body.message).toContain(msg)
      }
      expect(
        (
          await as('POST', '/api/v1/rosters', {
            id: 'bad',
            periods: [p('2031-01-01T10:00:00Z', '2031-01-01T11:00:00Z')],
            owner: 'x',
          })
        ).status,
      ).toBe(400)
      expect((await as('GET', '/api/v1/rosters/bad')).status).toBe(404)
      const max = Array.from({ length: 512 }, (_, i) =>
        p(at(Date.UTC(2031, 0, 1) + i * hour), at(Date.UTC(2031, 0, 1) + i * hour + 1000)),
      )
      expect((await as('POST', '/api/v1/rosters', { id: 'full', periods: max })).status).toBe(200)
    })

    test('no token 401; a viewer reads but may not write 403; an operator writes', async () => {
      const body = { id: 'ops', periods: [{ start: '2031-01-01T10:00:00Z', end: '2031-01-01T11:00:00Z' }] }
      expect((await as('GET', '/api/v1/rosters', undefined, null)).status).toBe(401)
      const viewer = await a.token('viewer')
      expect((await as('GET', '/api/v1/rosters', undefined, viewer)).status).toBe(200)
      expect((await as('POST', '/api/v1/rosters', body, viewer)).status).toBe(403)
      expect((await as('POST', '/api/v1/rosters', body, await a.token('operator'))).status).toBe(200)
    })
  })

  test('a silence holds while a period covers now; moving the period or deleting the roster resumes delivery at once', async () => {
    const now = Date.now()
    await as('POST', '/api/v1/rosters', {
      id: 'maint',
      periods: [{ start: at(now - hour), end: at(now + hour) }],
    })
    await as('POST', '/api/v1/rules', {
      id: 'db-page',
      match: 'type == "db.down"',
      mode: 'active',
      route: [{ channels: ['pager'] }],
      silence: { roster: 'maint' },
    })
    const send = () => as('POST', '/api/v1/notify', { type: 'db.down', level: 'critical', title: 'db down' })
    expect((await send()).body.data).toMatchObject({
      accepted: [],
      held: { rule: 'db-page', reason: 'silenced' },
    })
    const dry = await as('POST', '/api/v1/notify?dry_run=true', { type: 'db.down', title: 'x' })
    expect(dry.body.data.held.reason).toBe('silenced')
    await as('PUT', '/api/v1/rosters/maint', {
      periods: [{ start: at(now - 3 * hour), end: at(now - 2 * hour) }],
    })
    expect((await send()).body.data.accepted).toEqual(['pager'])
    await as('PUT', '/api/v1/rosters/maint', { periods: [{ start: at(now - hour), end: at(now + hour) }] })
    expect((await send()).body.data.held?.reason).toBe('silenced')
    await as('DELETE', '/api/v1/rosters/maint')
    expect((await send()).body.data.accepted).toEqual(['pager'])
    expect((await as('GET', '/api/v1/rules/db-page')).body.data.silence).toEqual({ roster: 'maint' })
  })

  test('iCalendar import expands RRULE, EXDATE, RECURRENCE-ID and TZID across a DST change; export gives it back', async () => {
    const r = await a.req(
      'POST',
      '/api/v1/rosters/dba/import?from=2026-03-01T00:00:00Z&until=2026-04-01T00:00:00Z',
      {
        token: admin,
        raw: ICS,
        headers: { 'content-type': 'text/calendar' },
      },
    )
    expect(r.status).toBe(200)
    expect(r.body.data.periods).toEqual([
      { start: '2026-03-02T08:00:00.000Z', end: '2026-03-02T16:00:00.000Z' },
      { start: '2026-03-09T08:00:00.000Z', end: '2026-03-09T17:00:00.000Z' },
      { start: '2026-03-23T11:00:00.000Z', end: '2026-03-23T19:00:00.000Z' },
      { start: '2026-03-30T07:00:00.000Z', end: '2026-03-30T15:00:00.000Z' },
    ])
    const ex = await a.req('GET', '/api/v1/rosters/dba/export.ics', { token: admin })
    expect(ex.status).toBe(200)
    expect(ex.headers.get('content-type')).toContain('text/calendar')
    const cal = new ICAL.Component(ICAL.parse(ex.body as string))
    const back = cal
      .getAllSubcomponents('vevent')
      .map((v) => new ICAL.Event(v))
      .map((e) => ({ start: e.startDate.toJSDate().toISOString(), end: e.endDate.toJSDate().toISOString() }))
    expect(back).toEqual(r.body.data.periods)
    const again = await a.req(
      'POST',
      '/api/v1/rosters/dba/import?from=2026-03-25T00:00:00Z&until=2026-04-10T00:00:00Z',
      {
        token: admin,
        raw: ICS,
        headers: { 'content-type': 'text/calendar' },
      },
    )
    expect(again.body.data.periods.map((p: { start: string }) => p.start)).toEqual([
      '2026-03-30T07:00:00.000Z',
      '2026-04-06T07:00:00.000Z',
    ])
  })

  test('a TZID named without its VTIMEZONE is that IANA zone, whatever the server zone; an unknown one is refused; a calendar keeps its zones to itself', async () => {
    const cal = (body: string) =>
      `BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//x//y//EN\r\n${body}END:VCALENDAR\r\n`
    const vevent = (tz: string) =>
      `BEGIN:VEVENT\r\nUID:kol@x\r\nDTSTAMP:20261120T000000Z\r\nDTSTART;TZID=${tz}:20261201T093000\r\nDTEND;TZID=${tz}:20261201T173000\r\nRRULE:FREQ=DAILY;COUNT=3\r\nEXDATE;TZID=${tz}:20261202T093000\r\nEND:VEVENT\r\n`
    const imp = (id: string, raw: string) =>
      a.req('POST', `/api/v1/rosters/${id}/import?from=2026-11-30T00:00:00Z&until=2026-12-10T00:00:00Z`, {
        token: admin,
        raw,
        headers: { 'content-type': 'text/calendar' },
      })
    const before = process.env.TZ
    process.env.TZ = 'America/New_York'
    try {
      const r = await imp('kolkata', cal(vevent('Asia/Kolkata')))
      expect(r.status).toBe(200)
      // 09:30-17:30 in Kolkata (UTC+05:30), the 2nd skipped.
      expect(r.body.data.periods).toEqual([
        { start: '2026-12-01T04:00:00.000Z', end: '2026-12-01T12:00:00.000Z' },
        { start: '2026-12-03T04:00:00.000Z', end: '2026-12-03T12:00:00.000Z' },
      ])
    } finally {
      if (before === undefined) Reflect.deleteProperty(process.env, 'TZ')
      else process.env.TZ = before
    }
    const unknown = await imp('nowhere', cal(vevent('Mars/Olympus')))
    expect(unknown.status).toBe(400)
    expect(unknown.body.message).toContain("TZID 'Mars/Olympus'")
    // A zone one calendar defines (here three hours ahead of UTC) is not known to the next import.
    const custom =
      'BEGIN:VTIMEZONE\r\nTZID:Studio/Office\r\nBEGIN:STANDARD\r\nTZOFFSETFROM:+0300\r\nTZOFFSETTO:+0300\r\nDTSTART:19700101T000000\r\nEND:STANDARD\r\nEND:VTIMEZONE\r\n'
    const own = await imp('office', cal(custom + vevent('Studio/Office')))
    expect(own.body.data.periods[0]).toEqual({
      start: '2026-12-01T06:30:00.000Z',
      end: '2026-12-01T14:30:00.000Z',
    })
    expect((await imp('office2', cal(vevent('Studio/Office')))).status).toBe(400)
  })

  test('import refusals: not a calendar, nothing in the window, a bad window; export of an unknown roster 404', async () => {
    const imp = (raw: string, q = '') =>
      a.req('POST', `/api/v1/rosters/cal/import${q}`, {
        token: admin,
        raw,
        headers: { 'content-type': 'text/calendar' },
      })
    expect((await imp('hello')).status).toBe(400)
    expect((await imp(ICS, '?from=2030-01-01T00:00:00Z&until=2030-02-01T00:00:00Z')).body.message).toContain(
      'no event',
    )
    expect((await imp(ICS, '?from=2026-03-01T00:00:00Z&until=2026-02-01T00:00:00Z')).body.message).toContain(
      'query.until',
    )
    expect((await imp(ICS, '?from=soon')).body.message).toContain('query.from')
    expect((await a.req('POST', '/api/v1/rosters/cal/import', { raw: ICS })).status).toBe(401)
    expect((await a.req('GET', '/api/v1/rosters/cal/export.ics', { token: admin })).status).toBe(404)
  })
})

forEachEngine((engine) => {
  test('with the roster manager switched off the roster routes answer 503', async () => {
    const a = await makeApp(engine, { plugins: { notify: {}, rules: {}, rosters: { manager: false } } })
    try {
      const token = await a.token('admin')
      for (const [m, p] of [
        ['GET', '/api/v1/rosters'],
        ['GET', '/api/v1/rosters/x'],
        ['POST', '/api/v1/rosters'],
        ['DELETE', '/api/v1/rosters/x'],
      ]) {
        const r = await a.req(m, p, { token, body: m === 'POST' ? { id: 'x', periods: [] } : undefined })
        expect(r.status, `${m} ${p}`).toBe(503)
      }
      expect((await a.req('GET', '/api/v1/rosters', {})).status).toBe(401)
    } finally {
      await a.stop()
    }
  })
})
