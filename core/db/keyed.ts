import type { Db, Param, Row } from './types'

/** Keys a statement asks for at most. */
const CHUNK = 512

/**
 * The rows of `table` in a scope whose key column holds one of `keys`: `WHERE game_id = ? AND
 * env = ? AND order_id IN (...)`. The key is unique in the scope (a primary key's last column),
 * or only whether a key is held matters: PostgreSQL returns one row a key held, the others every
 * row of it. Keys repeated or absent are fine.
 *
 * On PostgreSQL each key is its own lookup of the index (a lateral subquery of one row per key
 * of a JSON array), whatever the table's statistics say. As an `IN` list, a table never analyzed
 * (autovacuum's workers busy with the event log, say) was planned from default estimates: the
 * scope's equalities looked selective enough that the plan walked the whole scope and filtered
 * the keys, so a refund's lookup of its orders read the whole order table, 18 ms after two
 * minutes of the ingest benchmark and 217 ms after eight (a core of PostgreSQL's). There the
 * statement text is also one for any number of keys. SQLite and MySQL probe the index for an
 * `IN` list whatever their statistics; their lists are padded to a power of two (with the first
 * key), a few statement texts for any count.
 */
export async function rowsByKeys<T extends Row>(
  db: Db,
  o: {
    table: string
    /** The columns to return (the key column among them, to tell which key a row is of). */
    cols: readonly string[]
    /** The scope's columns and values, each compared with `=`. */
    scope: ReadonlyArray<readonly [string, Param]>
    key: string
    keys: readonly string[]
  },
): Promise<T[]> {
  const keys = [...new Set(o.keys)]
  if (!keys.length) return []
  const where = o.scope.map(([c]) => `${c} = ? AND `).join('')
  const scope = o.scope.map(([, v]) => v)
  const out: T[] = []
  for (let i = 0; i < keys.length; i += CHUNK) {
    const part = keys.slice(i, i + CHUNK)
    if (db.dialect === 'postgres') {
      const rows = await db.all<T>(
        `SELECT t.* FROM json_array_elements_text(?::text::json) AS k(v) CROSS JOIN LATERAL
           (SELECT ${o.cols.join(', ')} FROM ${o.table} WHERE ${where}${o.key} = k.v LIMIT 1) t`,
        [JSON.stringify(part), ...scope],
      )
      for (const r of rows) out.push(r)
      continue
    }
    let size = 1
    while (size < part.length) size *= 2
    while (part.length < size) part.push(part[0])
    const rows = await db.all<T>(
      `SELECT ${o.cols.join(', ')} FROM ${o.table} WHERE ${where}${o.key} IN (${'?, '.repeat(size - 1)}?)`,
      [...scope, ...part],
    )
    for (const r of rows) out.push(r)
  }
  return out
}
