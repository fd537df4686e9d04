import { afterAll, describe, expect, test } from 'bun:test'
import type { Appended } from '../../../core/event-log-types'
import { createLogger } from '../../../core/log'
import { checked } from '../signed/collect'
import { eventLog } from '../store/log'
import { logFields, migratedStore } from '../testing'
import { persist } from './persist'
import { PersistThread } from './persist-thread'
import { GroupWriter } from './writer'

// On SQLite the writer hands each commit's rows to the event log (consumers that keep up take
// them from memory): they must be the rows a read of the store gives back, field for field.

const log = createLogger(
  { level: 'error', format: 'json', max_size: 1, max_backups: 0, max_age: 0, sensitive_fields: [] },
  () => {},
)

// The writer commits on a persist thread, whose answer carries the seq (as a file store's does),
// or on the event loop (as a store in memory does).
for (const where of ['the persist thread', 'the event loop'])
  describe(`[sqlite] rows handed over at commit on ${where}`, () => {
    const store = migratedStore('sqlite')
    let thread: PersistThread | undefined
    afterAll(() => thread?.close())

    test('equal the rows read back from the store, and each commit says the row before it', async () => {
      const handed: Appended[] = []
      const writer = new GroupWriter(store.db, log)
      const own = where === 'the persist thread' ? new PersistThread(store.db.location!, 3) : undefined
      thread = own
      writer.attach(store.db, own && ((rows) => own.persist(rows)), (a) => {
        if (a) handed.push(a)
      })
      const t = Date.UTC(2026, 10, 28, 12)
      await writer.write(
        checked(
          [
            {
              event: 'login',
              ts: String(t),
              game_id: 'g',
              env: 'prod',
              uid: 'u1',
              session_id: 's1',
              network: 'wifi',
            },
            {
              event: 'level_up',
              ts: String(t + 1),
              game_id: 'g',
              env: 'prod',
              user_id: 'ü2',
              level: 7,
              event_id: '0192f1a4-0000-7000-8000-000000000001',
              attrs: { deep: { list: [1, 'two', null] }, currency: 'EUR' },
            },
            {
              event: 'function.invoke',
              ts: String(t + 2),
              game_id: 'g',
              env: 'staging',
              functionId: 'spawn',
              outcome: 'timeout',
              duration_ms: '12.6',
            },
          ],
          false,
        ),
      )
      await writer.write(
        checked(
          [
            {
              event: 'payment',
              ts: String(t + 3),
              game_id: 'g',
              env: 'prod',
              uid: 'u1',
              order_id: 'o-1',
              status: 'success',
              amount_cents: 499,
              currency: 'USD',
            },
          ],
          true,
        ),
      )
      expect(handed.length).toBe(2)
      expect(handed[0].after).toBeUndefined()
      expect(handed[1].after).toEqual(handed[0].entries[handed[0].entries.length - 1].at)
      const read = await eventLog(() => store.db).read(
        { seq: 0, pos: 0 },
        Number.MAX_SAFE_INTEGER,
        100,
        store.db,
      )
      const given = handed.flatMap((a) => a.entries)
      expect(given.length).toBe(4)
      expect(given.map(logFields)).toEqual(read.map(logFields))
      // The payment and the call are what consumers count: both came through.
      expect(given[3].row.payment).toEqual({ orderId: 'o-1', status: 'success', amountCents: 499 })
      expect(given[2].row.invocation?.outcome).toBe('failure')
    })
  })

describe('[sqlite] rows handed over after a failed commit', () => {
  const store = migratedStore('sqlite')
  test('a commit that failed after it may have committed leaves the next one saying nothing of what came before', async () => {
    const handed: Appended[] = []
    const writer = new GroupWriter(store.db, log)
    let dieAfterCommit = false
    writer.attach(
      store.db,
      async (rows) => {
        const seq = await persist(store.db, rows)
        if (dieAfterCommit) throw new Error('persist thread exited')
        return seq
      },
      (a) => {
        if (a) handed.push(a)
      },
    )
    const one = (id: string) =>
      checked(
        [{ event: 'tap', ts: String(Date.UTC(2026, 10, 28, 13)), game_id: 'g', env: 'prod', event_id: id }],
        false,
      )
    await writer.write(one('0192f1a4-0000-7000-8000-0000000000a1'))
    dieAfterCommit = true
    await expect(writer.write(one('0192f1a4-0000-7000-8000-0000000000a2'))).rejects.toThrow('exited')
    dieAfterCommit = false
    await writer.write(one('0192f1a4-0000-7000-8000-0000000000a3'))
    // The second commit's row is in the store, never handed over: the third must not chain on the first.
    expect(handed.length).toBe(2)
    expect(handed[1].after).toBeUndefined()
  })
})
