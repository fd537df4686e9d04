import type { Db } from './db'
import { type CursorRow, LostLease, WHOLE, cursorOf, rebuildUntil } from './event-log-cursor'
import { unpark } from './event-log-park'
import type { LogConsumer } from './event-log-types'
import type { Logger } from './log'
import { turn } from './turn'

export interface RebuildOptions {
  instanceId: string
  leaseMs: number
  now: () => number
  log: Logger
  /** Whether the event log stops: the reset ends at its next pause (the next start does it again). */
  stopping: () => boolean
  /** The lease was renewed until then (what the holder remembers of it). */
  renewed: (until: number) => void
}

/**
 * Performs an asked rebuild (`EventLog.rebuild`) on the instance holding the consumer's lease, in
 * two parts:
 *
 * - The consumer's `reset` deletes its results through a store whose every write is a short
 *   transaction of its own that first renews the lease, conditional on this instance holding it
 *   without a break (`leased`), and in slices with a turn of the event loop between them (`pause`).
 *   On SQLite one transaction of the whole reset held the event loop ~1.5 s (a `behavior` rebuild
 *   over 500,000 events), every request waiting. The consumer takes no step meanwhile (this
 *   instance holds its lease and this is its step), so nothing writes its results.
 * - Then the cursor goes back to the start of the log, in a transaction of its own, conditional on
 *   the lease, on the cursor being where it was and on the same rebuild still being asked.
 *
 * The request stays recorded until the cursor moved: a reset cut short (a crash, a kill, a stop, a
 * lost lease) is done again whole by the next holder, whose deletes find what is left; no result is
 * counted twice or lost. A holder that lost its lease midway writes nothing more: the transaction
 * of its next slice finds another owner, or its own lease lapsed, and throws `LostLease`.
 */
export async function performRebuild(db: Db, c: LogConsumer, cur: CursorRow, o: RebuildOptions) {
  const request = Number(cur.rebuild_request)
  const from = request === WHOLE ? undefined : request
  const t0 = performance.now()
  await c.reset(from, leased(db, c.name, o), async () => {
    await turn()
    if (o.stopping()) throw new LostLease(`the event log stops: '${c.name}' is reset again at the next start`)
  })
  await db.tx(async (tx) => {
    const now = await tx.get<CursorRow>('SELECT * FROM liveops_consumers WHERE name = ?', [c.name])
    const at = cursorOf(cur)
    if (!now || Number(now.rebuild_request) !== request || !sameAt(cursorOf(now), at))
      throw new LostLease(`consumer '${c.name}' moved during its reset`)
    await unpark(tx, c.name, from === undefined ? undefined : (game) => c.replayFrom?.(game, from) ?? from)
    const until = rebuildUntil(now)
    const moved = await tx.run(
      `UPDATE liveops_consumers SET seq = 0, pos = 0, updated_at = ?, rebuild_from = ?, until_seq = ?, until_pos = ?,
         rebuild_request = NULL, last_error = NULL
       WHERE name = ? AND lease_owner = ? AND rebuild_request = ? AND seq = ? AND pos = ?`,
      [o.now(), from ?? null, until.seq, until.pos, c.name, o.instanceId, request, at.seq, at.pos],
    )
    if (moved !== 1) throw new LostLease(`consumer '${c.name}' moved under this instance`)
  })
  o.log.info('consumer rebuild started', {
    consumer: c.name,
    from: from ?? null,
    reset_ms: Math.round(performance.now() - t0),
  })
  return 1
}

const sameAt = (a: { seq: number; pos: number }, b: { seq: number; pos: number }) =>
  a.seq === b.seq && a.pos === b.pos

/**
 * `db` whose writes (`run`, `tx`) each go in a transaction that first renews the consumer's lease,
 * on condition that this instance still holds it (owner, not lapsed) and the rebuild is still
 * asked: on PostgreSQL and MySQL the renewal locks the cursor's row, so no other instance takes
 * the lease over while a slice is being written. Reads go through as they are.
 */
function leased(db: Db, name: string, o: RebuildOptions): Db {
  const held = async <T>(fn: (tx: Db) => Promise<T>): Promise<T> => {
    let until = 0
    const r = await db.tx(async (tx) => {
      const now = o.now()
      until = now + o.leaseMs
      const n = await tx.run(
        `UPDATE liveops_consumers SET lease_until = ?
         WHERE name = ? AND lease_owner = ? AND lease_until >= ? AND rebuild_request IS NOT NULL`,
        [until, name, o.instanceId, now],
      )
      if (n !== 1) throw new LostLease(`consumer '${name}' lost its lease during its reset`)
      return fn(tx)
    })
    o.renewed(until)
    return r
  }
  return new Proxy(db, {
    get(target, key) {
      if (key === 'run')
        return (sql: string, params?: Parameters<Db['run']>[1]) => held((tx) => tx.run(sql, params))
      if (key === 'tx') return held
      const v = Reflect.get(target, key)
      return typeof v === 'function' ? v.bind(target) : v
    },
  })
}
