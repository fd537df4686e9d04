import type { Db } from '../../../core/db'
import type { LogPosition } from '../../../core/event-log-types'
import { LOG_COLS } from './event-cols'

export type LogCol = (typeof LOG_COLS)[number]

/**
 * PostgreSQL: a batch of the log, the rows after a position (`?, ?`), below the horizon (`?`), in
 * log order, at most `?`. The parameters: `logBatch(after, below, limit)`. Elsewhere `readSplit`.
 */
const LOG_BATCH = 'FROM ingest_events WHERE (seq, id) > (?, ?) AND seq < ? ORDER BY seq, id LIMIT ?'
const logBatch = (after: LogPosition, below: number, limit: number) => [after.seq, after.pos, below, limit]
export type LogRow = { [K in LogCol]: K extends 'props' | 'game_id' | 'env' | 'event' ? string : unknown }

/**
 * SQLite and MySQL: the batch of `LOG_BATCH` as two index ranges, the rest of the cursor's commit
 * then the later commits. Both read `(seq, id) > (?, ?)` as the range `seq >= ?` and step over
 * the rows of the cursor's commit before its position: nothing in a commit of the log, but every
 * row stored before the log existed (all of seq 0) on an upgraded store, at every read of a
 * consumer past them (81 ms a read at 2 M such rows on SQLite, 0.06 ms split), and the whole of
 * them again at each batch of a rebuild. PostgreSQL reads the row comparison as the range itself.
 */
export async function readSplit<T>(
  db: Db,
  cols: string,
  after: LogPosition,
  below: number,
  limit: number,
): Promise<T[]> {
  const own =
    after.seq < below
      ? await db.all<T>(`SELECT ${cols} FROM ingest_events WHERE seq = ? AND id > ? ORDER BY id LIMIT ?`, [
          after.seq,
          after.pos,
          limit,
        ])
      : []
  if (own.length >= limit) return own
  const later = await db.all<T>(
    `SELECT ${cols} FROM ingest_events WHERE seq > ? AND seq < ? ORDER BY seq, id LIMIT ?`,
    [after.seq, below, limit - own.length],
  )
  return own.length ? own.concat(later) : later
}

/**
 * PostgreSQL: rows of the log as one JSON text (an array of rows, each an array of the columns):
 * one value for the client to decode and one native `JSON.parse`, instead of 16 text values per
 * row each decoded and converted by postgres.js. In a 1 M-event rebuild of the four consumers,
 * decoding the rows of their log reads (each reads the whole log) was about half of the server's
 * CPU (Bun's profile: `DataRow` and the `toString` it calls). The values come back typed by JSON:
 * BIGINT columns as numbers (ids are ms x 1024, exact below 2^53), TEXT as strings.
 */
const jsonRows = (from: string) =>
  `SELECT coalesce(json_agg(json_build_array(${LOG_COLS.join(', ')}) ORDER BY seq, id), '[]')::text AS j
  FROM (SELECT ${LOG_COLS.join(', ')} ${from}) t`
const SQL = jsonRows(LOG_BATCH)

async function readJson(db: Db, sql: string, params: unknown[]): Promise<LogRow[]> {
  const r = await db.get<{ j: string }>(sql, params as never)
  const rows = JSON.parse(r?.j ?? '[]') as unknown[][]
  return rows.map(
    (a) =>
      ({
        id: a[0],
        seq: a[1],
        received_at: a[2],
        game_id: a[3],
        env: a[4],
        event: a[5],
        ts: a[6],
        user_id: a[7],
        session_id: a[8],
        amount_cents: a[9],
        currency: a[10],
        duration_ms: a[11],
        network: a[12],
        level: a[13],
        payment_status: a[14],
        props: a[15],
      }) as LogRow,
  )
}

export const readLogPg = (db: Db, after: LogPosition, below: number, limit: number): Promise<LogRow[]> =>
  readJson(db, SQL, logBatch(after, below, limit))

/** Ids per statement of `readIds` elsewhere than on PostgreSQL. */
const IDS_PER_READ = 1024
/** PostgreSQL: the ids as one text, so every read is the one prepared statement. */
const BY_IDS_PG = jsonRows("FROM ingest_events WHERE id = ANY (string_to_array(?, ',')::bigint[])")

/**
 * The rows of the given ids (primary-key probes), in no particular order: what a read of
 * positions (`readPositions`) met that this process did not keep (`store/recent.ts`).
 * Elsewhere the ids go in lists of 1, 2, 4, ... 1,024 (the last id repeated to fill one): a
 * dozen statement shapes for the engine to prepare, not one per count.
 */
export async function readIds(db: Db, ids: number[]): Promise<LogRow[]> {
  if (db.dialect === 'postgres') return readJson(db, BY_IDS_PG, [ids.join(',')])
  const out: LogRow[] = []
  for (let i = 0; i < ids.length; i += IDS_PER_READ) {
    const part = ids.slice(i, i + IDS_PER_READ)
    let size = 1
    while (size < part.length) size *= 2
    while (part.length < size) part.push(part[part.length - 1])
    const rows = await db.all<LogRow>(
      `SELECT ${LOG_COLS.join(', ')} FROM ingest_events WHERE id IN (${part.map(() => '?').join(', ')})`,
      part,
    )
    for (const r of rows) out.push(r)
  }
  return out
}

/**
 * The positions alone of a batch of the log (`store/recent.ts`): `seq, id, seq, id, ...` in log
 * order. PostgreSQL sends them as one text (one value to decode); MySQL as rows.
 */
const POSITIONS_PG = `SELECT coalesce(string_agg(seq::text || ',' || id::text, ',' ORDER BY seq, id), '') AS p
  FROM (SELECT seq, id ${LOG_BATCH}) t`

export async function readPositions(
  db: Db,
  after: LogPosition,
  below: number,
  limit: number,
): Promise<number[]> {
  if (db.dialect === 'postgres') {
    const p = (await db.get<{ p: string }>(POSITIONS_PG, logBatch(after, below, limit)))?.p ?? ''
    return p ? p.split(',').map(Number) : []
  }
  const rows = await readSplit<{ seq: number | string; id: number | string }>(
    db,
    'seq, id',
    after,
    below,
    limit,
  )
  const out: number[] = new Array(rows.length * 2)
  for (let i = 0; i < rows.length; i++) {
    out[2 * i] = Number(rows[i].seq)
    out[2 * i + 1] = Number(rows[i].id)
  }
  return out
}
