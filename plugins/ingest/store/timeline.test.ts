import { expect, test } from 'bun:test'
import type { Param } from '../../../core/db'
import { forEachEngine } from '../../../test/helpers'
import { migratedStore } from '../testing'
import type { TimelinePage, TimelineText } from '../types'
import { insertMany } from './sql'
import { walkTimeline, walkTimelineText } from './timeline'

const COLS = ['id', 'received_at', 'game_id', 'env', 'event', 'ts', 'user_id', 'props'] as const

// The light read funnels and paths walk (`IngestService.timeline`), over rows written by hand.
/** The walk's pages. */
async function walk(db: Parameters<typeof walkTimeline>[0], q: Parameters<typeof walkTimeline>[1]) {
  const pages: TimelinePage[] = []
  await walkTimeline(db, q, (page) => pages.push(page))
  return pages
}
/** `walkTimelineText`'s pages, each joined text split into columns as a reader would. */
async function walkText(db: Parameters<typeof walkTimeline>[0], q: Parameters<typeof walkTimeline>[1]) {
  const pages: Array<TimelinePage & { joined: boolean }> = []
  const text = new TextDecoder()
  await walkTimelineText(db, q, (page: TimelineText | TimelinePage) => {
    if (!('rows' in page)) return pages.push({ ...page, joined: false })
    const userId = text.decode(page.users).split('\u0001')
    const event = text.decode(page.events).split('\u0001')
    const ts = text
      .decode(page.ts)
      .split(',')
      .map((t) => page.since + Number(t))
    expect([userId.length, event.length, ts.length]).toEqual([page.rows, page.rows, page.rows])
    pages.push({ userId, event, ts, joined: true })
  })
  return pages
}
/** The walk's rows, its pages joined. */
const joined = (pages: TimelinePage[]): TimelinePage => ({
  userId: pages.flatMap((p) => p.userId),
  event: pages.flatMap((p) => p.event),
  ts: pages.flatMap((p) => p.ts),
})

forEachEngine((engine) => {
  const store = migratedStore(engine)
  const T = 1_795_000_000_000
  // id, game, env, event, ts, user
  const rows: Array<[number, string, string, string, number, string | null]> = [
    [101, 'g', 'prod', 'a', T, 'u1'],
    [102, 'g', 'prod', 'b', T + 5, 'u2'],
    [103, 'g', 'prod', 'a', T + 9, null], // no user: left out
    [104, 'g', 'qa', 'a', T + 1, 'u1'], // another environment
    [105, 'h', 'prod', 'a', T + 1, 'u1'], // another game
    [106, 'g', 'prod', 'c', T + 10, 'u1'], // at `to`: outside [from, to)
    [107, 'g', 'prod', 'b', T - 1, 'u3'], // before `from`
    [108, 'g', 'prod', 'c', T + 3, 'u3'],
    [109, 'g', 'prod', 'a', T + 2, 'u 4 ✓'],
  ]
  const q = { gameId: 'g', env: 'prod', from: T, to: T + 10, afterId: 100, toId: 200, limit: 100 }

  test('user, name and time only, of the range [from, to) with a user, in id order', async () => {
    const params: Param[] = []
    for (const [id, g, env, event, ts, user] of rows) params.push(id, T, g, env, event, ts, user, '{"x":1}')
    await store.db.tx((tx) => insertMany(tx, 'ingest_events', COLS, params))
    expect(await walk(store.db, q)).toEqual([
      {
        userId: ['u1', 'u2', 'u3', 'u 4 ✓'],
        event: ['a', 'b', 'c', 'a'],
        ts: [T, T + 5, T + 3, T + 2],
      },
    ])
  })

  test('names narrow; ids (afterId, toId]; pages of at most limit rows', async () => {
    /** The fixture ids of the walk's rows in the order handed over (each row's user, name and time are unique here). */
    const ids = async (o: Partial<typeof q> & { events?: string[] }) => {
      const pages = await walk(store.db, { ...q, ...o })
      for (const page of pages) {
        expect(page.ts.length).toBeGreaterThan(0)
        expect(page.ts.length).toBeLessThanOrEqual(o.limit ?? q.limit)
      }
      const all = joined(pages)
      return all.ts.map(
        (ts, i) => rows.find((r) => r[4] === ts && r[5] === all.userId[i] && r[3] === all.event[i])?.[0],
      )
    }
    expect(await ids({ events: ['a', 'c'] })).toEqual([101, 108, 109])
    expect(await ids({ events: ['zzz'] })).toEqual([])
    expect(await ids({ afterId: 101, toId: 108 })).toEqual([102, 108])
    expect(await ids({ limit: 2 })).toEqual([101, 102, 108, 109])
    expect(await ids({ limit: 1 })).toEqual([101, 102, 108, 109])
    expect(await ids({ afterId: 102, limit: 2 })).toEqual([108, 109])
    expect(await ids({ afterId: 101, limit: 1, events: ['c'] })).toEqual([108])
  })

  test('users and names with quotes, backslashes, separators and other characters come back as stored', async () => {
    // PostgreSQL joins a page's users and names with U+0001: a page holding one is read another way.
    const odd = [
      '✓ ü 😀',
      ',',
      'a, b',
      'x", "y',
      'back\\slash',
      '"',
      'tab\there',
      'new\nline',
      'one\u0001two',
      '\u0001',
    ]
    const params: Param[] = []
    odd.forEach((user, i) => params.push(300 + i, T, 'odd', 'prod', `e ${user}`, T + i, user, '{}'))
    await store.db.tx((tx) => insertMany(tx, 'ingest_events', COLS, params))
    const all = { userId: odd, event: odd.map((u) => `e ${u}`), ts: odd.map((_, i) => T + i) }
    const oddQ = { ...q, gameId: 'odd', afterId: 299, toId: 400 }
    expect(await walk(store.db, oddQ)).toEqual([all])
    // In pages: some without U+0001, some with it (read the other way).
    for (const limit of [1, 3, 4]) expect(joined(await walk(store.db, { ...oddQ, limit }))).toEqual(all)
    // The same walk as joined text: a page holding U+0001 comes as columns instead.
    for (const limit of [1, 3, 4, 100]) {
      const pages = await walkText(store.db, { ...oddQ, limit })
      expect(joined(pages)).toEqual(all)
      for (const page of pages) expect(page.joined).toBe(!page.userId.some((u) => u.includes('\u0001')))
    }
  })

  test('rows come in id order when the second half of the range is read first', async () => {
    // PostgreSQL walks (499, 529], (529, 559], (559, 589] and (589, 620] at once; the first part
    // takes 31 round trips, the later ones' pages are held until it is handed over.
    const params: Param[] = []
    for (let i = 0; i < 50; i++) params.push(500 + i, T, 'ord', 'prod', 'a', T + i, `u${i}`, '{}')
    params.push(560, T, 'ord', 'prod', 'b', T + 50, 'last', '{}')
    await store.db.tx((tx) => insertMany(tx, 'ingest_events', COLS, params))
    const one = { ...q, gameId: 'ord', from: T, to: T + 100, afterId: 499, toId: 620, limit: 1 }
    const pages = await walk(store.db, one)
    expect(joined(pages).ts).toEqual(Array.from({ length: 51 }, (_, i) => T + i))
    const text = await walkText(store.db, one)
    expect(joined(text).ts).toEqual(Array.from({ length: 51 }, (_, i) => T + i))
  })

  test('an empty range: no page', async () => {
    expect(await walk(store.db, { ...q, afterId: 200, toId: 300 })).toEqual([])
    expect(await walkText(store.db, { ...q, afterId: 200, toId: 300 })).toEqual([])
  })

  test('as joined text: the same rows, pages and order as the columns', async () => {
    for (const o of [{}, { limit: 1 }, { limit: 2, events: ['a', 'c'] }, { afterId: 101, toId: 108 }]) {
      const text = await walkText(store.db, { ...q, ...o })
      expect(text.map(({ joined: _, ...page }) => page)).toEqual(await walk(store.db, { ...q, ...o }))
      expect(text.every((page) => page.joined)).toBe(true)
    }
    // A store without a raw read (a wrapper of the facade): the texts decoded, then encoded again.
    const db = store.db
    const plain = {
      ...db,
      raw: undefined,
      tx: <T>(fn: (tx: typeof db) => Promise<T>) => db.tx((t) => fn({ ...t, raw: undefined })),
    }
    for (const o of [{}, { limit: 1 }])
      expect(await walkText(plain, { ...q, ...o })).toEqual(await walkText(db, { ...q, ...o }))
  })
})
