/**
 * Entry of the persist thread (see persist-thread.ts): its own connections to the store. The
 * schema was migrated by the main thread before this opens.
 */
import { type Db, isPostgresUrl } from '../../../core/db'
import { openPostgres } from '../../../core/db/postgres'
import { openSqlite } from '../../../core/db/sqlite'
import { persist } from './persist'
import type { PersistReply, PersistRequest } from './persist-thread'
import { type WireCommit, decodeCommit } from './wire'

declare const self: Worker

let db: Db | undefined
/** SQLite: each commit starts after the previous one. PostgreSQL: commits run side by side. */
let ordered = true
let chain: Promise<void> = Promise.resolve()
const running = new Set<Promise<void>>()
const reply = (r: PersistReply) => self.postMessage(r)

async function commit(id: number, wire: WireCommit): Promise<void> {
  try {
    if (!db) throw new Error('persist thread: no store open')
    const rows = decodeCommit(wire)
    // SQLite: the seq the commit's events took, for the rows handed to the consumers.
    reply({ id, value: await persist(db, rows) })
  } catch (e) {
    reply({ id, error: String((e as Error)?.message ?? e) })
  }
}

self.onmessage = (m: MessageEvent<PersistRequest>) => {
  const msg = m.data
  if (msg.kind === 'open') {
    const { url, schema, gate } = msg.location
    ordered = !isPostgresUrl(url)
    db = ordered
      ? openSqlite(url, { blocking: true, gate })
      : openPostgres(url, { schema, max: msg.connections })
    // The store's checkpointer thread (opened with it on the event loop) copies frames every
    // 20 ms under load, so commits checkpoint only once the WAL passes 32 MB (not SQLite's 4 MB),
    // and then find little left to copy: that checkpoint is what lets the WAL restart from its
    // beginning, which the checkpointer alone, racing the next commit, cannot. The file is cut
    // back to 64 MB when it restarts.
    if (ordered) void db.exec('PRAGMA wal_autocheckpoint = 8192; PRAGMA journal_size_limit = 67108864')
    // `full` syncs the WAL before every answer (a power loss loses nothing answered); `normal`,
    // the store's own setting, at checkpoints. This thread pays for it, not the event loop.
    if (ordered) void db.exec(`PRAGMA synchronous = ${msg.synchronous === 'full' ? 'FULL' : 'NORMAL'}`)
    return
  }
  if (msg.kind === 'setting') {
    const { id, name } = msg
    const read = async () => {
      try {
        if (!db) throw new Error('persist thread: no store open')
        // In a transaction: on the connection commits use (SQLite's reader has settings of its own).
        const sql = ordered ? `PRAGMA ${name}` : `SHOW ${name}`
        const row = await db.tx((tx) => tx.get<Record<string, unknown>>(sql))
        reply({ id, value: row ? Object.values(row)[0] : undefined })
      } catch (e) {
        reply({ id, error: String((e as Error)?.message ?? e) })
      }
    }
    chain = chain.then(read)
    return
  }
  if (msg.kind === 'commit') {
    if (ordered) chain = chain.then(() => commit(msg.id, msg.rows))
    else {
      const p = commit(msg.id, msg.rows).finally(() => running.delete(p))
      running.add(p)
    }
    return
  }
  // Close: after every commit sent before it.
  chain = chain.then(async () => {
    await Promise.all(running)
    await db?.close()
    db = undefined
    reply({ id: msg.id })
  })
}
