import type { RawDb } from './mysql'
import { conflictTarget, splitInsertReturning } from './mysql-sql'
import type { Param } from './types'

/**
 * `INSERT ... RETURNING` on a server without it (MySQL 8), in the caller's transaction: each row
 * is inserted by a statement of its own, all of them sent in one round trip, whose answers say
 * which rows the statement would have returned (inserted, or updated by an upsert whose WHERE
 * held); those rows are then read back by key, in the order they were given, while the
 * transaction holds their locks.
 *
 * The key is the upsert's conflict target, else the table's primary key. A key column is given
 * as a parameter or a literal, or is the AUTO_INCREMENT the server assigned.
 */
export async function insertReturning<T>(
  tx: RawDb,
  written: string,
  sql: string,
  params: readonly Param[],
): Promise<T[]> {
  const ins = splitInsertReturning(sql)
  if (!ins) throw new Error(`MySQL without INSERT ... RETURNING: cannot run ${written}`)
  const key = conflictTarget(written) ?? (await primaryKey(tx, ins.table))
  const tailArgs = params.slice(params.length - ins.tailParams)
  const [select] = ins.rows
  if (
    ins.rows.length === 1 &&
    select &&
    /^\s*SELECT\b/i.test(select.text) &&
    !key.every((c) => given(ins, c))
  ) {
    // INSERT ... SELECT whose rows' keys come from the rows read (analytics' merge of an older
    // version's user-day log): the rows are read first, in this transaction, and inserted as
    // VALUES, one statement each as below.
    const [found, fields] = (await tx.raw(select.text, params.slice(0, select.params))) as unknown as [
      Array<Record<string, Param>>,
      Array<{ name: string }>,
    ]
    if (!found.length) return []
    const tuple = `(${ins.columns.map(() => '?').join(', ')})`
    return insertReturning<T>(
      tx,
      written,
      `${ins.head} VALUES ${found.map(() => tuple).join(', ')} ${ins.tail} RETURNING ${ins.returning}`,
      // In the select list's order (an object's keys put integer-like names such as `0` first).
      [...found.flatMap((r) => fields.map((f) => r[f.name] ?? null)), ...tailArgs],
    )
  }
  const statements: string[] = []
  const args: Param[] = []
  let at = 0
  for (const row of ins.rows) {
    const one = `${ins.head} ${row.text} ${ins.tail}`
    // A guarded upsert's WHERE leaves its value in @liveops_upsert (mysql-sql.ts): NULL if the row was new.
    statements.push(
      ins.kind === 'guarded' ? `SET @liveops_upsert = NULL; ${one}; SELECT @liveops_upsert AS u` : one,
    )
    args.push(...params.slice(at, at + row.params), ...tailArgs)
    at += row.params
  }
  const [answer] = (await tx.raw(statements.join(';\n'), args)) as [unknown]
  const flat = (statements.length > 1 || ins.kind === 'guarded' ? answer : [answer]) as unknown[]
  const per = ins.kind === 'guarded' ? 3 : 1
  const keys: Param[][] = []
  at = 0
  ins.rows.forEach((row, i) => {
    const head = flat[i * per + (per === 3 ? 1 : 0)] as { affectedRows: number; insertId: number }
    const returned =
      ins.kind === 'ignore'
        ? head.affectedRows > 0
        : ins.kind === 'guarded'
          ? ((g) => g === null || Number(g) === 1)((flat[i * per + 2] as Array<{ u: unknown }>)[0]?.u ?? null)
          : true
    if (returned)
      keys.push(key.map((col) => keyValue(ins, row, col, params.slice(at, at + row.params), head)))
    at += row.params
  })
  if (!keys.length) return []
  const alias = key.map((c, i) => `"${c}" AS liveops_k${i}`).join(', ')
  const tuple = key.length > 1 ? `(${key.map((c) => `"${c}"`).join(', ')})` : `"${key[0]}"`
  const list = keys.map((k) => (k.length > 1 ? `(${k.map(() => '?').join(', ')})` : '?')).join(', ')
  const rows = await tx.all<Record<string, unknown>>(
    `SELECT ${ins.returning}, ${alias} FROM ${ins.table} WHERE ${tuple} IN (${list})`,
    keys.flat(),
  )
  const byKey = new Map<string, Record<string, unknown>>()
  for (const r of rows) {
    const k = key.map((_, i) => String(r[`liveops_k${i}`]))
    for (let i = 0; i < key.length; i++) delete r[`liveops_k${i}`]
    byKey.set(JSON.stringify(k), r)
  }
  return keys.flatMap((k) => {
    const r = byKey.get(JSON.stringify(k.map(String)))
    return r ? [r as T] : []
  })
}

/** Whether the key column `col` is given (a parameter or a literal) or generated, in every row. */
function given(ins: NonNullable<ReturnType<typeof splitInsertReturning>>, col: string): boolean {
  const i = ins.columns.indexOf(col)
  if (i < 0) return true
  return ins.rows.every((row) =>
    /^(\?|CAST\(\s*\?\s+AS\s+\w+\s*\)|'([^']|'')*'|-?\d+(\.\d+)?)$/i.test(row.values[i] ?? ''),
  )
}

function keyValue(
  ins: NonNullable<ReturnType<typeof splitInsertReturning>>,
  row: { values: string[] },
  col: string,
  rowParams: readonly Param[],
  head: { insertId: number },
): Param {
  const i = ins.columns.indexOf(col)
  if (i < 0) return head.insertId
  const value = row.values[i] ?? ''
  if (value === '?' || /^CAST\(\s*\?\s+AS\s+\w+\s*\)$/i.test(value))
    return rowParams[row.values.slice(0, i).reduce((n, v) => n + (v.split('?').length - 1), 0)] ?? null
  if (/^'([^']|'')*'$/.test(value)) return value.slice(1, -1).replaceAll("''", "'")
  if (/^-?\d+(\.\d+)?$/.test(value)) return Number(value)
  throw new Error(
    `MySQL without INSERT ... RETURNING: the key ${ins.table}.${col} is neither given nor generated`,
  )
}

/** A table's primary key columns. */
async function primaryKey(tx: RawDb, table: string): Promise<string[]> {
  const rows = await tx.all<{ c: string }>(
    `SELECT column_name AS c FROM information_schema.key_column_usage
      WHERE table_schema = DATABASE() AND table_name = ? AND constraint_name = 'PRIMARY' ORDER BY ordinal_position`,
    [table],
  )
  return rows.map((r) => r.c)
}
