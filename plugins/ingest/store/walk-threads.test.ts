import { afterAll, beforeAll, expect, test } from 'bun:test'
import type { Db, Param } from '../../../core/db'
import { migrate } from '../../../core/db'
import { rawDb } from '../../../test/helpers'
import { ingestMigrations } from '../migrations'
import type { TimelinePage, TimelineQuery, TimelineText } from '../types'
import { insertMany } from './sql'
import { walkTimeline, walkTimelineText } from './timeline'
import { WalkThreads } from './walk-threads'

// SQLite's walk on worker threads (`WalkThreads`) against the same walk on the event loop, over
// rows written by hand to a file store: users and names with multi-byte text, commas, quotes,
// backslashes and U+0001 (the joined pages' separator), an empty user.
const COLS = ['id', 'received_at', 'game_id', 'env', 'event', 'ts', 'user_id', 'props'] as const
const T = 1_795_000_000_000
const odd = ['✓ ü 😀', ',', 'a, b', 'x", "y', 'back\\slash', '"', 'tab\there', 'one\u0001two', '', 'u1', 'u2']

let db: Db
let done: () => Promise<void>
let threads: WalkThreads
beforeAll(async () => {
  const raw = await rawDb('sqlite')
  db = raw.db
  done = raw.done
  await migrate(db, [{ plugin: 'ingest', migrations: ingestMigrations }])
  // 200 rows, ids 1000..1199: user and name cycle through `odd`, times not in id order.
  const params: Param[] = []
  for (let i = 0; i < 200; i++) {
    const user = odd[i % odd.length]
    params.push(1000 + i, T, 'g', 'prod', `e ${odd[(i * 7) % odd.length]}`, T + ((i * 37) % 101), user, '{}')
  }
  await db.tx((tx) => insertMany(tx, 'ingest_events', COLS, params))
  threads = new WalkThreads(db.location?.url ?? '')
})
afterAll(async () => {
  await threads.close()
  await done()
})

type Page = TimelineText | TimelinePage
const text = new TextDecoder()
/** A page as columns, and whether it came joined. */
function columns(page: Page): TimelinePage & { joined: boolean } {
  if (!('rows' in page)) return { ...page, joined: false }
  const ts = text
    .decode(page.ts)
    .split(',')
    .map((t) => page.since + Number(t))
  return {
    userId: text.decode(page.users).split('\u0001'),
    event: text.decode(page.events).split('\u0001'),
    ts,
    joined: true,
  }
}
const rowsOf = (pages: TimelinePage[]) => ({
  userId: pages.flatMap((p) => p.userId),
  event: pages.flatMap((p) => p.event),
  ts: pages.flatMap((p) => p.ts),
})
/** The walk on the event loop, and on the threads (`here` counted: how often the event loop read a part). */
async function both(q: TimelineQuery) {
  const local: Array<ReturnType<typeof columns>> = []
  await walkTimelineText(db, q, (p) => local.push(columns(p)))
  const threaded: Array<ReturnType<typeof columns>> = []
  let here = 0
  await threads.walk(
    q,
    (p) => threaded.push(columns(p)),
    (part, each) => {
      here++
      return walkTimelineText(db, part, each)
    },
  )
  return { local, threaded, here }
}
const q: TimelineQuery = {
  gameId: 'g',
  env: 'prod',
  from: T,
  to: T + 1000,
  afterId: 999,
  toId: 1199,
  limit: 7,
}

test('the same rows, in id order, as on the event loop and as columns; pages with U+0001 as columns', async () => {
  const columnsWalk: TimelinePage[] = []
  await walkTimeline(db, { ...q, limit: 10_000 }, (p) => columnsWalk.push(p))
  const all = rowsOf(columnsWalk)
  expect(all.ts.length).toBe(200)
  for (const limit of [1, 7, 64, 10_000]) {
    const { local, threaded, here } = await both({ ...q, limit })
    expect(here).toBe(0)
    expect(rowsOf(threaded)).toEqual(all)
    expect(rowsOf(local)).toEqual(all)
    for (const page of threaded) {
      expect(page.ts.length).toBeLessThanOrEqual(limit)
      const ones = [...page.userId, ...page.event].some((u) => u.includes('\u0001'))
      expect(page.joined).toBe(!ones)
    }
  }
  // Both forms occur (a user with U+0001 comes every 11 rows, a name too).
  const { threaded } = await both({ ...q, limit: 3 })
  expect(threaded.some((p) => p.joined)).toBe(true)
  expect(threaded.some((p) => !p.joined)).toBe(true)
})

test('names, times and ids narrow as on the event loop', async () => {
  for (const o of [
    { events: ['e u1', 'e ,', 'e one\u0001two'] },
    { from: T + 50, to: T + 60 },
    { afterId: 1100, toId: 1103 },
    { afterId: 1000, toId: 1001, limit: 1 },
  ]) {
    const { local, threaded, here } = await both({ ...q, ...o })
    expect(here).toBe(0)
    expect(threaded.length).toBeGreaterThan(0)
    expect(rowsOf(threaded)).toEqual(rowsOf(local))
  }
})

test('walks narrowed to more lists of names than a thread keeps statements for', async () => {
  for (let i = 0; i < 70; i++) {
    const { local, threaded, here } = await both({ ...q, events: ['e u1', `e ${i}`], limit: 5 })
    expect(here).toBe(0)
    expect(rowsOf(threaded)).toEqual(rowsOf(local))
    expect(rowsOf(threaded).ts.length).toBe(18)
  }
})

test('walks at once on the same threads: each gets its own rows, in id order', async () => {
  const { local } = await both({ ...q, limit: 4 })
  const narrow = await both({ ...q, events: ['e ,'], limit: 2 })
  const a: TimelinePage[] = []
  const b: TimelinePage[] = []
  const fail = () => Promise.reject(new Error('read on the event loop'))
  await Promise.all([
    threads.walk({ ...q, limit: 4 }, (p) => a.push(columns(p)), fail),
    threads.walk({ ...q, events: ['e ,'], limit: 2 }, (p) => b.push(columns(p)), fail),
  ])
  expect(rowsOf(a)).toEqual(rowsOf(local))
  expect(rowsOf(b)).toEqual(rowsOf(narrow.local))
  expect(new Set(rowsOf(b).event)).toEqual(new Set(['e ,']))
})

test('a range in one page, and an empty range: the same as on the event loop', async () => {
  const one = await both({ ...q, afterId: 1010, toId: 1020, limit: 100 })
  expect(one.local.length).toBe(1)
  expect(rowsOf(one.threaded)).toEqual(rowsOf(one.local))
  expect(rowsOf(one.threaded).ts.length).toBe(10)
  for (const empty of [{ afterId: 2000, toId: 3000 }, { afterId: 1050, toId: 1050 }, { gameId: 'none' }]) {
    const { local, threaded } = await both({ ...q, ...empty })
    expect(local).toEqual([])
    expect(threaded).toEqual([])
  }
})

test('a thread lost in the middle of a walk: its part goes on on the event loop, no row lost or repeated', async () => {
  const { local } = await both({ ...q, limit: 3 })
  const lost = new WalkThreads(db.location?.url ?? '')
  const got: TimelinePage[] = []
  let here = 0
  await lost.walk(
    { ...q, limit: 3 },
    (p) => {
      got.push(columns(p))
      // The first page arrived: the threads are lost (as when one fails or exits) while both
      // parts are still reading or held.
      if (got.length === 1) (lost as unknown as { lost(): void }).lost()
    },
    (part, each) => {
      here++
      return walkTimelineText(db, part, each)
    },
  )
  expect(here).toBeGreaterThan(0)
  expect(rowsOf(got)).toEqual(rowsOf(local))
  // Later walks run on the event loop from the start.
  const again: TimelinePage[] = []
  await lost.walk(
    q,
    (p) => again.push(columns(p)),
    (part, each) => walkTimelineText(db, part, each),
  )
  expect(rowsOf(again)).toEqual(rowsOf(local))
  await lost.close()
})

/** `q` walked through `threads`, counting the parts walked on the event loop instead. */
async function walkCountingHere(threads: WalkThreads) {
  let here = 0
  const got: TimelinePage[] = []
  await threads.walk(
    q,
    (p) => got.push(columns(p)),
    (part, each) => {
      here++
      return walkTimelineText(db, part, each)
    },
  )
  return { here, rows: rowsOf(got).ts.length }
}

test('closed: walks run on the event loop', async () => {
  const closed = new WalkThreads(db.location?.url ?? '')
  await closed.close()
  expect(await walkCountingHere(closed)).toEqual({ here: 1, rows: 200 })
})

test('a thread that cannot open its file: walks run on the event loop', async () => {
  const bad = new WalkThreads('/dev/null/not-a-file')
  const { here, rows } = await walkCountingHere(bad)
  expect(here).toBeGreaterThan(0)
  expect(rows).toBe(200)
  await bad.close()
})

test('a statement that fails on a thread fails the walk', async () => {
  // Another database, without the events table: the thread's statements fail.
  const other = await rawDb('sqlite')
  await other.db.exec('CREATE TABLE x (a INTEGER)')
  const wrong = new WalkThreads(other.db.location?.url ?? '')
  let here = 0
  await expect(
    wrong.walk(
      q,
      () => undefined,
      () => {
        here++
        return Promise.resolve()
      },
    ),
  ).rejects.toThrow(/no such table/)
  expect(here).toBe(0)
  await wrong.close()
  await other.done()
})
