/**
 * Entry of a SQLite store's checkpointer thread (see checkpointer.ts): its own connection to the
 * file, copying committed WAL frames into the database file so that no commit on the event loop
 * pays for that copy and its fsync.
 */
import { Database, type Statement } from 'bun:sqlite'
import type { CheckpointReply, CheckpointRequest } from './checkpointer'

declare const self: Worker

let state:
  | {
      conn: Database
      query: Statement
      timer: Timer | undefined
      log: number
      busyMs: number
      idleMs: number
    }
  | undefined

/**
 * One PASSIVE checkpoint: it never waits for a writer or a reader. Answers the WAL's length in
 * frames (-1 when busy or locked: the next tick tries again).
 */
function checkpoint(): number {
  try {
    const r = state?.query.get() as { log: number } | null
    return r?.log ?? -1
  } catch {
    return -1
  }
}

/** Often while commits arrive, rarely when nothing changed since the last look. */
function tick() {
  if (!state) return
  const log = checkpoint()
  const active = log !== state.log
  state.log = log
  state.timer = setTimeout(tick, active ? state.busyMs : state.idleMs)
}

self.onmessage = (m: MessageEvent<CheckpointRequest>) => {
  const msg = m.data
  if (msg.kind === 'start') {
    const conn = new Database(msg.file)
    conn.exec('PRAGMA busy_timeout = 5000')
    const query = conn.prepare('PRAGMA wal_checkpoint(PASSIVE)')
    state = { conn, query, timer: undefined, log: 0, busyMs: msg.busyMs, idleMs: msg.idleMs }
    tick()
    return
  }
  // Close: one last checkpoint of everything committed, then the connection.
  if (state) {
    clearTimeout(state.timer)
    checkpoint()
    // Finalized first: SQLite keeps a connection with a live statement open (and the WAL with it).
    state.query.finalize()
    state.conn.close()
    state = undefined
  }
  self.postMessage({ kind: 'closed' } satisfies CheckpointReply)
}
