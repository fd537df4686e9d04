import { Database } from 'bun:sqlite'
import { afterEach, expect, test } from 'bun:test'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { migrate } from '../../core/db'
import { openSqlite } from '../../core/db/sqlite'
import { ingestMigrations } from './migrations'
import type { CommitRows } from './persist'
import { PersistThread } from './persist-thread'

// The SQLite persist thread: its own connection to the file, commits applied in the order sent,
// each promise settled by its own transaction, failures reported to the caller, nothing after close.

const dirs: string[] = []
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true })
})

async function migratedFile(): Promise<string> {
  const dir = mkdtempSync(join(tmpdir(), 'liveops-persist-'))
  dirs.push(dir)
  const file = join(dir, 'w.sqlite')
  const db = openSqlite(file)
  await migrate(db, [{ plugin: 'ingest', migrations: ingestMigrations }])
  await db.close()
  return file
}

const empty = (): CommitRows => ({
  events: [],
  payments: [],
  invocations: [],
  hours: [],
  hist: [],
  firstSeen: [],
  userDays: [],
  online: [],
  exposures: [],
  userEvents: [],
})

/** One raw event row, in the column order of persist.ts (id, received_at, game_id, env, event, ts, user_id, ...). */
const eventRow = (id: number, user: string) =>
  [id, 1000, 'g', 'prod', 'login', 1000, user, null, null, null, null, null, null, '{}'] as const

test('commits run in the order sent and are visible to other connections once their promise resolves', async () => {
  const file = await migratedFile()
  const thread = new PersistThread(file)
  const commits = Array.from({ length: 20 }, (_, c) => {
    const rows = empty()
    for (let i = 0; i < 50; i++) rows.events.push(...eventRow(c * 50 + i + 1, `u${c}`))
    return thread.persist(rows)
  })
  await commits[0]
  const reader = new Database(file, { readonly: true })
  const count = () => (reader.query('SELECT COUNT(*) AS n FROM ingest_events').get() as { n: number }).n
  expect(count()).toBeGreaterThanOrEqual(50)
  await Promise.all(commits)
  expect(count()).toBe(1000)
  const firstOf = reader.query('SELECT user_id FROM ingest_events ORDER BY rowid LIMIT 1').get() as {
    user_id: string
  }
  expect(firstOf.user_id).toBe('u0')
  reader.close()
  await thread.close()
})

test('a failed commit rejects its own promise with the store error; the next commit still lands', async () => {
  const file = await migratedFile()
  const thread = new PersistThread(file)
  const ok = empty()
  ok.events.push(...eventRow(1, 'a'))
  await thread.persist(ok)
  // The same id again breaks the primary key: that transaction alone rolls back.
  const dup = empty()
  dup.events.push(...eventRow(2, 'b'), ...eventRow(1, 'c'))
  // (`expect(promise).rejects` never settles on a promise rejected from a worker's message in Bun 1.4.5.)
  const failure = await thread.persist(dup).then(
    () => 'resolved',
    (e) => String(e),
  )
  expect(failure).toMatch(/UNIQUE constraint failed: ingest_events.id/)
  const next = empty()
  next.events.push(...eventRow(3, 'd'))
  await thread.persist(next)
  await thread.close()
  const reader = new Database(file, { readonly: true })
  const users = (
    reader.query('SELECT user_id FROM ingest_events ORDER BY id').all() as { user_id: string }[]
  ).map((r) => r.user_id)
  reader.close()
  expect(users).toEqual(['a', 'd'])
})

test('close waits for the commits already sent; persisting afterwards is refused', async () => {
  const file = await migratedFile()
  const thread = new PersistThread(file)
  const pending = Array.from({ length: 5 }, (_, c) => {
    const rows = empty()
    rows.events.push(...eventRow(c + 1, `u${c}`))
    return thread.persist(rows)
  })
  await thread.close()
  await Promise.all(pending)
  const reader = new Database(file, { readonly: true })
  expect((reader.query('SELECT COUNT(*) AS n FROM ingest_events').get() as { n: number }).n).toBe(5)
  reader.close()
  const after = await thread.persist(empty()).then(
    () => 'resolved',
    (e) => String(e),
  )
  expect(after).toMatch(/persist thread closed/)
})
