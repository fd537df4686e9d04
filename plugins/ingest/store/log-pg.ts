import type { Db } from '../../../core/db'
import type { LogPosition } from '../../../core/event-log-types'
import { LOG_COLS } from './event-cols'

export type LogCol = (typeof LOG_COLS)[number]

/**
 * A batch of the log, for every read of it: the rows after a position (`?, ?`), below the horizon
 * (`?`), in log order, at most `?`. The parameters: `logBatch(after, below, limit)`.
 */
export const LOG_BATCH = 'FROM ingest_events WHERE (seq, id) > (?, ?) AND seq < ? ORDER BY seq, id LIMIT ?'
export const logBatch = (after: LogPosition, below: number, limit: number) => [
  after.seq,
  after.pos,
  below,
  limit,
]
export type LogRow = { [K in LogCol]: K extends 'props' | 'game_id' | 'env' | 'event' ? string : unknown }

/**
 * PostgreSQL: a batch of the log as one JSON text (an array of rows, each an array of the
 * columns): one value for the client to decode and one native `JSON.parse`, instead of 16 text
 * values per row each decoded and converted by postgres.js. In a 1 M-event rebuild of the four
 * consumers, decoding the rows of their log reads (each reads the whole log) was about half of
 * the server's CPU (Bun's profile: `DataRow` and the `toString` it calls). The values come back
 * typed by JSON: BIGINT columns as numbers (ids are ms x 1024, exact below 2^53), TEXT as strings.
 */
const SQL = `SELECT coalesce(json_agg(json_build_array(${LOG_COLS.join(', ')}) ORDER BY seq, id), '[]')::text AS j
  FROM (SELECT ${LOG_COLS.join(', ')} ${LOG_BATCH}) t`

export async function readLogPg(db: Db, after: LogPosition, below: number, limit: number): Promise<LogRow[]> {
  const r = await db.get<{ j: string }>(SQL, logBatch(after, below, limit))
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
  const params = logBatch(after, below, limit)
  if (db.dialect === 'postgres') {
    const p = (await db.get<{ p: string }>(POSITIONS_PG, params))?.p ?? ''
    return p ? p.split(',').map(Number) : []
  }
  const rows = await db.all<{ seq: number | string; id: number | string }>(
    `SELECT seq, id ${LOG_BATCH}`,
    params,
  )
  const out: number[] = new Array(rows.length * 2)
  for (let i = 0; i < rows.length; i++) {
    out[2 * i] = Number(rows[i].seq)
    out[2 * i + 1] = Number(rows[i].id)
  }
  return out
}
