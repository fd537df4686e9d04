import { expect, test } from 'bun:test'
import { CommittedTail } from '../../core/event-log-tail'
import type { LogEntry } from '../../core/event-log-types'

/** A commit's rows: seq `seq`, ids `ids`. */
const commit = (seq: number, ids: number[]): LogEntry[] =>
  ids.map((id) => ({ at: { seq, pos: id }, row: { id } as unknown as LogEntry['row'] }))
const ids = (e: LogEntry[] | undefined) => e?.map((x) => x.at.pos)
const MAX = Number.MAX_SAFE_INTEGER

test('serves the rows after one it holds, or after the row its provider said came before them', () => {
  const tail = new CommittedTail()
  tail.append(commit(5, [50, 51]), { seq: 4, pos: 49 })
  tail.append(commit(6, [60, 61, 62]), { seq: 5, pos: 51 })
  expect(ids(tail.after({ seq: 4, pos: 49 }, MAX, 100))).toEqual([50, 51, 60, 61, 62])
  expect(ids(tail.after({ seq: 5, pos: 51 }, MAX, 2))).toEqual([60, 61])
  expect(ids(tail.after({ seq: 6, pos: 60 }, MAX, 100))).toEqual([61, 62])
  // Caught up: nothing known to follow; the store is asked (a commit may be on its way).
  expect(tail.after({ seq: 6, pos: 62 }, MAX, 100)).toBeUndefined()
  // Positions it does not hold: before it, or between its rows.
  expect(tail.after({ seq: 3, pos: 1 }, MAX, 100)).toBeUndefined()
  expect(tail.after({ seq: 5, pos: 50.5 }, MAX, 100)).toBeUndefined()
  // Below a horizon only.
  expect(ids(tail.after({ seq: 4, pos: 49 }, 6, 100))).toEqual([50, 51])
})

test('a commit that does not follow the last one held starts again from it (no gap is ever served)', () => {
  const tail = new CommittedTail()
  tail.append(commit(1, [10, 11]), undefined)
  // Not said what came before: served only from its own rows.
  expect(tail.after({ seq: 0, pos: 0 }, MAX, 100)).toBeUndefined()
  expect(ids(tail.after({ seq: 1, pos: 10 }, MAX, 100))).toEqual([11])
  // A commit after another row than the last held (one not handed over came between).
  tail.append(commit(3, [30]), { seq: 2, pos: 20 })
  expect(tail.after({ seq: 1, pos: 10 }, MAX, 100)).toBeUndefined()
  expect(ids(tail.after({ seq: 2, pos: 20 }, MAX, 100))).toEqual([30])
  // A first commit after a start (nothing said) drops what was held.
  tail.append(commit(4, [40]), undefined)
  expect(tail.after({ seq: 2, pos: 20 }, MAX, 100)).toBeUndefined()
})

test('holds at most its cap of rows: the oldest go, and the last dropped is the row before the first held', () => {
  const tail = new CommittedTail(4)
  let prev: { seq: number; pos: number } | undefined
  for (let s = 1; s <= 5; s++) {
    const rows = commit(s, [s * 10, s * 10 + 1])
    tail.append(rows, prev)
    prev = rows[rows.length - 1].at
  }
  // Rows 40, 41, 50, 51 held; 31 came before them.
  expect(ids(tail.after({ seq: 3, pos: 31 }, MAX, 100))).toEqual([40, 41, 50, 51])
  expect(tail.after({ seq: 3, pos: 30 }, MAX, 100)).toBeUndefined()
  expect(ids(tail.after({ seq: 4, pos: 41 }, MAX, 100))).toEqual([50, 51])
})
