import type { Db, Param } from '../../../core/db'

/** A deleted environment (`env`), or every environment of a deleted game (no `env`). */
export interface Stream {
  gameId: string
  env?: string
}

/** Rows a slice of the walk spans: a range of the primary key, so no slice reads the whole table. */
const SLICE = 20_000

/**
 * Everything ingestion stored of a deleted environment or game: raw events, invocations,
 * payments and the event ids it deduplicates by. The raw tables have no index by game, so they
 * are walked by id in slices of `SLICE` rows, each deleting that slice's rows of the stream: the
 * SQLite writer is held for one slice at a time, never a scan of the whole table. Answers how
 * many rows went. Without it an environment deleted and created again under its name showed the
 * old events, and its clients' event ids were still taken (their events dropped as repeats).
 */
export async function forgetRaw(db: Db, s: Stream): Promise<number> {
  const [where, params] = streamWhere(s)
  let deleted = 0
  for (const table of ['ingest_events', 'ingest_invocations']) {
    let from = -1
    for (;;) {
      const next = await db.get<{ id: number }>(
        `SELECT id FROM ${table} WHERE id > ? ORDER BY id LIMIT 1 OFFSET ${SLICE - 1}`,
        [from],
      )
      const to = next ? Number(next.id) : Number.MAX_SAFE_INTEGER
      deleted += await db.run(`DELETE FROM ${table} WHERE id > ? AND id <= ? AND ${where}`, [
        from,
        to,
        ...params,
      ])
      if (!next) break
      from = to
    }
  }
  deleted += await db.run(`DELETE FROM ingest_payments WHERE ${where}`, params)
  const streams = await db.all<{ id: number }>(`SELECT id FROM ingest_streams WHERE ${where}`, params)
  for (const { id } of streams) {
    for (;;) {
      const n = await db.run(
        `DELETE FROM ingest_event_ids WHERE (stream, event_id) IN
         (SELECT stream, event_id FROM ingest_event_ids WHERE stream = ? LIMIT 5000)`,
        [id],
      )
      deleted += n
      if (n < 5000) break
    }
    await db.run('DELETE FROM ingest_streams WHERE id = ?', [id])
  }
  return deleted
}

/** `game_id = ?` and, for an environment, `AND env = ?`, with their parameters. */
export function streamWhere(s: Stream): [string, Param[]] {
  return s.env === undefined ? ['game_id = ?', [s.gameId]] : ['game_id = ? AND env = ?', [s.gameId, s.env]]
}

/** Deletes the stream's rows of each table (a consumer's results, every one keyed by game and environment). */
export async function forgetTables(db: Db, tables: readonly string[], s: Stream): Promise<number> {
  const [where, params] = streamWhere(s)
  let deleted = 0
  for (const t of tables) deleted += await db.run(`DELETE FROM ${t} WHERE ${where}`, params)
  return deleted
}
