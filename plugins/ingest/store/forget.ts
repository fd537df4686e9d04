import type { Db, Param } from '../../../core/db'
import { deleteInSlices } from '../../../core/db/slices'

/** A deleted environment (`env`), or every environment of a deleted game (no `env`). */
export interface Stream {
  gameId: string
  env?: string
}

/**
 * Everything ingestion stored of a deleted environment or game: raw events, invocations,
 * payments and the event ids it deduplicates by. Every table goes in slices (core/db/slices.ts),
 * `pause` between them: the raw tables have no index by game, so they are walked by id, each
 * slice deleting that range's rows of the stream; the others within the stream's keys. Answers
 * how many rows went. Without it an environment deleted and created again under its name showed
 * the old events, and its clients' event ids were still taken (their events dropped as repeats).
 */
export async function forgetRaw(db: Db, s: Stream, pause: () => Promise<void>): Promise<number> {
  let deleted = 0
  for (const table of ['ingest_events', 'ingest_invocations', 'ingest_payments'])
    deleted += await deleteInSlices(db, table, streamScope(s), pause)
  const [where, params] = streamWhere(s)
  const streams = await db.all<{ id: number }>(`SELECT id FROM ingest_streams WHERE ${where}`, params)
  for (const { id } of streams) {
    deleted += await deleteInSlices(
      db,
      'ingest_event_ids',
      { where: 'stream = ?', params: [id], pinned: ['stream'] },
      pause,
    )
    await db.run('DELETE FROM ingest_streams WHERE id = ?', [id])
  }
  return deleted
}

/** `game_id = ?` and, for an environment, `AND env = ?`, with their parameters. */
export function streamWhere(s: Stream): [string, Param[]] {
  return s.env === undefined ? ['game_id = ?', [s.gameId]] : ['game_id = ? AND env = ?', [s.gameId, s.env]]
}

const streamScope = (s: Stream) => {
  const [where, params] = streamWhere(s)
  return { where, params, pinned: s.env === undefined ? ['game_id'] : ['game_id', 'env'] }
}

/** Deletes the stream's rows of each table (a consumer's results, every one keyed by game and environment), in slices. */
export async function forgetTables(
  db: Db,
  tables: readonly string[],
  s: Stream,
  pause: () => Promise<void>,
): Promise<number> {
  let deleted = 0
  for (const t of tables) deleted += await deleteInSlices(db, t, streamScope(s), pause)
  return deleted
}
