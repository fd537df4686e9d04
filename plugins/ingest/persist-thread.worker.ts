/**
 * Entry of the persist thread (see persist-thread.ts): its own connections to the store. The
 * schema was migrated by the main thread before this opens.
 */
import { type Db, isPostgresUrl } from '../../core/db'
import { openPostgres } from '../../core/db/postgres'
import { openSqlite } from '../../core/db/sqlite'
import { type CommitRows, persist } from './persist'
import type { PersistReply, PersistRequest } from './persist-thread'

declare const self: Worker

let db: Db | undefined
/** SQLite: each commit starts after the previous one. PostgreSQL: commits run side by side. */
let ordered = true
let chain: Promise<void> = Promise.resolve()
const running = new Set<Promise<void>>()

const reply = (r: PersistReply) => self.postMessage(r)

async function commit(id: number, rows: string): Promise<void> {
  try {
    if (!db) throw new Error('persist thread: no store open')
    await persist(db, JSON.parse(rows) as CommitRows)
    reply({ id })
  } catch (e) {
    reply({ id, error: String((e as Error)?.message ?? e) })
  }
}

self.onmessage = (m: MessageEvent<PersistRequest>) => {
  const msg = m.data
  if (msg.kind === 'open') {
    const { url, schema } = msg.location
    ordered = !isPostgresUrl(url)
    db = ordered ? openSqlite(url, { blocking: true }) : openPostgres(url, { schema, max: msg.connections })
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
