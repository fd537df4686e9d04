import type { Db, Param, Row } from './types'

/**
 * Rows one statement deletes at most: on SQLite a statement holds the event loop (and the store's
 * one writer) until it ends, and one DELETE of a game's few million rollup rows held it ~415 ms,
 * every request of every game waiting. A slice of this many keys takes a few ms.
 */
export const SLICE = 1000

/** Which rows go: `where` with its `params`, and the columns it pins by equality (`game_id`, `env`). */
export interface Scope {
  where: string
  params: Param[]
  pinned: readonly string[]
  /**
   * Optional: of the rows `where` names, only those matching this go, and each slice walks
   * `slice` keys of `where` whether they match or not: a condition the key does not order (a
   * user's first day, within a game's users) then never has one statement read the whole scope
   * looking for matches (a rebuild from a date over 200,000 users: one such read held the loop
   * ~160 ms).
   */
  filter?: { where: string; params: Param[] }
}

const keys = new WeakMap<Db, Map<string, Promise<string[]>>>()

/** A table's primary key columns, in key order (read once per store and table). */
export function primaryKey(db: Db, table: string): Promise<string[]> {
  const known = keys.get(db) ?? new Map<string, Promise<string[]>>()
  keys.set(db, known)
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
 * `(cols) > (vals)` (`op` '>') or `(cols) <= (vals)` (`op` '<='), with its parameters. SQLite and
 * PostgreSQL read a row comparison as a range of the index (spelled out, SQLite read every row of
 * the game from the first column's bound on: each slice walked what was left, ~100 ms a slice at
 * 100,000 rows). MariaDB reads none for one: there it is spelled out, `a >= ? AND (a > ? OR (b >
 * ?))`, a range of the first column (core/db/mysql-sql.ts `rowComparisons` does the same for two).
 */
function compare(db: Db, cols: readonly string[], op: '>' | '<=', vals: readonly Param[]): [string, Param[]] {
  if (cols.length === 1) return [`${cols[0]} ${op} ?`, [vals[0]]]
  if (db.dialect !== 'mysql')
    return [`(${cols.join(', ')}) ${op} (${cols.map(() => '?').join(', ')})`, [...vals]]
  const spelled = (i: number): string => {
    const c = cols[i]
    if (i === cols.length - 1) return `${c} ${op} ?`
    return op === '>'
      ? `${c} >= ? AND (${c} > ? OR (${spelled(i + 1)}))`
      : `${c} <= ? AND (${c} < ? OR (${spelled(i + 1)}))`
  }
  return [spelled(0), vals.flatMap((v, i) => (i < vals.length - 1 ? [v, v] : [v]))]
}

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
  const only = scope.filter ? ` AND (${scope.filter.where})` : ''
  const gone = {
    where: `(${scope.where})${only}`,
    params: [...scope.params, ...(scope.filter?.params ?? [])],
  }
  if (!walk.length) return db.run(`DELETE FROM ${table} WHERE ${gone.where}`, gone.params)
  const cols = walk.join(', ')
  const sel = within ? { where: `(${scope.where})`, params: scope.params } : { where: '1 = 1', params: [] }
  let deleted = 0
  let last: Param[] | undefined
  for (;;) {
    const [gt, afterParams] = last ? compare(db, walk, '>', last) : ['', []]
    const after = last ? ` AND (${gt})` : ''
    const next = await db.get<Row>(
      `SELECT ${cols} FROM ${table} WHERE ${sel.where}${after} ORDER BY ${cols} LIMIT 1 OFFSET ${slice - 1}`,
      [...sel.params, ...afterParams],
    )
    const upTo = next ? walk.map((c) => next[c] as Param) : undefined
    const [le, upToParams] = upTo ? compare(db, walk, '<=', upTo) : ['', []]
    deleted += await db.run(`DELETE FROM ${table} WHERE ${gone.where}${after}${upTo ? ` AND (${le})` : ''}`, [
      ...gone.params,
      ...afterParams,
      ...upToParams,
    ])
    if (!upTo) return deleted
    last = upTo
    await pause()
  }
}
