import { describe, expect, test } from 'bun:test'
import type { Db } from '../../core/db'
import { SharedReads } from '../../core/event-log-reads'
import type { LogEntry, LogPosition, LogSource } from '../../core/event-log-types'

/** A log of rows 1..n (seq = pos = i) that counts its reads. */
function fakeLog(n: number) {
  const calls: Array<{ after: LogPosition; below: number; limit: number }> = []
  const source: LogSource = {
    async read(after, below, limit) {
      calls.push({ after, below, limit })
      const out: LogEntry[] = []
      for (let i = after.seq + 1; i <= n && i < below && out.length < limit; i++)
        out.push({ at: { seq: i, pos: i }, row: { id: i } as unknown as LogEntry['row'] })
      return out
    },
    async pending() {
      return { rows: 0, oldestReceivedAt: null }
    },
    async head() {
      return { seq: n, pos: n }
    },
  }
  return { source, calls }
}
const db = {} as Db

/** `source` whose first read fails, as on a lost connection (not counted in its reads). */
function failingOnce(source: LogSource): LogSource {
  let fail = true
  return {
    ...source,
    read: (after, below, limit, d) => {
      if (fail) {
        fail = false
        return Promise.reject(new Error('connection lost'))
      }
      return source.read(after, below, limit, d)
    },
  }
}

describe('SharedReads.prefetch (a consumer reads its next batch while it writes this one)', () => {
  test('a step at the prefetched position gets the rows read ahead, without reading again', async () => {
    const { source, calls } = fakeLog(100)
    const reads = new SharedReads()
    reads.prefetch(source, { seq: 10, pos: 10 }, 1000, 5, db)
    expect(calls.length).toBe(1)
    const got = await reads.read(source, { seq: 10, pos: 10 }, 1000, 5, db)
    expect(got.map((e) => e.at.seq)).toEqual([11, 12, 13, 14, 15])
    expect(calls.length).toBe(1)
    // Another position reads the store.
    await reads.read(source, { seq: 20, pos: 20 }, 1000, 5, db)
    expect(calls.length).toBe(2)
  })

  test('every consumer at the prefetched position shares the read ahead, not only the one that asked', async () => {
    const { source, calls } = fakeLog(100)
    const reads = new SharedReads()
    reads.prefetch(source, { seq: 10, pos: 10 }, 1000, 5, db)
    const [a, b] = await Promise.all([
      reads.read(source, { seq: 10, pos: 10 }, 1000, 5, db),
      reads.read(source, { seq: 10, pos: 10 }, 1000, 5, db),
    ])
    // And one behind it, at one of its rows, takes the tail.
    const c = await reads.read(source, { seq: 12, pos: 12 }, 1000, 5, db)
    expect([a, b, c].map((es) => es.map((e) => e.at.seq))).toEqual([
      [11, 12, 13, 14, 15],
      [11, 12, 13, 14, 15],
      [13, 14, 15],
    ])
    expect(calls.length).toBe(1)
    expect(reads.counts).toEqual({ shared: 3, memory: 0, read: 1 })
  })

  test('consumers arriving while a read of their position runs wait for it instead of reading again', async () => {
    const { source, calls } = fakeLog(100)
    const reads = new SharedReads()
    const got = await Promise.all([1, 2, 3].map(() => reads.read(source, { seq: 0, pos: 0 }, 1000, 4, db)))
    expect(got.map((es) => es.map((e) => e.at.seq))).toEqual([
      [1, 2, 3, 4],
      [1, 2, 3, 4],
      [1, 2, 3, 4],
    ])
    expect(calls.length).toBe(1)
  })

  test('a failed read is forgotten: the next consumer there reads the store again', async () => {
    const { source, calls } = fakeLog(100)
    const flaky = failingOnce(source)
    const reads = new SharedReads()
    await expect(reads.read(flaky, { seq: 0, pos: 0 }, 1000, 3, db)).rejects.toThrow('connection lost')
    expect((await reads.read(flaky, { seq: 0, pos: 0 }, 1000, 3, db)).map((e) => e.at.seq)).toEqual([1, 2, 3])
    expect(calls.length).toBe(1)
  })

  test('a read ahead is not used past a lower horizon, a larger batch, or another position', async () => {
    const { source, calls } = fakeLog(100)
    const reads = new SharedReads()
    reads.prefetch(source, { seq: 0, pos: 0 }, 50, 5, db)
    // The horizon went down (cannot happen, but the rows read ahead may then lie above it).
    expect((await reads.read(source, { seq: 0, pos: 0 }, 3, 5, db)).map((e) => e.at.seq)).toEqual([1, 2])
    expect(calls.length).toBe(2)
    reads.prefetch(source, { seq: 30, pos: 30 }, 50, 5, db)
    // A larger batch than was read ahead.
    expect((await reads.read(source, { seq: 30, pos: 30 }, 50, 10, db)).length).toBe(10)
    expect(calls.length).toBe(4)
    reads.prefetch(source, { seq: 60, pos: 60 }, 1000, 5, db)
    expect((await reads.read(source, { seq: 61, pos: 61 }, 1000, 5, db))[0].at.seq).toBe(62)
    expect(calls.length).toBe(6)
  })

  test('a failed read ahead is read again by the step', async () => {
    const { source, calls } = fakeLog(100)
    const flaky = failingOnce(source)
    const reads = new SharedReads()
    reads.prefetch(flaky, { seq: 0, pos: 0 }, 1000, 3, db)
    expect((await reads.read(flaky, { seq: 0, pos: 0 }, 1000, 3, db)).map((e) => e.at.seq)).toEqual([1, 2, 3])
    expect(calls.length).toBe(1)
  })
})

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
  expect(reads.counts).toEqual({ shared: 3, memory: 0, read: 2 })
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

describe('SharedReads on SQLite (statements hold the thread)', () => {
  test('a read larger than a page comes in pages, each after the last row of the one before, with turns of the event loop between', async () => {
    const { source, calls } = fakeLog(12_345)
    const sqlite = { dialect: 'sqlite' } as Db
    const reads = new SharedReads()
    // A timer of the event loop counts its turns; each page's read records how many had run.
    let turns = 0
    let ticking = true
    const tick = () => {
      turns++
      if (ticking) setImmediate(tick)
    }
    setImmediate(tick)
    const seenTurns: number[] = []
    const counted: LogSource = {
      ...source,
      read: (after, below, limit, d) => {
        seenTurns.push(turns)
        return source.read(after, below, limit, d)
      },
    }
    const got = await reads.read(counted, { seq: 0, pos: 0 }, 100_000, 12_000, sqlite)
    ticking = false
    expect(got.map((e) => e.at.seq)).toEqual(Array.from({ length: 12_000 }, (_, i) => i + 1))
    expect(calls.map((c) => [c.after.seq, c.limit])).toEqual([
      [0, 5000],
      [5000, 5000],
      [10_000, 2000],
    ])
    expect(seenTurns[1]).toBeGreaterThan(seenTurns[0])
    expect(seenTurns[2]).toBeGreaterThan(seenTurns[1])
    // The log's end within a page: the read stops there.
    const tail = await reads.read(source, { seq: 12_000, pos: 12_000 }, 100_000, 12_000, sqlite)
    expect(tail.length).toBe(345)
    // Elsewhere (a store whose reads do not hold the thread) one read.
    calls.length = 0
    await new SharedReads().read(source, { seq: 0, pos: 0 }, 100_000, 12_000, db)
    expect(calls.length).toBe(1)
  })
})
