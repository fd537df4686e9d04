import { afterEach, expect, test } from 'bun:test'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { type Db, type StoreLocation, migrate } from '../../../core/db'
import { openPostgres } from '../../../core/db/postgres'
import { openSqlite } from '../../../core/db/sqlite'
import { WriteGate } from '../../../core/db/write-gate'
import { PG_URL, forEachEngine, freshSchema } from '../../../test/helpers'
import { ingestMigrations } from '../migrations'
import { emptyCommit } from '../testing'
import type { CommitRows } from './persist'
import { PersistThread } from './persist-thread'

// The persist thread: its own connections to the store, each promise settled by its own
// transaction, failures reported to the caller, nothing accepted after close. SQLite commits
// apply in the order sent.

const cleanups: Array<() => Promise<void> | void> = []
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c()
})

/** A migrated store and its location; `db` is the test's own connection for reading back. */
async function store(engine: string): Promise<{ location: StoreLocation; db: Db }> {
  if (engine === 'postgres') {
    const { schema, drop } = await freshSchema()
    const db = openPostgres(PG_URL, { schema, max: 2 })
    await migrate(db, [{ plugin: 'ingest', migrations: ingestMigrations }])
    cleanups.push(drop, () => db.close())
    return { location: { url: PG_URL, schema }, db }
  }
  const dir = mkdtempSync(join(tmpdir(), 'liveops-persist-'))
  const file = join(dir, 'w.sqlite')
  const db = openSqlite(file)
  await migrate(db, [{ plugin: 'ingest', migrations: ingestMigrations }])
  cleanups.push(
    () => rmSync(dir, { recursive: true, force: true }),
    () => db.close(),
  )
  // With the store's write gate, as the ingest plugin gives it (core/db/write-gate.ts).
  return { location: db.location!, db }
}

/** A commit of login events of game `g`, one per user, with ids from `firstId` up. */
const commitOf = (firstId: number, ...users: string[]): CommitRows => {
  const rows = emptyCommit()
  rows.events.firstId = firstId
  for (const user of users) {
    // Stream 0, then event, ts, user_id, session_id, amount_cents, currency, duration_ms, network, level, payment_status.
    rows.events.cols.push(0, 'login', 1000, user, null, null, null, null, null, null, null)
    rows.events.props.push('{}')
  }
  return rows
}
const count = async (db: Db) =>
  Number((await db.get<{ n: number }>('SELECT COUNT(*) AS n FROM ingest_events'))?.n)
/** How a promise settled, as text: `expect(promise).rejects` never settles on a promise rejected from a worker's message in Bun 1.4.5. */
const settled = (p: Promise<unknown>) =>
  p.then(
    () => 'resolved',
    (e) => String(e),
  )

forEachEngine((engine) => {
  // MySQL commits on the event loop: ingest starts no persist thread there (plugins/ingest/index.ts).
  if (engine === 'mysql') return
  test('every commit is stored and readable from other connections once its promise resolves', async () => {
    const { location, db } = await store(engine)
    const thread = new PersistThread(location, 3)
    const commits = Array.from({ length: 20 }, (_, c) =>
      thread.persist(commitOf(c * 50 + 1, ...Array.from({ length: 50 }, () => `u${c}`))),
    )
    await commits[0]
    expect(await count(db)).toBeGreaterThanOrEqual(50)
    await Promise.all(commits)
    expect(await count(db)).toBe(1000)
    if (engine === 'sqlite') {
      // One writer, in the order sent: the first commit's rows come first in the file.
      const first = await db.get<{ user_id: string }>(
        'SELECT user_id FROM ingest_events ORDER BY rowid LIMIT 1',
      )
      expect(first?.user_id).toBe('u0')
    }
    await thread.close()
  })

  if (engine === 'sqlite')
    test('a SQLite commit takes turns with the event loop through the write gate, and answers the seq it took', async () => {
      const { location, db } = await store(engine)
      const thread = new PersistThread(location, 3)
      const first = await thread.persist(commitOf(1, 'a'))
      expect(typeof first).toBe('number')
      // The event loop holds the gate (as for one of its own transactions): the thread's next
      // commit waits for it, though SQLite's own lock is free.
      const loop = new WriteGate(location.gate)
      await loop.take()
      const next = thread.persist(commitOf(2, 'b'))
      const early = await Promise.race([next.then(() => 'committed'), Bun.sleep(300).then(() => 'waiting')])
      expect(early).toBe('waiting')
      expect(await count(db)).toBe(1)
      loop.give()
      expect(await next).toBe(Number(first) + 1)
      expect(await count(db)).toBe(2)
      await thread.close()
    })

  test('a failed commit rejects its own promise with the store error and stores nothing of it; the next still lands', async () => {
    const { location, db } = await store(engine)
    const thread = new PersistThread(location, 3)
    await thread.persist(commitOf(1, 'a'))
    // Ids 1 and 2: 1 is taken, which breaks the primary key; that transaction alone rolls back.
    expect(await settled(thread.persist(commitOf(1, 'b', 'c')))).toMatch(/unique|duplicate key/i)
    await thread.persist(commitOf(3, 'd'))
    await thread.close()
    const users = (await db.all<{ user_id: string }>('SELECT user_id FROM ingest_events ORDER BY id')).map(
      (r) => r.user_id,
    )
    expect(users).toEqual(['a', 'd'])
  })

  test('close waits for the commits already sent; persisting afterwards is refused', async () => {
    const { location, db } = await store(engine)
    const thread = new PersistThread(location, 3)
    const pending = Array.from({ length: 5 }, (_, c) => thread.persist(commitOf(c + 1, `u${c}`)))
    await thread.close()
    expect(await Promise.all(pending.map(settled))).toEqual(Array(5).fill('resolved'))
    expect(await count(db)).toBe(5)
    expect(await settled(thread.persist(emptyCommit()))).toMatch(/persist thread closed/)
  })

  test('a thread that dies is replaced: its unanswered commits are refused, later ones land', async () => {
    const { location, db } = await store(engine)
    const thread = new PersistThread(location, 3)
    await thread.persist(commitOf(1, 'before'))
    // A crash, as far as the owner can tell: the worker is gone without closing.
    const pending = settled(thread.persist(commitOf(2, 'maybe')))
    ;(thread as unknown as { worker: Worker }).worker.terminate()
    expect(await pending).toMatch(/persist thread (exited|failed)|resolved/)
    // Until the new thread is up, commits are refused at once rather than lost.
    let later = 'refused'
    for (let i = 0; i < 100 && later !== 'resolved'; i++) {
      later = await settled(thread.persist(commitOf(10 + i, 'after')))
      if (later !== 'resolved') {
        expect(later).toMatch(/persist thread restarting/)
        await Bun.sleep(20)
      }
    }
    expect(later).toBe('resolved')
    expect(thread.restarts).toBe(1)
    const users = (await db.all<{ user_id: string }>('SELECT DISTINCT user_id FROM ingest_events')).map(
      (r) => r.user_id,
    )
    expect(users).toContain('before')
    expect(users).toContain('after')
    await thread.close()
  })

  test('commits sync as configured: SQLite NORMAL unless full is asked for; PostgreSQL synchronously', async () => {
    const { location } = await store(engine)
    for (const synchronous of ['normal', 'full'] as const) {
      const thread = new PersistThread(location, 1, synchronous)
      try {
        // SQLite answers 1 for NORMAL (synced at checkpoints), 2 for FULL (before every answer).
        if (engine === 'sqlite')
          expect(await thread.setting('synchronous')).toBe(synchronous === 'full' ? 2 : 1)
        else expect(await thread.setting('synchronous_commit')).toBe('on')
        await expect(thread.setting('synchronous; DROP TABLE x')).rejects.toThrow('not a setting name')
      } finally {
        await thread.close()
      }
    }
  })

  if (engine === 'sqlite')
    test('a checkpointer thread copies committed WAL frames into the database file; commits do not wait for it', async () => {
      const { location, db } = await store(engine)
      const file = location.url
      const before = Bun.file(file).size
      const thread = new PersistThread(location)
      await thread.persist(commitOf(1, ...Array.from({ length: 2000 }, (_, i) => `u${i}`)))
      // The commit only appended to the WAL (commits checkpoint themselves past 32 MB only).
      expect(Bun.file(`${file}-wal`).size).toBeGreaterThan(0)
      const deadline = Date.now() + 3000
      while (Bun.file(file).size <= before && Date.now() < deadline) await Bun.sleep(50)
      expect(Bun.file(file).size).toBeGreaterThan(before)
      expect(await count(db)).toBe(2000)
      await thread.close()
    })
})
