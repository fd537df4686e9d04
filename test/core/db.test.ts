import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { type Db, MigrationError, migrate, openDb } from '../../core/db'
import { toPg } from '../../core/db/postgres'
import { forEachEngine, rawDb } from '../helpers'

test('? placeholders become $n outside quotes', () => {
  expect(toPg("SELECT * FROM t WHERE a = ? AND b = '?' AND c = ?")).toBe(
    "SELECT * FROM t WHERE a = $1 AND b = '?' AND c = $2",
  )
})

forEachEngine((engine) => {
  let h: { db: Db; done: () => Promise<void> }
  beforeAll(async () => {
    h = await rawDb(engine)
  })
  afterAll(() => h.done())

  describe('Db facade', () => {
    test('same SQL on both engines: RETURNING, ON CONFLICT, BIGINT times, JSON as TEXT', async () => {
      const { db } = h
      await db.exec('CREATE TABLE kv (k TEXT PRIMARY KEY, v TEXT NOT NULL, at BIGINT NOT NULL)')
      const now = Date.now()
      const row = await db.get<{ k: string; at: number }>(
        'INSERT INTO kv (k, v, at) VALUES (?, ?, ?) RETURNING k, at',
        ['a', JSON.stringify({ x: 1 }), now],
      )
      expect(row).toEqual({ k: 'a', at: now })
      expect(
        await db.run('INSERT INTO kv (k, v, at) VALUES (?, ?, ?) ON CONFLICT (k) DO NOTHING', ['a', '{}', 1]),
      ).toBe(0)
      await db.run(
        'INSERT INTO kv (k, v, at) VALUES (?, ?, ?) ON CONFLICT (k) DO UPDATE SET v = excluded.v',
        ['a', '"y"', 1],
      )
      expect((await db.get<{ v: string }>('SELECT v FROM kv WHERE k = ?', ['a']))?.v).toBe('"y"')
      expect(await db.get('SELECT v FROM kv WHERE k = ?', ['missing'])).toBeUndefined()
      const n = await db.get<{ n: number }>('SELECT COUNT(*) AS n FROM kv')
      expect(n?.n).toBe(1)
      expect(await db.ping()).toBeGreaterThanOrEqual(0)
    })

    test('200 concurrent writes and transactions, some rolling back: no dirty read, no lost write', async () => {
      const { db } = h
      await db.exec('CREATE TABLE acct (id TEXT PRIMARY KEY, balance BIGINT NOT NULL)')
      await db.exec('CREATE TABLE ledger (id TEXT PRIMARY KEY, tag TEXT NOT NULL)')
      await db.run('INSERT INTO acct (id, balance) VALUES (?, ?)', ['a', 0])
      const dirty: string[] = []
      const committed: string[] = []
      const ops = Array.from({ length: 200 }, (_, i) => async () => {
        const id = `op-${i}`
        if (i % 4 === 0) {
          // A plain write outside any transaction.
          await db.run('INSERT INTO ledger (id, tag) VALUES (?, ?)', [id, 'plain'])
          committed.push(id)
        } else {
          const rollback = i % 4 === 1
          try {
            await db.tx(async (tx) => {
              await tx.run('INSERT INTO ledger (id, tag) VALUES (?, ?)', [id, rollback ? 'doomed' : 'tx'])
              await tx.run('UPDATE acct SET balance = balance + 1 WHERE id = ?', ['a'])
              // Give other requests a chance to run in the middle of this transaction.
              await Bun.sleep(i % 3)
              if (rollback) throw new Error('roll back')
            })
            committed.push(id)
          } catch (e) {
            if ((e as Error).message !== 'roll back') throw e
          }
        }
        // A read outside the transaction must never see a doomed row.
        const seen = await db.all<{ id: string }>("SELECT id FROM ledger WHERE tag = 'doomed'")
        if (seen.length) dirty.push(...seen.map((r) => r.id))
      })
      await Promise.all(ops.map((op) => op()))
      expect(dirty).toEqual([])
      const rows = await db.all<{ id: string }>('SELECT id FROM ledger ORDER BY id')
      expect(rows.map((r) => r.id).sort()).toEqual(committed.sort())
      expect(rows).toHaveLength(150)
      const balance = await db.get<{ balance: number }>('SELECT balance FROM acct WHERE id = ?', ['a'])
      expect(balance?.balance).toBe(100)
    })

    test('nested transactions are savepoints: an inner rollback keeps the outer work', async () => {
      const { db } = h
      await db.exec('CREATE TABLE nest (id TEXT PRIMARY KEY)')
      await db.tx(async (tx) => {
        await tx.run('INSERT INTO nest (id) VALUES (?)', ['outer'])
        await tx
          .tx(async (inner) => {
            await inner.run('INSERT INTO nest (id) VALUES (?)', ['inner'])
            throw new Error('inner fails')
          })
          .catch(() => undefined)
      })
      expect((await db.all<{ id: string }>('SELECT id FROM nest')).map((r) => r.id)).toEqual(['outer'])
    })
  })

  describe('migrations', () => {
    const m1 = {
      id: 1,
      name: 'init',
      sql: 'CREATE TABLE widgets (id TEXT PRIMARY KEY);\nCREATE INDEX widgets_id ON widgets (id);',
    }
    const m2 = {
      id: 2,
      name: 'colour',
      sql: "ALTER TABLE widgets ADD COLUMN colour TEXT NOT NULL DEFAULT 'red'",
    }

    test('applied once, recorded in the ledger with a checksum', async () => {
      const { db } = h
      expect(await migrate(db, [{ plugin: 'widgets', migrations: [m1] }])).toEqual(['widgets/1'])
      expect(await migrate(db, [{ plugin: 'widgets', migrations: [m1, m2] }])).toEqual(['widgets/2'])
      expect(await migrate(db, [{ plugin: 'widgets', migrations: [m1, m2] }])).toEqual([])
      const ledger = await db.all<{ id: number; checksum: string }>(
        "SELECT id, checksum FROM liveops_migrations WHERE plugin = 'widgets' ORDER BY id",
      )
      expect(ledger.map((r) => r.id)).toEqual([1, 2])
      expect(ledger[0].checksum).toMatch(/^[0-9a-f]{64}$/)
      await db.run('INSERT INTO widgets (id) VALUES (?)', ['w'])
      expect((await db.get<{ colour: string }>('SELECT colour FROM widgets'))?.colour).toBe('red')
    })

    test('an edited applied migration stops startup with a clear message', async () => {
      const edited = { ...m1, sql: `${m1.sql}\n-- tweak` }
      const err = await migrate(h.db, [{ plugin: 'widgets', migrations: [edited, m2] }]).catch((e) => e)
      expect(err).toBeInstanceOf(MigrationError)
      expect(err.message).toContain('widgets/001_init was edited after it was applied')
    })

    test('pending migrations apply in one transaction: a failing one leaves nothing behind', async () => {
      const { db } = h
      const ok = { id: 1, name: 'ok', sql: 'CREATE TABLE gadgets (id TEXT PRIMARY KEY)' }
      const broken = {
        id: 2,
        name: 'broken',
        sql: 'CREATE TABLE gadgets_broken (id TEXT PRIMARY KEY); INSERT INTO no_such_table VALUES (1)',
      }
      await expect(migrate(db, [{ plugin: 'gadgets', migrations: [ok, broken] }])).rejects.toThrow()
      if (engine === 'mysql') {
        // MySQL commits each DDL statement (docs/storage.md): the migrations before the failing one
        // stay applied and recorded, the failing one is not, and runs again whole (IF NOT EXISTS).
        expect(await db.all("SELECT id FROM liveops_migrations WHERE plugin = 'gadgets'")).toEqual([
          { id: 1 },
        ])
        const fixed = { ...broken, sql: 'CREATE TABLE gadgets_broken (id TEXT PRIMARY KEY)' }
        expect(await migrate(db, [{ plugin: 'gadgets', migrations: [ok, fixed] }])).toEqual(['gadgets/2'])
        return
      }
      expect(await db.all("SELECT id FROM liveops_migrations WHERE plugin = 'gadgets'")).toEqual([])
      expect(await migrate(db, [{ plugin: 'gadgets', migrations: [ok] }])).toEqual(['gadgets/1'])
    })

    test('INTEGER PRIMARY KEY holds 64-bit ids on both engines (BIGINT on PostgreSQL)', async () => {
      const m = { id: 1, name: 'big', sql: 'CREATE TABLE big_ids (id INTEGER PRIMARY KEY, v TEXT)' }
      await migrate(h.db, [{ plugin: 'big', migrations: [m] }])
      const id = Date.now() * 1024 + 7
      await h.db.run('INSERT INTO big_ids (id, v) VALUES (?, ?)', [id, 'x'])
      expect((await h.db.get<{ id: number }>('SELECT id FROM big_ids'))?.id).toBe(id)
    })

    test('ids must increase', async () => {
      await expect(migrate(h.db, [{ plugin: 'bad', migrations: [m2, m1] }])).rejects.toThrow(
        'ids must increase',
      )
    })
  })
})

describe('[sqlite] another connection holding the write lock', () => {
  let dir: string
  let db: Db
  let other: import('bun:sqlite').Database
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'liveops-busy-'))
    db = openDb(join(dir, 'busy.sqlite'), dir)
    await db.exec('CREATE TABLE t (v TEXT)')
    const { Database } = await import('bun:sqlite')
    other = new Database(join(dir, 'busy.sqlite'))
  })
  afterAll(async () => {
    other.close()
    await db.close()
    rmSync(dir, { recursive: true, force: true })
  })

  test('writes and transactions wait without stalling the event loop, then apply', async () => {
    other.exec('BEGIN IMMEDIATE')
    other.exec("INSERT INTO t VALUES ('other')")
    const t0 = performance.now()
    const order: string[] = []
    const timer = new Promise<void>((r) =>
      setTimeout(() => {
        order.push('timer')
        r()
      }, 10),
    )
    const write = db.run("INSERT INTO t VALUES ('mine')").then(() => order.push('write'))
    const tx = db.tx(async (t) => {
      await t.run("INSERT INTO t VALUES ('in tx')")
    })
    // The other connection commits from a timer on this same thread: had the write slept inside
    // SQLite, that timer could not run until the busy timeout gave up and the write failed.
    setTimeout(() => {
      order.push('commit')
      other.exec('COMMIT')
    }, 60)
    await Promise.all([write, tx, timer])
    expect(order).toEqual(['timer', 'commit', 'write'])
    expect(performance.now() - t0).toBeGreaterThanOrEqual(55)
    expect((await db.all<{ v: string }>('SELECT v FROM t ORDER BY rowid')).map((r) => r.v)).toEqual([
      'other',
      'mine',
      'in tx',
    ])
  })

  test('a write still refused after the busy wait fails instead of hanging', async () => {
    other.exec('BEGIN IMMEDIATE')
    try {
      const started = performance.now()
      const err = await db.run("INSERT INTO t VALUES ('late')").catch((e) => e)
      expect(String(err)).toMatch(/locked|busy/i)
      expect(performance.now() - started).toBeGreaterThanOrEqual(4900)
    } finally {
      other.exec('ROLLBACK')
    }
  }, 15_000)
})

describe('[sqlite] the checkpointer thread', () => {
  test('copies committed WAL frames into the file, so commits on the event loop never checkpoint; a close leaves no WAL', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'liveops-checkpoint-'))
    const file = join(dir, 'cp.sqlite')
    const db = openDb(file, dir)
    try {
      // The event loop's commits checkpoint only past 32 MB (SQLite's default is 4 MB).
      expect(await db.tx((t) => t.get<{ wal_autocheckpoint: number }>('PRAGMA wal_autocheckpoint'))).toEqual({
        wal_autocheckpoint: 8192,
      })
      await db.exec('CREATE TABLE t (v TEXT NOT NULL)')
      const before = Bun.file(file).size
      // About 6 MB of commits: past SQLite's own limit, short of this connection's.
      const row = 'x'.repeat(3000)
      for (let i = 0; i < 2000; i++) await db.run('INSERT INTO t (v) VALUES (?)', [`${i}${row}`])
      expect(Bun.file(`${file}-wal`).size).toBeGreaterThan(4 * 1024 * 1024)
      // Only the other thread can have copied the frames into the database file.
      const deadline = Date.now() + 5000
      while (Bun.file(file).size < 5 * 1024 * 1024 && Date.now() < deadline) await Bun.sleep(20)
      expect(Bun.file(file).size).toBeGreaterThan(Math.max(before, 5 * 1024 * 1024))
    } finally {
      await db.close()
    }
    // The last connection to close (the checkpointer's) checkpointed everything and removed the WAL.
    expect(await Bun.file(`${file}-wal`).exists()).toBe(false)
    const { Database } = await import('bun:sqlite')
    const again = new Database(file, { readonly: true })
    expect(again.query('SELECT count(*) AS n FROM t').get()).toEqual({ n: 2000 })
    again.close()
    rmSync(dir, { recursive: true, force: true })
  })
})
