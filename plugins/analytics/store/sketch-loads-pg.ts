import type { Db, Param } from '../../../core/db'
import { jsonRows } from '../../../core/db/bulk'

/**
 * PostgreSQL: the stored HyperLogLog sketches of many keys in one statement, for the consumers
 * that keep sketches (analytics' online minutes and active days, behavior's per-name days).
 * After a rebuild clears their caches, loading them one query per key put up to 2,875 queries
 * in the queue of a 5-connection pool per batch; a batch now loads each table's keys at once.
 * SQLite reads a key in-process for a few microseconds and keeps its one query per key.
 */
export interface SketchTable {
  name: string
  /** The key's columns, in the order each key gives its values. */
  key: readonly string[]
  /** Of those, the BIGINT ones (the others are TEXT). */
  bigint: readonly string[]
}

export interface StoredSketch {
  sketch: string
  version: number
}

const statements = new Map<string, string>()

/**
 * The statement: the keys are one JSON array parameter (row `i`'s column `k` at `i * width + k`,
 * as `core/db/bulk.ts` sends rows), joined to the table on its primary key; each stored row
 * comes back with its key's index.
 */
function statement(t: SketchTable): string {
  let sql = statements.get(t.name)
  if (sql === undefined) {
    const w = t.key.length
    const cols = t.key
      .map((c, k) => {
        const v = `p.j ->> (i * ${w} + ${k})`
        return `${t.bigint.includes(c) ? `(${v})::bigint` : v} AS ${c}`
      })
      .join(', ')
    sql = `SELECT k.i, s.sketch, s.version FROM (
        SELECT i, ${cols} FROM (SELECT ?::text::jsonb AS j OFFSET 0) p,
          generate_series(0, jsonb_array_length(p.j) / ${w} - 1) AS i) k
      JOIN ${t.name} s ON ${t.key.map((c) => `s.${c} = k.${c}`).join(' AND ')}`
    statements.set(t.name, sql)
  }
  return sql
}

/** Each key's stored sketch, in the keys' order (undefined where none is stored yet). */
export async function loadSketchesPg(
  db: Db,
  t: SketchTable,
  keys: readonly Param[][],
): Promise<Array<StoredSketch | undefined>> {
  const out: Array<StoredSketch | undefined> = new Array(keys.length).fill(undefined)
  if (!keys.length) return out
  const rows = await db.all<{ i: number | string; sketch: string; version: number | string }>(statement(t), [
    jsonRows(keys.flat()),
  ])
  for (const r of rows) out[Number(r.i)] = { sketch: r.sketch, version: Number(r.version) }
  return out
}
