import { Database, type Statement } from 'bun:sqlite'
import { Checkpointer } from './checkpointer'
import type { Db, Param, Row } from './types'
import { WriteGate } from './write-gate'

const READ = /^\s*(select|with|pragma|explain)\b/i
const RETURNING = /\breturning\b/i

function isRead(sql: string): boolean {
  return READ.test(sql) && !RETURNING.test(sql)
}

/**
 * SQLite allows one writer. Every write and every transaction runs on the writer connection,
 * one at a time, in arrival order; reads outside a transaction use a second connection, which in
 * WAL mode sees only committed data. So no request reads another's uncommitted rows and no
 * rollback erases another request's write.
 */
class WriterQueue {
  private tail: Promise<unknown> = Promise.resolve()
  private pending = 0

  get idle(): boolean {
    return this.pending === 0
  }

  run<T>(fn: () => T | Promise<T>): Promise<T> {
    this.pending++
    const next = this.tail.then(fn).finally(() => this.pending--)
    this.tail = next.catch(() => undefined)
    return next
  }
}

/** How long a write waits for another connection's write lock before failing. */
const BUSY_WAIT_MS = 5000

const isBusy = (e: unknown) => (e as { code?: string } | null)?.code === 'SQLITE_BUSY'

/**
 * Another connection to the same file (a persist thread, a second process) may hold the write
 * lock. The event-loop connection never sleeps inside SQLite's busy handler (that would stall
 * every request): it gets SQLITE_BUSY at once and retries here, yielding between attempts.
 * Only statements that changed nothing when refused are retried: BEGIN IMMEDIATE and single
 * autocommit statements.
 */
async function retryBusy<T>(fn: () => T): Promise<T> {
  const deadline = Date.now() + BUSY_WAIT_MS
  for (let wait = 1; ; wait = Math.min(wait * 2, 16)) {
    try {
      return fn()
    } catch (e) {
      if (!isBusy(e) || Date.now() > deadline) throw e
    }
    await Bun.sleep(wait)
  }
}

function open(path: string, busyTimeoutMs: number): Database {
  const db = new Database(path, { create: true, strict: false })
  db.exec('PRAGMA journal_mode = WAL')
  db.exec(`PRAGMA busy_timeout = ${busyTimeoutMs}`)
  db.exec('PRAGMA synchronous = NORMAL')
  db.exec('PRAGMA foreign_keys = ON')
  return db
}

/**
 * A statement's parameters as one array argument, which bun:sqlite binds as the list. Spread
 * into arguments instead, the values of a multi-row insert (thousands) cost a quarter of the
 * insert: 3.0 against 2.2 µs a row of 16 columns (docs/performance.md, ninth session).
 */
const bindings = (params: readonly Param[]) => params as Param[]

type Conn = { db: Database; cache: Map<string, Statement> }

function stmt(conn: Conn, sql: string): Statement {
  let s = conn.cache.get(sql)
  if (!s) {
    s = conn.db.prepare(sql)
    conn.cache.set(sql, s)
  }
  return s
}

/**
 * Closes a connection for real: with a statement left unfinalized SQLite keeps it open, and the
 * last connection to the file (which checkpoints and removes the WAL) would never close.
 */
function shut(conn: Conn) {
  for (const s of conn.cache.values()) s.finalize()
  conn.cache.clear()
  conn.db.close()
}

function direct(conn: Conn, savepoints: { n: number }, dialectDb: () => Db): Db {
  const self: Db = {
    dialect: 'sqlite',
    async all<T = Row>(sql: string, params: readonly Param[] = []) {
      return stmt(conn, sql).all(bindings(params)) as T[]
    },
    async get<T = Row>(sql: string, params: readonly Param[] = []) {
      return (stmt(conn, sql).get(bindings(params)) ?? undefined) as T | undefined
    },
    async run(sql: string, params: readonly Param[] = []) {
      return stmt(conn, sql).run(bindings(params)).changes
    },
    async tx<T>(fn: (tx: Db) => Promise<T>) {
      const name = `sp${++savepoints.n}`
      conn.db.exec(`SAVEPOINT ${name}`)
      try {
        const out = await fn(self)
        conn.db.exec(`RELEASE ${name}`)
        return out
      } catch (e) {
        if (conn.db.inTransaction) {
          conn.db.exec(`ROLLBACK TO ${name}`)
          conn.db.exec(`RELEASE ${name}`)
        }
        throw e
      }
    },
    async exec(sql: string) {
      conn.db.exec(sql)
    },
    ping: () => dialectDb().ping(),
    close: async () => undefined,
  }
  return self
}

/**
 * Opens a SQLite file. `blocking` (worker threads, which have no requests to stall) waits for a
 * busy write lock inside SQLite; otherwise writes wait asynchronously (`retryBusy`), and a
 * checkpointer thread copies the WAL into the file, so the event loop's commits do not: they
 * checkpoint only once the WAL passes 32 MB (and then find little left to copy), which lets
 * the WAL start again from its beginning; the file is cut back to 64 MB then.
 */
export function openSqlite(
  path: string,
  opts: {
    blocking?: boolean
    /** A persist thread's side of the event loop's gate (`StoreLocation.gate`): its writes take turns with the loop's. */
    gate?: SharedArrayBuffer
  } = {},
): Db {
  const writer: Conn = { db: open(path, opts.blocking ? BUSY_WAIT_MS : 0), cache: new Map() }
  // An in-memory database cannot be shared between two connections.
  const reader: Conn = path === ':memory:' ? writer : { db: open(path, BUSY_WAIT_MS), cache: new Map() }
  if (reader !== writer) reader.db.exec('PRAGMA query_only = ON')
  let checkpointer: Checkpointer | undefined
  if (!opts.blocking && reader !== writer) {
    checkpointer = new Checkpointer(path, () => {
      // The thread is gone: commits checkpoint again, as SQLite does by default.
      if (!closed) writer.db.exec('PRAGMA wal_autocheckpoint = 1000')
    })
    writer.db.exec('PRAGMA wal_autocheckpoint = 8192; PRAGMA journal_size_limit = 67108864')
  }
  const queue = new WriterQueue()
  const savepoints = { n: 0 }
  let closed = false
  // Every write of this connection holds the gate; a file's threads share it (write-gate.ts).
  const gate = opts.gate ? new WriteGate(opts.gate, 2) : new WriteGate()
  const gated = async <T>(fn: () => T | Promise<T>): Promise<T> => {
    await gate.take()
    try {
      return await fn()
    } finally {
      gate.give()
    }
  }

  const write = <T>(fn: () => T): Promise<T> => {
    // Fast path: nothing queued, so nothing can be mid-transaction on the writer.
    if (queue.idle && gate.tryTake()) {
      try {
        return Promise.resolve(fn())
      } catch (e) {
        if (!isBusy(e)) return Promise.reject(e)
      } finally {
        gate.give()
      }
    }
    return queue.run(() => gated(() => retryBusy(fn)))
  }

  const inTx = async <T>(fn: (tx: Db) => Promise<T>): Promise<T> => {
    await retryBusy(() => writer.db.exec('BEGIN IMMEDIATE'))
    try {
      const out = await fn(direct(writer, savepoints, () => db))
      writer.db.exec('COMMIT')
      return out
    } catch (e) {
      // SQLite rolls back by itself on some errors (SQLITE_FULL, SQLITE_IOERR): a ROLLBACK then
      // fails with "no transaction is active" and would hide the error that matters.
      if (writer.db.inTransaction) writer.db.exec('ROLLBACK')
      throw e
    }
  }

  const db: Db = {
    dialect: 'sqlite',
    location: path === ':memory:' ? undefined : { url: path, gate: gate.buffer },
    async all<T = Row>(sql: string, params: readonly Param[] = []) {
      if (isRead(sql) && reader !== writer) return stmt(reader, sql).all(bindings(params)) as T[]
      return write(() => stmt(writer, sql).all(bindings(params)) as T[])
    },
    async get<T = Row>(sql: string, params: readonly Param[] = []) {
      if (isRead(sql) && reader !== writer)
        return (stmt(reader, sql).get(bindings(params)) ?? undefined) as T | undefined
      return write(() => (stmt(writer, sql).get(bindings(params)) ?? undefined) as T | undefined)
    },
    run(sql: string, params: readonly Param[] = []) {
      return write(() => stmt(writer, sql).run(bindings(params)).changes)
    },
    tx<T>(fn: (tx: Db) => Promise<T>) {
      return queue.run(() => gated(() => inTx(fn)))
    },
    async exec(sql: string) {
      await queue.run(() => gated(() => retryBusy(() => writer.db.exec(sql))))
    },
    async ping() {
      const t = performance.now()
      reader.db.query('SELECT 1').get()
      return performance.now() - t
    },
    async close() {
      if (closed) return
      closed = true
      await queue.run(() => undefined)
      if (reader !== writer) shut(reader)
      // Best effort: statistics for the next start. Another connection (a persist thread
      // closing at the same time) may hold the lock; that costs nothing but the statistics.
      try {
        await gated(() => retryBusy(() => writer.db.exec('PRAGMA optimize')))
      } catch (e) {
        if (!isBusy(e)) throw e
      }
      shut(writer)
      await checkpointer?.close()
    },
  }
  return db
}
