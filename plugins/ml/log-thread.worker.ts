/** Entry of the prediction log thread (see log-thread.ts): its own connection to the store. */
import { type Db, isMysqlUrl, isPostgresUrl } from '../../core/db'
import { openMysql } from '../../core/db/mysql'
import { openPostgres } from '../../core/db/postgres'
import { openSqlite } from '../../core/db/sqlite'
import { unpackBatch, writeRows } from './log'
import type { LogReply, LogRequest } from './log-thread'

declare const self: Worker

let db: Db | undefined
// Batches are stored in the order sent, one at a time.
let chain: Promise<void> = Promise.resolve()

self.onmessage = (m: MessageEvent<LogRequest>) => {
  const msg = m.data
  if (msg.kind === 'open') {
    const { url, schema } = msg.location
    db = isPostgresUrl(url)
      ? openPostgres(url, { schema, max: 2 })
      : isMysqlUrl(url)
        ? openMysql(url, { max: 2 })
        : openSqlite(url, { blocking: true })
    return
  }
  chain = chain.then(async () => {
    try {
      if (!db) throw new Error('prediction log thread: no store open')
      if (msg.kind === 'write') await writeRows(db, unpackBatch(msg.batch))
      else await db.close()
      self.postMessage({ id: msg.id } satisfies LogReply)
    } catch (e) {
      self.postMessage({ id: msg.id, error: String((e as Error)?.message ?? e) } satisfies LogReply)
    }
  })
}
