import { afterAll, describe, expect, test } from 'bun:test'
import type { Db } from '../../../core/db'
import { createLogger } from '../../../core/log'
import { engineFree, engines } from '../../../test/helpers'
import type { EventRows } from '../persist/persist'
import { PersistThread } from '../persist/persist-thread'
import { GroupWriter } from '../persist/writer'
import { checked } from '../signed/collect'
import { logFields, migratedStore } from '../testing'
import { EVENT_WIRE_WIDTH } from './event-cols'
import { committedRow, eventLog } from './log'
import { RecentRows } from './recent'

// PostgreSQL and MySQL: the log's reads take the positions from the store and the rows from this
// process's last commits (store/recent.ts). They must be the rows a read of the store gives back,
// field for field, in the store's order, and another instance's rows must come from the store.

const log = createLogger(
  { level: 'error', format: 'json', max_size: 1, max_backups: 0, max_age: 0, sensitive_fields: [] },
  () => {},
)

/** `n` rows numbered from `firstId`, each its own user. */
const block = (firstId: number, n: number): EventRows => {
  const cols: (string | number | null)[] = []
  for (let i = 0; i < n; i++) {
    const row = new Array(EVENT_WIRE_WIDTH).fill(null)
    row[0] = 0
    row[1] = 'login'
    row[2] = 1000 + i
    row[3] = `u${firstId + i}`
    cols.push(...row)
  }
  return { firstId, receivedAt: 5000, streams: ['g', 'prod'], cols, props: Array(n).fill('{}') }
}

/** The store, noting each statement a read sends through it; those `none` matches find no rows. */
const watch = (db: Db, seen: string[], none?: RegExp): Db =>
  new Proxy(db, {
    get(target, key, receiver) {
      const v = Reflect.get(target, key, receiver)
      if (key !== 'get' && key !== 'all') return v
      return (sql: string, params?: unknown[]) => {
        seen.push(sql)
        if (none?.test(sql)) return Promise.resolve(key === 'get' ? { j: '[]' } : [])
        return v.call(target, sql, params)
      }
    },
  })

engineFree('recent rows', () => {
  test('finds a row by id in blocks added out of order, and builds it once', () => {
    const r = new RecentRows(1000)
    expect(r.holds(1)).toBe(false)
    r.add(block(100, 3))
    r.add(block(10, 5))
    r.add(block(200, 2))
    expect(r.holds(9)).toBe(false)
    expect(r.holds(10)).toBe(true)
    for (const id of [10, 14, 100, 102, 200, 201]) expect(r.row(id, committedRow)?.userId).toBe(`u${id}`)
    for (const id of [9, 15, 99, 103, 202]) expect(r.row(id, committedRow)).toBeUndefined()
    expect(r.row(101, committedRow)).toBe(r.row(101, committedRow)!)
  })

  test('keeps about `cap` rows, the oldest ids going first, and always the newest commit', () => {
    const r = new RecentRows(10)
    r.add(block(1, 6))
    r.add(block(7, 6))
    expect(r.row(1, committedRow)).toBeUndefined()
    expect(r.holds(6)).toBe(false)
    expect(r.row(12, committedRow)?.userId).toBe('u12')
    r.add(block(100, 50))
    expect(r.row(7, committedRow)).toBeUndefined()
    expect(r.row(149, committedRow)?.userId).toBe('u149')
  })
})

const t = Date.UTC(2026, 10, 29, 9)
const events = (user: string, n: number) =>
  Array.from({ length: n }, (_, i) => ({
    event: i % 3 === 2 ? 'function.invoke' : 'login',
    ts: String(t + i),
    game_id: 'g',
    env: i % 2 ? 'staging' : 'prod',
    user_id: `${user}-${i}`,
    session_id: 's',
    functionId: 'spawn',
    outcome: 'ok',
    level: i,
    event_id: `${user}-${i}`,
    attrs: { deep: { list: [1, 'ü', null] } },
  }))

/** What a statement of a log read reads: rows by id, whole rows of a range, or positions alone. */
const kindOf = (sql: string) =>
  /id = ANY|WHERE id IN/.test(sql) ? 'ids' : /props/.test(sql) ? 'rows' : 'positions'
/** The kinds of the statements in order, one for each run of the same kind (MySQL splits a range read in two). */
const kinds = (seen: string[]) => seen.map(kindOf).filter((k, i, all) => i === 0 || all[i - 1] !== k)

for (const engine of engines.filter((e) => e !== 'sqlite'))
  describe(`[${engine}] the log read from this process's last commits`, () => {
    const store = migratedStore(engine)
    let thread: PersistThread | undefined
    afterAll(() => thread?.close())

    test('equals the store read, takes kept rows, and reads another instance’s from the store', async () => {
      const recent = new RecentRows()
      const writer = new GroupWriter(store.db, log)
      const own =
        store.db.location && engine === 'postgres' ? new PersistThread(store.db.location, 3) : undefined
      thread = own
      writer.attach(store.db, own && ((rows) => own.persist(rows)), undefined, recent)
      await Promise.all([
        writer.write(checked(events('a', 40), false)),
        writer.write(checked(events('b', 25), false)),
      ])
      await writer.write(
        checked(
          [
            {
              event: 'payment',
              ts: String(t),
              game_id: 'g',
              env: 'prod',
              uid: 'p',
              order_id: 'o-1',
              status: 'success',
              amount_cents: 499,
              currency: 'USD',
            },
          ],
          true,
        ),
      )
      const start = { seq: 0, pos: 0 }
      const plain = eventLog(() => store.db)
      const fromStore = await plain.read(start, Number.MAX_SAFE_INTEGER, 1000, store.db)
      expect(fromStore.length).toBe(66)
      // The cursor of a consumer that kept up: past the first row, which this process committed.
      const cursor = fromStore[0].at
      const kept = eventLog(() => store.db, recent)
      const read = await kept.read(cursor, Number.MAX_SAFE_INTEGER, 1000, store.db)
      expect(read.map(logFields)).toEqual(fromStore.slice(1).map(logFields))
      // Taken from the kept commits, not built from a read of the store.
      for (const e of read) expect(e.row).toBe(recent.row(e.at.pos, committedRow)!)
      expect(read.find((e) => e.row.payment)?.row.payment).toEqual({
        orderId: 'o-1',
        status: 'success',
        amountCents: 499,
      })
      expect(read.filter((e) => e.row.invocation).length).toBeGreaterThan(0)

      // Another instance's commit (a writer whose rows this process never kept) comes after them.
      const other = new GroupWriter(store.db, log)
      other.attach(store.db)
      await other.write(checked(events('c', 5), false))
      const all = await plain.read(cursor, Number.MAX_SAFE_INTEGER, 1000, store.db)
      expect(all.length).toBe(70)
      // Five of 70 rows not kept: the positions from the store, then those five rows by id.
      const seen: string[] = []
      const watched = watch(store.db, seen)
      const mixed = await kept.read(cursor, Number.MAX_SAFE_INTEGER, 1000, watched)
      expect(mixed.map(logFields)).toEqual(all.map(logFields))
      expect(mixed.slice(-5).map((e) => e.row.userId)).toEqual(['c-0', 'c-1', 'c-2', 'c-3', 'c-4'])
      expect(kinds(seen)).toEqual(['positions', 'ids'])
      expect(seen.find((q) => kindOf(q) === 'ids')).toContain(
        engine === 'postgres' ? 'id = ANY' : 'WHERE id IN (?, ?, ?, ?, ?, ?, ?, ?)',
      )
      expect(mixed[0].row).toBe(recent.row(mixed[0].at.pos, committedRow)!)

      // A row gone between its position's read and its own (retention): the range read whole.
      seen.length = 0
      const gone = watch(store.db, seen, /id = ANY|WHERE id IN/)
      const again = await kept.read(cursor, Number.MAX_SAFE_INTEGER, 1000, gone)
      expect(again.map(logFields)).toEqual(all.map(logFields))
      expect(kinds(seen)).toEqual(['positions', 'ids', 'rows'])

      // From the last kept row on, all five are another instance's: the range is read whole.
      seen.length = 0
      const tail = await kept.read(all[64].at, Number.MAX_SAFE_INTEGER, 1000, watched)
      expect(tail.map(logFields)).toEqual(all.slice(65).map(logFields))
      expect(kinds(seen)).toEqual(['positions', 'rows'])
    })
  })
