import { expect, test } from 'bun:test'
import { TimelineBuilder, type Timelines } from './behavior'

/** Each user's (time, code) pairs, users in the order the builder gives them. */
const read = (t: Timelines) =>
  Array.from({ length: t.users }, (_, u) =>
    Array.from({ length: t.start[u + 1] - t.start[u] }, (_, i) => [
      t.ts[t.start[u] + i],
      t.code[t.start[u] + i],
    ]),
  )

// The per-user grouping funnels and paths run on (rows grouped by a hash of the user id).
test('rows grouped per user, each sorted by time, equal times in row order', () => {
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
  const got = read(b.done())
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

test('two user ids with the same 32-bit hash stay two users', () => {
  // user-129599 and user-732382 share their FNV-1a hash (1997192002): found by a search.
  const b = new TimelineBuilder()
  b.add('user-129599', 2, 1)
  b.add('user-732382', 1, 2)
  b.add('user-129599', 1, 3)
  b.add('user-732382', 3, 4)
  b.add('other', 9, 9)
  const got = read(b.done()).sort((x, y) => x[0][1] - y[0][1])
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

test('no rows: no users', () => {
  const t = new TimelineBuilder().done()
  expect([t.users, Array.from(t.start), t.ts.length]).toEqual([0, [0], 0])
})
