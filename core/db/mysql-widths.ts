import { placeholders, splitInsertReturning } from './mysql-sql'
import type { Param } from './types'

type Exec = (sql: string, params: readonly Param[]) => Promise<unknown>

/**
 * Strict `INSERT IGNORE` (what `ON CONFLICT DO NOTHING` becomes, mysql-sql.ts). Every session is
 * strict (`STRICT_ALL_TABLES`, mysql.ts), but IGNORE turns "Data too long" into a warning and
 * stores the value cut to its column: a 200-character email became a user whose address lost
 * its domain, and a second such address a false conflict (audit-sec2 L2). SQLite and PostgreSQL
 * store the whole value. So before an IGNORE runs, each parameter bound for a VARCHAR column is
 * measured against the column's width, and one too long fails the statement as strict mode
 * fails any other: error 1406, nothing written.
 *
 * Widths come from information_schema, once per table (forgotten after any DDL). Values an
 * `INSERT IGNORE ... SELECT` reads from other columns are not parameters and are not measured:
 * they come from columns no wider.
 */
export function widthGuard(query: Exec): (exec: Exec) => Exec {
  let widths = new Map<string, Promise<Map<string, number>>>()
  const of = (table: string) => {
    let w = widths.get(table)
    if (!w) {
      w = query(
        `SELECT column_name AS c, character_maximum_length AS n FROM information_schema.columns
          WHERE table_schema = DATABASE() AND table_name = ? AND data_type IN ('varchar', 'char')`,
        [table],
      ).then((res) => {
        const rows = ((res as [unknown])[0] ?? []) as Array<{ c: string; n: number }>
        return new Map(rows.map((r) => [r.c, Number(r.n)]))
      })
      w.catch(() => widths.delete(table))
      widths.set(table, w)
    }
    return w
  }
  return (exec) => async (sql, params) => {
    if (/^\s*(CREATE|ALTER|DROP|RENAME)\b/im.test(sql)) widths = new Map()
    else if (/^\s*INSERT\s+IGNORE\b/i.test(sql)) {
      // Several statements in one text (mysql-returning.ts): each with its own parameters.
      let at = 0
      for (const one of sql.split(/;\s*\n/)) {
        const n = placeholders(one)
        if (/^\s*INSERT\s+IGNORE\b/i.test(one)) await measure(one, params.slice(at, at + n), of)
        at += n
      }
    }
    return exec(sql, params)
  }
}

async function measure(
  sql: string,
  params: readonly Param[],
  of: (table: string) => Promise<Map<string, number>>,
): Promise<void> {
  const ins = splitInsertReturning(/\bRETURNING\b/i.test(sql) ? sql : `${sql} RETURNING 1`)
  if (!ins || /^\s*SELECT\b/i.test(ins.rows[0]?.text ?? '')) return
  const widths = await of(ins.table)
  let at = 0
  ins.rows.forEach((row, r) => {
    let k = at
    row.values.forEach((v, i) => {
      const holes = placeholders(v)
      const value = params[k]
      const max = widths.get(ins.columns[i] ?? '')
      // A column given as the parameter itself (or cast): its text is what is stored.
      if (holes === 1 && /^(\?|CAST\(\s*\?\s+AS\s+\w+\s*\))$/i.test(v) && max !== undefined)
        if (typeof value === 'string' && value.length > max && Array.from(value).length > max)
          throw Object.assign(new Error(`Data too long for column '${ins.columns[i]}' at row ${r + 1}`), {
            errno: 1406,
            code: 'ER_DATA_TOO_LONG',
            sqlState: '22001',
          })
      k += holes
    })
    at += row.params
  })
}
