/**
 * Entry of the persist thread (see persist-thread.ts): its own SQLite connection, one commit at
 * a time. The schema was migrated by the main thread before this opens.
 */
import type { Db } from '../../core/db'
import { openSqlite } from '../../core/db/sqlite'
import { type CommitRows, persist } from './persist'
import type { PersistReply, PersistRequest } from './persist-thread'

declare const self: Worker

let db: Db | undefined
let chain: Promise<void> = Promise.resolve()

const reply = (r: PersistReply) => self.postMessage(r)

self.onmessage = (m: MessageEvent<PersistRequest>) => {
  const msg = m.data
  if (msg.kind === 'open') {
    db = openSqlite(msg.file, { blocking: true })
    return
  }
  // Messages arrive in order; the chain keeps the commits in that order.
  chain = chain.then(async () => {
    if (msg.kind === 'close') {
      await db?.close()
      db = undefined
      return reply({ id: msg.id })
    }
    try {
      if (!db) throw new Error('persist thread: no store open')
      await persist(db, JSON.parse(msg.rows) as CommitRows)
      reply({ id: msg.id })
    } catch (e) {
      reply({ id: msg.id, error: String((e as Error)?.message ?? e) })
    }
  })
}
