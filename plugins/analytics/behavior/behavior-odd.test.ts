import { afterAll, beforeAll, expect, test } from 'bun:test'
import { type TestApp, forEachEngine } from '../../../test/helpers'
import { ingestApp, signed } from '../../ingest/testing'

/**
 * Funnels and paths over users and names holding unusual characters (multi-byte text, commas,
 * quotes and U+0001, which PostgreSQL's joined pages separate rows with), every answer worked
 * out by hand. The game is in UTC. Feb 2: a page holding U+0001 (read as columns on
 * PostgreSQL); Feb 3: unusual characters without it (read as joined bytes).
 */
const at = (day: number, hh: number, mm = 0) => Date.UTC(2026, 1, day, hh, mm)
const START = 'start ✓'
const MID = 'mid\u0001dle'
const END = 'end,"x"'

forEachEngine((engine) => {
  let a: TestApp
  let admin: string
  let gameId: string
  const ev = (uid: string, event: string, ts: number) => ({
    event,
    ts: String(ts),
    game_id: gameId,
    env: 'prod',
    uid,
  })
  const funnel = (day: string, steps: string[], order: string) =>
    a.req('POST', `/api/v1/analytics/behavior/funnel?gameId=${gameId}&env=prod`, {
      token: admin,
      body: {
        steps: steps.map((event) => ({ event })),
        window: { value: 1, unit: 'hour' },
        startDate: day,
        endDate: day,
        order,
      },
    })
  const paths = (day: string) =>
    a.req(
      'GET',
      `/api/v1/analytics/behavior/paths?gameId=${gameId}&env=prod&startDate=${day}&endDate=${day}`,
      {
        token: admin,
      },
    )
  const users = (r: { body: { steps: Array<{ users: number }> } }) => r.body.steps.map((s) => s.users)

  beforeAll(async () => {
    ;({ a, admin, gameId } = await ingestApp(engine))
    const events = [
      // Feb 2.
      ev('✓ ü 😀', START, at(2, 10)),
      ev('✓ ü 😀', MID, at(2, 10, 1)),
      ev('✓ ü 😀', END, at(2, 10, 2)),
      ev('x\u0001y', START, at(2, 10)),
      ev('x\u0001y', 'noise', at(2, 10, 1)),
      ev('x\u0001y', MID, at(2, 10, 2)),
      ev('a,b', START, at(2, 11)),
      ev('u"q', MID, at(2, 12)),
      // Feb 3.
      ev('✓ ü 😀', START, at(3, 10)),
      ev('✓ ü 😀', END, at(3, 10, 1)),
      ev('a,b', START, at(3, 10)),
      ev('a,b', 'noise', at(3, 10, 1)),
      ev('a,b', END, at(3, 10, 2)),
      ev('\\"', START, at(3, 11)),
    ]
    expect((await signed(a, '/api/ingest/events', events)).status).toBe(200)
  })
  afterAll(() => a.stop())

  test('a day holding U+0001: strict and ordered funnels, paths per session', async () => {
    // Strict: the three starts; only ✓ ü 😀 goes on (x\u0001y's noise breaks its sequence).
    expect(users(await funnel('2026-02-02', [START, MID, END], 'strict'))).toEqual([3, 1, 1])
    // Ordered: x\u0001y reaches the middle step too.
    expect(users(await funnel('2026-02-02', [START, MID, END], 'ordered'))).toEqual([3, 2, 1])
    const r = await paths('2026-02-02')
    expect(r.status).toBe(200)
    // One session each; ties in the order of their names' text.
    expect(r.body.total).toBe(4)
    expect(r.body.paths).toEqual([
      { path: [MID], count: 1, share: 0.25 },
      { path: [START], count: 1, share: 0.25 },
      { path: [START, MID, END], count: 1, share: 0.25 },
      { path: [START, 'noise', MID], count: 1, share: 0.25 },
    ])
  })

  test('a day of unusual characters without U+0001: strict and ordered funnels, paths per session', async () => {
    expect(users(await funnel('2026-02-03', [START, END], 'strict'))).toEqual([3, 1])
    expect(users(await funnel('2026-02-03', [START, END], 'ordered'))).toEqual([3, 2])
    const r = await paths('2026-02-03')
    expect(r.body.total).toBe(3)
    expect(r.body.paths).toEqual([
      { path: [START], count: 1, share: 0.3333 },
      { path: [START, END], count: 1, share: 0.3333 },
      { path: [START, 'noise', END], count: 1, share: 0.3333 },
    ])
  })
})
