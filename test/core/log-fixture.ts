import { afterEach, beforeEach } from 'bun:test'
import { coreMigrations } from '../../core/auth/migrations'
import { type Db, migrate } from '../../core/db'
import { deleteInSlices } from '../../core/db/slices'
import {
  EventLog,
  type EventLogOptions,
  type LogConsumer,
  type LogEntry,
  type LogRow,
  type LogSource,
  PG_SEQ_SQL,
} from '../../core/event-log'
import { createLogger } from '../../core/log'
import { type Engine, rawDb } from '../helpers'
import { logRow } from '../log-row'

/** The event log's tests (core/event-log.ts): a log of plain rows, and consumers that count them. */

export const LOG_TABLES = `CREATE TABLE log_test (seq BIGINT NOT NULL, id BIGINT NOT NULL, received_at BIGINT NOT NULL,
  ts BIGINT NOT NULL, user_id TEXT, PRIMARY KEY (seq, id));
  CREATE TABLE log_out (consumer TEXT NOT NULL, id BIGINT NOT NULL, ts BIGINT NOT NULL, PRIMARY KEY (consumer, id))`

export const quiet = createLogger(
  { level: 'error', format: 'json', max_size: 1, max_backups: 1, max_age: 1, sensitive_fields: [] },
  () => undefined,
)

/** A log of plain events in one table; seq is the xid on PostgreSQL, a commit counter on SQLite. */
export function testSource(): LogSource {
  const entry = (r: Record<string, unknown>): LogEntry => ({
    at: { seq: Number(r.seq), pos: Number(r.id) },
    row: logRow({
      id: Number(r.id),
      receivedAt: Number(r.received_at),
      ts: Number(r.ts),
      userId: r.user_id as string,
    }),
  })
  const after = '(seq > ? OR (seq = ? AND id > ?))'
  return {
    async read(at, below, limit, db) {
      const rows = await db.all(
        `SELECT * FROM log_test WHERE ${after} AND seq < ? ORDER BY seq, id LIMIT ?`,
        [at.seq, at.seq, at.pos, below, limit],
      )
      return rows.map(entry)
    },
    async pending(at, db, o = {}) {
      const r = await db.get<{ t: number | null }>(
        `SELECT MIN(received_at) AS t FROM log_test WHERE ${after}`,
        [at.seq, at.seq, at.pos],
      )
      const upTo = o.until ? ' AND (seq < ? OR (seq = ? AND id <= ?))' : ''
      const u = o.until?.at
      const n = await db.get<{ n: number }>(
        `SELECT COUNT(*) AS n FROM log_test WHERE ${after}${upTo}`,
        u ? [at.seq, at.seq, at.pos, u.seq, u.seq, u.pos] : [at.seq, at.seq, at.pos],
      )
      return {
        rows: o.count === false ? 0 : Number(n?.n ?? 0) + (o.until?.rows ?? 0),
        oldestReceivedAt: r?.t == null ? null : Number(r.t),
      }
    },
    async head(db) {
      const r = await db.get<{ seq: number; id: number }>(
        'SELECT seq, id FROM log_test ORDER BY seq DESC, id DESC LIMIT 1',
      )
      return r ? { seq: Number(r.seq), pos: Number(r.id) } : { seq: 0, pos: 0 }
    },
  }
}

/** Appends rows `ids` in one transaction (ts = id), as a provider would. */
export async function append(db: Db, ids: number[]): Promise<void> {
  await db.tx(async (tx) => {
    const seq =
      db.dialect === 'postgres'
        ? PG_SEQ_SQL
        : String(
            Number((await tx.get<{ s: number }>('SELECT COALESCE(MAX(seq), 0) + 1 AS s FROM log_test'))?.s),
          )
    for (const id of ids)
      await tx.run(`INSERT INTO log_test (seq, id, received_at, ts, user_id) VALUES (${seq}, ?, ?, ?, ?)`, [
        id,
        Date.now(),
        id,
        `u${id}`,
      ])
  })
}

/** A consumer writing each row's id into log_out (primary key: a second delivery fails); `seen` lists its committed batches. */
export function counter(
  name: string,
  seen: Array<{ ids: number[]; by: string }>,
  by = 'a',
  batch = 10,
): LogConsumer {
  return {
    name,
    batch,
    rebuildsFrom: true,
    async handle(rows: LogRow[], tx: Db) {
      for (const r of rows)
        await tx.run('INSERT INTO log_out (consumer, id, ts) VALUES (?, ?, ?)', [name, r.id, r.ts])
      // Recorded once the batch committed: an attempt rolled back (a rebuild asked meanwhile, a
      // lost lease) is not a delivery.
      const ids = rows.map((r) => r.id)
      return () => seen.push({ ids, by })
    },
    // In slices of two rows (a rebuild's reset: core/event-log-rebuild.ts).
    async reset(from, db, pause) {
      const scope = { where: 'consumer = ? AND ts >= ?', params: [name, from ?? 0], pinned: ['consumer'] }
      await deleteInSlices(db, 'log_out', scope, pause, 2)
    },
  }
}

export async function outIds(db: Db, name = 'c'): Promise<number[]> {
  const rows = await db.all<{ id: number }>('SELECT id FROM log_out WHERE consumer = ? ORDER BY id', [name])
  return rows.map((r) => Number(r.id))
}

/**
 * A fresh store for each test of `engine`, with core's migrations and the log's tables (`s.db`),
 * `s.make(instanceId)`: an event log over `testSource`, and `s.track(log)`: each stopped after the test.
 */
export function logSuite(engine: Engine) {
  let done: () => Promise<void> = async () => undefined
  const logs: EventLog[] = []
  const s = {
    db: undefined as unknown as Db,
    make(instanceId: string, o: Partial<EventLogOptions> = {}): EventLog {
      const l = s.track(new EventLog({ db: s.db, instanceId, log: quiet, pollMs: 20, ...o }))
      l.provide(testSource())
      return l
    },
    /** Stops `l` after the test. */
    track(l: EventLog): EventLog {
      logs.push(l)
      return l
    },
  }
  beforeEach(async () => {
    ;({ db: s.db, done } = await rawDb(engine))
    await migrate(s.db, [{ plugin: 'core', migrations: coreMigrations }])
    await s.db.exec(LOG_TABLES)
  })
  afterEach(async () => {
    for (const l of logs.splice(0)) await l.stop()
    await done()
  })
  return s
}
