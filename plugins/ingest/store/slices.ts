import type { Db, Param, Row } from '../../../core/db'

/**
 * Rows one statement deletes at most: on SQLite a statement holds the event loop (and the store's
 * one writer) until it ends, and one DELETE of a game's few million rollup rows held it ~415 ms,
 * every request of every game waiting. A slice of this many keys takes a few ms.
 */
export const SLICE = 2000

/** Which rows go: `where` with its `params`, and the columns it pins by equality (`game_id`, `env`). */
export interface Scope {
  where: string
  params: Param[]
  pinned: readonly string[]
}

const keys = new WeakMap<Db, Map<string, Promise<string[]>>>()

/** A table's primary key columns, in key order (read once per store and table). */
export function primaryKey(db: Db, table: string): Promise<string[]> {
  let known = keys.get(db)
  if (!known) keys.set(db, (known = new Map()))
  let key = known.get(table)
  if (!key) {
    key = readKey(db, table)
    known.set(table, key)
    key.catch(() => known.delete(table))
  }
  return key
}

async function readKey(db: Db, table: string): Promise<string[]> {
  const sql =
    db.dialect === 'sqlite'
      ? 'SELECT name AS c FROM pragma_table_info(?) WHERE pk > 0 ORDER BY pk'
      : db.dialect === 'postgres'
        ? `SELECT k.column_name AS c FROM information_schema.table_constraints t
             JOIN information_schema.key_column_usage k ON k.constraint_schema = t.constraint_schema
              AND k.constraint_name = t.constraint_name AND k.table_name = t.table_name
           WHERE t.constraint_type = 'PRIMARY KEY' AND t.table_schema = current_schema()
             AND t.table_name = CAST(? AS TEXT) ORDER BY k.ordinal_position`
        : `SELECT column_name AS c FROM information_schema.key_column_usage
           WHERE table_schema = DATABASE() AND table_name = ? AND constraint_name = 'PRIMARY'
           ORDER BY ordinal_position`
  const cols = (await db.all<{ c: string }>(sql, [table])).map((r) => String(r.c))
  if (!cols.length) throw new Error(`table ${table} has no primary key to delete it in slices by`)
  return cols
}

/**
 * `(cols) > (vals)` (`op` '>') or `(cols) <= (vals)` (`op` '<='), spelled out so each engine reads
 * a range of the key's first column (MariaDB reads none for a row comparison): `a >= ? AND (a > ?
 * OR (b > ?))`. Its parameters: each value twice but the last.
 */
function compare(cols: readonly string[], op: '>' | '<='): string {
  const [c, ...rest] = cols
  if (!rest.length) return `${c} ${op} ?`
  const wide = op === '>' ? '>=' : '<='
  const strict = op === '>' ? '>' : '<'
  return `${c} ${wide} ? AND (${c} ${strict} ? OR (${compare(rest, op)}))`
}
const compareParams = (vals: readonly Param[]): Param[] =>
  vals.flatMap((v, i) => (i < vals.length - 1 ? [v, v] : [v]))

/**
 * Deletes the rows of `table` that `scope` names in slices of at most `slice` keys, each its own
 * statement (its own short transaction) walking the primary key from where the last one ended,
 * with `pause` between them (a turn of the event loop; it throws to stop the walk, which a later
 * call resumes: each slice is committed). A key that begins with the scope's pinned columns is
 * walked within them (a game's rows of a rollup); any other (a raw table's id) is walked whole,
 * each slice deleting its rows of the scope, so no statement scans the table. Answers how many
 * rows went.
 */
export async function deleteInSlices(
  db: Db,
  table: string,
  scope: Scope,
  pause: () => Promise<void>,
  slice = SLICE,
): Promise<number> {
  const key = await primaryKey(db, table)
  const within =
    scope.pinned.length > 0 && scope.pinned.every((c) => key.slice(0, scope.pinned.length).includes(c))
  const walk = within ? key.slice(scope.pinned.length) : key
  if (!walk.length) return db.run(`DELETE FROM ${table} WHERE ${scope.where}`, scope.params)
  const cols = walk.join(', ')
  const sel = within ? { where: `(${scope.where})`, params: scope.params } : { where: '1 = 1', params: [] }
  let deleted = 0
  let last: Param[] | undefined
  for (;;) {
    const after = last ? ` AND (${compare(walk, '>')})` : ''
    const afterParams = last ? compareParams(last) : []
    const next = await db.get<Row>(
      `SELECT ${cols} FROM ${table} WHERE ${sel.where}${after} ORDER BY ${cols} LIMIT 1 OFFSET ${slice - 1}`,
      [...sel.params, ...afterParams],
    )
    const upTo = next ? walk.map((c) => next[c] as Param) : undefined
    deleted += await db.run(
      `DELETE FROM ${table} WHERE (${scope.where})${after}${upTo ? ` AND (${compare(walk, '<=')})` : ''}`,
      [...scope.params, ...afterParams, ...(upTo ? compareParams(upTo) : [])],
    )
    if (!upTo) return deleted
    last = upTo
    await pause()
  }
}
