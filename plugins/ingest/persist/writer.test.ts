import { expect, test } from 'bun:test'
import { createLogger } from '../../../core/log'
import { forEachEngine, until } from '../../../test/helpers'
import { checked } from '../signed/collect'
import { EVENT_WIRE_WIDTH } from '../store/event-cols'
import { migratedStore } from '../testing'
import { type CommitRows, persist } from './persist'
import { COMMITS_IN_FLIGHT, GroupWriter } from './writer'

// The group-commit writer (performance note 2): requests that arrive together share one
// transaction, and each is answered only once that transaction committed.

const log = createLogger(
  { level: 'error', format: 'json', max_size: 1, max_backups: 0, max_age: 0, sensitive_fields: [] },
  () => {},
)
const events = (prefix: string, n: number) =>
  checked(
    Array.from({ length: n }, (_, i) => ({
      event: 'tap',
      ts: String(Date.now()),
      game_id: 'g',
      env: 'prod',
      uid: `${prefix}${i}`,
    })),
    false,
  )
/** Raw events a commit holds. */
const size = (c: CommitRows) => c.events.cols.length / EVENT_WIRE_WIDTH

forEachEngine((engine) => {
  const store = migratedStore(engine)

  test('requests queued together share one transaction; each answers only after its commit', async () => {
    const commits: CommitRows[] = []
    const gates: Array<() => void> = []
    // Stands in for the persist thread: holds each commit until the test lets it go.
    const writer = new GroupWriter(store.db, log, async (rows) => {
      commits.push(rows)
      await new Promise<void>((r) => gates.push(r))
      return persist(store.db, rows)
    })
    let answered = 0
    const first = Array.from({ length: 10 }, (_, i) =>
      writer.write(events(`a${i}-`, 3)).then(() => answered++),
    )
    await until(() => commits.length === 1, 10_000)
    // Ten requests, one transaction of 30 events, and nobody answered while it is open.
    expect(size(commits[0])).toBe(30)
    expect(answered).toBe(0)

    // What arrives meanwhile goes into the next commit (up to COMMITS_IN_FLIGHT run at once).
    const second = Array.from({ length: 4 }, (_, i) =>
      writer.write(events(`b${i}-`, 2)).then(() => answered++),
    )
    await until(() => commits.length === 2, 10_000)
    expect(COMMITS_IN_FLIGHT[engine]).toBeGreaterThanOrEqual(2)
    expect(size(commits[1])).toBe(8)
    expect(answered).toBe(0)

    gates[0]()
    await Promise.all(first)
    expect(answered).toBe(10)
    gates[1]()
    await Promise.all(second)
    await writer.idle()
    expect(commits.length).toBe(2)
    const stored = await store.db.get<{ n: number }>(
      "SELECT COUNT(*) AS n FROM ingest_events WHERE event = 'tap'",
    )
    expect(Number(stored?.n)).toBe(38)
  })

  test("a commit PostgreSQL picked as a deadlock's victim runs again and its requests succeed; other errors fail them", async () => {
    let calls = 0
    let fail: string | undefined
    // Stands in for the persist thread: the store rolled the first attempt back whole.
    const writer = new GroupWriter(store.db, log, async (rows) => {
      calls++
      if (fail) {
        const message = fail
        fail = undefined
        throw new Error(message)
      }
      return persist(store.db, rows)
    })
    const count = async (prefix: string) =>
      Number(
        (
          await store.db.get<{ n: number }>('SELECT COUNT(*) AS n FROM ingest_events WHERE user_id LIKE ?', [
            `${prefix}%`,
          ])
        )?.n,
      )
    fail = 'deadlock detected'
    await writer.write(events('dl-', 5))
    expect(calls).toBe(2)
    expect(await count('dl-')).toBe(5)
    fail = 'disk I/O error'
    await expect(writer.write(events('io-', 3))).rejects.toThrow('disk I/O error')
    expect(await count('io-')).toBe(0)
    await writer.idle()
  })

  test("a client's payment and the server's of the same order and status in one commit: the server's alone is stored", async () => {
    const writer = new GroupWriter(store.db, log, (rows) => persist(store.db, rows))
    const pay = (uid: string, amount: number) => ({
      event: 'payment',
      ts: String(Date.now()),
      game_id: 'g',
      env: 'prod',
      uid,
      order_id: 'same-commit',
      status: 'success',
      amount_cents: amount,
    })
    const [client, server] = checked([pay('attacker', 1), pay('buyer', 4999)], true)
    server.server = true
    await writer.write([client, server])
    const rows = await store.db.all<{ amount_cents: number; user_id: string; source: string }>(
      "SELECT amount_cents, user_id, source FROM ingest_payments WHERE order_id = 'same-commit'",
    )
    expect(rows.map((r) => [Number(r.amount_cents), r.user_id, r.source])).toEqual([
      [4999, 'buyer', 'server'],
    ])
    const logged = await store.db.all<{ user_id: string }>(
      "SELECT user_id FROM ingest_events WHERE event = 'payment' AND props LIKE '%same-commit%'",
    )
    expect(logged.map((r) => r.user_id)).toEqual(['buyer'])
    await writer.idle()
  })
})
