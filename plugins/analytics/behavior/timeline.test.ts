import { expect, test } from 'bun:test'
import type { TimelineText } from '../../ingest/types'
import { TextTimelineBuilder, TimelineBuilder, type Timelines } from './timeline'

/** Each user's (time, code) pairs, users in the order the builder gives them. */
const read = (t: Timelines) =>
  Array.from({ length: t.users }, (_, u) =>
    Array.from({ length: t.start[u + 1] - t.start[u] }, (_, i) => [
      t.ts[t.start[u] + i],
      t.code[t.start[u] + i],
    ]),
  )

// The per-user grouping funnels and paths run on (rows grouped by a hash of the user id).
test('rows grouped per user, each sorted by time, equal times in row order', async () => {
  const b = new TimelineBuilder()
  const rows: Array<[string, number, number]> = [
    ['a', 30, 1],
    ['b', 10, 2],
    ['a', 10, 3],
    ['c', 5, 4],
    ['a', 10, 5],
    ['b', 20, 6],
  ]
  for (const [u, ts, c] of rows) b.add(u, ts, c)
  const got = read(await b.done())
  expect(got.length).toBe(3)
  // Users come in hash order: compare as a set of timelines.
  expect(got.sort((x, y) => x[0][1] - y[0][1])).toEqual([
    [
      [10, 2],
      [20, 6],
    ],
    [
      [10, 3],
      [10, 5],
      [30, 1],
    ],
    [[5, 4]],
  ])
})

test('two user ids with the same 32-bit hash stay two users', async () => {
  // user-129599 and user-732382 share their FNV-1a hash (1997192002): found by a search.
  const b = new TimelineBuilder()
  b.add('user-129599', 2, 1)
  b.add('user-732382', 1, 2)
  b.add('user-129599', 1, 3)
  b.add('user-732382', 3, 4)
  b.add('other', 9, 9)
  const got = read(await b.done()).sort((x, y) => x[0][1] - y[0][1])
  expect(got).toEqual([
    [
      [1, 2],
      [3, 4],
    ],
    [
      [1, 3],
      [2, 1],
    ],
    [[9, 9]],
  ])
})

test('no rows: no users', async () => {
  const t = await new TimelineBuilder().done()
  expect([t.users, Array.from(t.start), t.ts.length]).toEqual([0, [0], 0])
})

// The same grouping over pages as the store's joined bytes (PostgreSQL), parsed in place.
/** A joined page of `rows` (user, name, time), times sent as their distance from `since`. */
const joinedPage = (rows: Array<[string, string, number]>, since = 0): TimelineText => {
  const utf8 = new TextEncoder()
  return {
    rows: rows.length,
    users: utf8.encode(rows.map((r) => r[0]).join('\u0001')),
    events: utf8.encode(rows.map((r) => r[1]).join('\u0001')),
    since,
    ts: utf8.encode(rows.map((r) => r[2] - since).join(',')),
  }
}
/** Timelines as a set: each user's (time, code) pairs, users ordered by their first pair. */
const set = (t: Timelines) => read(t).sort((x, y) => x[0][0] - y[0][0] || x[0][1] - y[0][1])

test('joined pages: rows grouped per user, each sorted by time, equal times in row order', async () => {
  const codes: Record<string, number> = { a: 1, b: 2, c: 3 }
  const asked: string[] = []
  const b = new TextTimelineBuilder((name) => {
    asked.push(name)
    return codes[name]
  })
  const T = 1_795_000_000_000
  b.add(
    joinedPage(
      [
        ['u1', 'a', T + 30],
        ['✓ ü 😀', 'b', T + 10],
        ['u1', 'skip', T + 1], // a name coded undefined: left out
        ['u1', 'b', T + 10],
        [',', 'c', T + 5],
      ],
      T,
    ),
  )
  // The next page: the same users again, one as a page of columns (a page holding U+0001).
  b.add({ userId: ['u1', '✓ ü 😀', 'x\u0001y'], event: ['c', 'a', 'a'], ts: [T + 10, T + 20, T + 7] })
  b.add(joinedPage([['✓ ü 😀', 'c', T - 5]], T - 100))
  expect(set(await b.done())).toEqual([
    [
      [T - 5, 3],
      [T + 10, 2],
      [T + 20, 1],
    ],
    [[T + 5, 3]],
    [[T + 7, 1]],
    [
      [T + 10, 2],
      [T + 10, 3],
      [T + 30, 1],
    ],
  ])
  // Each name asked once.
  expect(asked.sort()).toEqual(['a', 'b', 'c', 'skip'])
})

test('joined pages: two user ids with the same hash stay two users; no rows, no users', async () => {
  // The bytes of user-129599 and user-732382 share their FNV-1a hash (ASCII: bytes are UTF-16 units).
  const b = new TextTimelineBuilder(() => 0)
  b.add(
    joinedPage([
      ['user-129599', 'e', 2],
      ['user-732382', 'e', 1],
      ['user-129599', 'e', 1],
      ['user-732382', 'e', 3],
      ['other', 'e', 9],
    ]),
  )
  const t = await b.done()
  expect(read(t).map((u) => u.map((p) => p[0]))).toEqual(expect.arrayContaining([[1, 2], [1, 3], [9]]))
  expect(t.users).toBe(3)
  const none = await new TextTimelineBuilder(() => 0).done()
  expect([none.users, Array.from(none.start), none.ts.length]).toEqual([0, [0], 0])
})
