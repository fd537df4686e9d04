/**
 * Entry of a walk thread (see walk-threads.ts): its own connection to the SQLite event store,
 * reading one part of a walk as joined pages (`sqliteWalk`), each posted as soon as it is read,
 * its bytes transferred.
 */
import { Database, type Statement } from 'bun:sqlite'
import type { Param } from '../../../core/db'
import { sqliteWalk } from './timeline'
import type { WalkReply, WalkRequest } from './walk-threads'

declare const self: Worker

let conn: Database | undefined
/** Asked for; SQLite maps at most its build's limit (SQLITE_MAX_MMAP_SIZE, 2 GB by default). */
const MMAP_BYTES = 2 ** 40
const statements = new Map<string, Statement>()

function all(sql: string, params: Param[]) {
  if (!conn) throw new Error('the walk thread is not started')
  let s = statements.get(sql)
  if (!s) {
    // A statement per list of names a walk narrows to: kept for the few in use, not for every one.
    if (statements.size >= 64) {
      for (const old of statements.values()) old.finalize()
      statements.clear()
    }
    s = conn.prepare(sql)
    statements.set(sql, s)
  }
  return s.all(params) as Array<Record<string, unknown>>
}

/** `b`'s buffer to transfer: its own, or a copy when `b` is a view of a larger one. */
const own = (b: Uint8Array) => (b.byteOffset === 0 && b.byteLength === b.buffer.byteLength ? b : b.slice())

self.onmessage = async (m: MessageEvent<WalkRequest>) => {
  const msg = m.data
  if (msg.kind === 'start') {
    // The store's file, never a new one (a wrong path fails the thread: walks run on the event loop).
    conn = new Database(msg.file, { readwrite: true, create: false })
    // The file mapped into memory (as far as SQLite maps, 2 GB by default): two threads reading
    // through SQLite's page cache took as long for half a day's rows each as one thread for all
    // of them; mapped, half the time (docs/performance.md, "Funnels and paths on SQLite").
    conn.exec(`PRAGMA busy_timeout = 5000; PRAGMA query_only = ON; PRAGMA mmap_size = ${MMAP_BYTES}`)
    return
  }
  if (msg.kind === 'close') {
    // Finalized first: SQLite keeps a connection with a live statement open.
    for (const s of statements.values()) s.finalize()
    statements.clear()
    conn?.close()
    conn = undefined
    self.postMessage({ kind: 'closed' } satisfies WalkReply)
    return
  }
  try {
    await sqliteWalk(all, msg.q, (page, last) => {
      if ('rows' in page) {
        const p = { ...page, users: own(page.users), events: own(page.events), ts: own(page.ts) }
        self.postMessage({ kind: 'page', id: msg.id, page: p, last } satisfies WalkReply, [
          p.users.buffer,
          p.events.buffer,
          p.ts.buffer,
        ])
      } else self.postMessage({ kind: 'page', id: msg.id, page, last } satisfies WalkReply)
    })
    self.postMessage({ kind: 'done', id: msg.id } satisfies WalkReply)
  } catch (e) {
    self.postMessage({
      kind: 'failed',
      id: msg.id,
      error: String((e as Error)?.message ?? e),
    } satisfies WalkReply)
  }
}
