import { expect, test } from 'bun:test'
import type { Db } from '../../core/db'
import { SharedReads } from '../../core/event-log-reads'
import type { LogEntry, LogPosition, LogSource } from '../../core/event-log-types'

/** A log of rows at the given positions (seq 1), counting the reads that reach it. */
function fakeSource(positions: number[]) {
  const counted = { reads: 0 }
  const entries: LogEntry[] = positions.map((pos) => ({ at: { seq: 1, pos }, row: { id: pos } as never }))
  const source = {
    async read(at: LogPosition, below: number, limit: number) {
      counted.reads++
      return entries
        .filter((e) => (e.at.seq > at.seq || (e.at.seq === at.seq && e.at.pos > at.pos)) && e.at.seq < below)
        .slice(0, limit)
    },
  } as unknown as LogSource
  return { source, counted }
}

const db = {} as Db
const BELOW = Number.MAX_SAFE_INTEGER
const ids = (es: LogEntry[]) => es.map((e) => e.at.pos)

test('a consumer whose cursor is a row of a kept read takes the rows after it; both then read on from one place', async () => {
  const { source, counted } = fakeSource([1, 2, 3, 4, 5, 6, 7, 8, 9, 10])
  const reads = new SharedReads()
  // Consumer A reads a batch of five from the start.
  expect(ids(await reads.read(source, { seq: 0, pos: 0 }, BELOW, 5, db))).toEqual([1, 2, 3, 4, 5])
  // Consumer B, at row 3, takes rows 4 and 5 from it: no read of the store.
  expect(ids(await reads.read(source, { seq: 1, pos: 3 }, BELOW, 100, db))).toEqual([4, 5])
  // Its limit holds.
  expect(ids(await reads.read(source, { seq: 1, pos: 2 }, BELOW, 2, db))).toEqual([3, 4])
  expect(counted.reads).toBe(1)
  // At the read's last row there is nothing kept after it: the store is read, and the other
  // consumer arriving there shares that read.
  expect(ids(await reads.read(source, { seq: 1, pos: 5 }, BELOW, 100, db))).toEqual([6, 7, 8, 9, 10])
  expect(ids(await reads.read(source, { seq: 1, pos: 5 }, BELOW, 100, db))).toEqual([6, 7, 8, 9, 10])
  expect(counted.reads).toBe(2)
  expect(reads.counts).toEqual({ shared: 3, read: 2 })
})

test('a cursor that is no row of a kept read, or a lower horizon, reads the store', async () => {
  const { source, counted } = fakeSource([2, 4, 6, 8])
  const reads = new SharedReads()
  expect(ids(await reads.read(source, { seq: 0, pos: 0 }, BELOW, 10, db))).toEqual([2, 4, 6, 8])
  // Position 5 lies between kept rows but is none of them.
  expect(ids(await reads.read(source, { seq: 1, pos: 5 }, BELOW, 10, db))).toEqual([6, 8])
  expect(counted.reads).toBe(2)
  // A kept read made with a higher horizon than this reader's may hold rows it must not see yet.
  expect(ids(await reads.read(source, { seq: 1, pos: 2 }, 1, 10, db))).toEqual([])
  expect(counted.reads).toBe(3)
})
