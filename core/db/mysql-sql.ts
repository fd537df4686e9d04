/**
 * MySQL's dialect of the one SQL every store speaks (types.ts): the statements are written once,
 * for SQLite and PostgreSQL, and translated here, cached per statement text. Sessions run with
 * `ANSI_QUOTES` and `PIPES_AS_CONCAT` (mysql.ts), so double-quoted identifiers and `||` mean what
 * they mean on the other two engines. What differs and how it is met:
 *
 * - `ON CONFLICT (...) DO NOTHING` -> `INSERT IGNORE`; `ON CONFLICT (...) DO UPDATE SET` ->
 *   `ON DUPLICATE KEY UPDATE`, `excluded.col` -> `VALUES(col)`.
 * - `CAST(x AS TEXT)` -> `CAST(x AS CHAR)`, `AS BIGINT`/`AS INTEGER` -> `AS SIGNED`,
 *   `AS REAL` -> `AS DOUBLE`.
 * - `IN (SELECT ...)` and a compared scalar `(SELECT ...)` inside an UPDATE or DELETE read
 *   through a derived table: MySQL refuses a subquery on the table being changed (MariaDB takes
 *   it) and `LIMIT` in an `IN` subquery.
 * - lower-case identifiers MySQL reserves (`key`, `trigger`, MySQL 8's `last_value`) are quoted.
 * - a row comparison `(a, b) > (?, ?)` is spelled out (`rowComparisons`): MariaDB scans for it.
 * - `UPDATE ... RETURNING` (MariaDB returns rows from INSERT and DELETE only) is run by mysql.ts
 *   as lock, update, read in one transaction (`splitUpdateReturning`).
 */

const RESERVED = /(?<![."\w])(key|trigger|last_value)(?![\w"])/g

const cache = new Map<string, string>()

/** The index of the parenthesis closing the one at `open`. */
function closing(sql: string, open: number): number {
  let depth = 0
  let quoted = false
  for (let i = open; i < sql.length; i++) {
    const ch = sql[i]
    if (ch === "'") quoted = !quoted
    if (quoted) continue
    if (ch === '(') depth++
    else if (ch === ')' && --depth === 0) return i
  }
  return -1
}

function derivedSubqueries(sql: string): string {
  if (!/^\s*(UPDATE|DELETE)\b/i.test(sql)) return sql
  let out = sql
  let from = 0
  for (;;) {
    const m = /(?:\bIN|[<>=])\s*\(\s*SELECT\b/gi
    m.lastIndex = from
    const hit = m.exec(out)
    if (!hit) return out
    const open = out.indexOf('(', hit.index)
    const close = closing(out, open)
    if (close < 0) return out
    const inner = out.slice(open + 1, close)
    const wrapped = `(SELECT * FROM (${inner}) AS liveops_sub)`
    out = out.slice(0, open) + wrapped + out.slice(close + 1)
    from = open + wrapped.length
  }
}

/**
 * `SET a = x, b = y WHERE cond [RETURNING ...]` of an upsert: each assignment keeps the column's
 * value unless `cond` held. MySQL assigns left to right and later expressions see earlier
 * assignments, so `cond` is evaluated once, before the first, into a session variable.
 */
function guardedSets(rest: string, whereAt: number): string {
  const after = rest.slice(whereAt + 'WHERE'.length)
  const ret = /\bRETURNING\b/i.exec(after)
  const cond = (ret ? after.slice(0, ret.index) : after).trim()
  const tail = ret ? ` ${after.slice(ret.index)}` : ''
  const sets = splitTop(rest.slice(0, whereAt)).map((a, i) => {
    const eq = a.indexOf('=')
    const col = a.slice(0, eq).trim()
    const expr = a.slice(eq + 1).trim()
    const test = i === 0 ? `@liveops_upsert := (${cond})` : '@liveops_upsert'
    return ` ${col} = IF(${test}, ${expr}, ${col})`
  })
  return `${sets.join(',')}${tail}`
}

const numberedCache = new Map<string, { sql: string; order: number[] }>()

/**
 * SQLite's numbered parameters (`?1`, `?2`, each usable many times): MySQL knows only `?`, so
 * each occurrence becomes one, and `order` names the parameter it takes.
 */
export function numbered(sql: string): { sql: string; order: number[] } | undefined {
  if (!/\?\d/.test(sql)) return undefined
  let hit = numberedCache.get(sql)
  if (!hit) {
    const order: number[] = []
    const text = sql.replace(/\?(\d+)/g, (_, n: string) => {
      order.push(Number(n) - 1)
      return '?'
    })
    hit = { sql: text, order }
    numberedCache.set(sql, hit)
  }
  return hit
}

/** `(a, b) > (?, ?)` and its kin: a row comparison of two columns with two parameters. */
const ROW_COMPARISON = /\(\s*([\w."]+)\s*,\s*([\w."]+)\s*\)\s*(>=|<=|>|<)\s*\(\s*(\?\d*)\s*,\s*(\?\d*)\s*\)/g

/**
 * MariaDB reads no index range for a row comparison: `(seq, id) > (?, ?)` scanned the whole of
 * `ingest_events` (56 ms at 100,000 rows, against 1.7 ms), on every step of every consumer of
 * the event log and every lag figure. It becomes `seq >= ? AND (seq > ? OR id > ?)`, whose first
 * term is a range on the (seq, id) index; the parameters are numbered so the first is given twice.
 */
function rowComparisons(sql: string): string {
  ROW_COMPARISON.lastIndex = 0
  if (!ROW_COMPARISON.test(sql)) return sql
  let n = 0
  const text = /\?\d/.test(sql) ? sql : sql.replace(/\?/g, () => `?${++n}`)
  return text.replace(ROW_COMPARISON, (_, a: string, b: string, op: string, x: string, y: string) => {
    const strict = op[0]
    return `(${a} ${strict}= ${x} AND (${a} ${strict} ${x} OR ${b} ${op} ${y}))`
  })
}

export function toMysql(sql: string): string {
  let out = cache.get(sql)
  if (out !== undefined) return out
  out = sql
  if (/\bON\s+CONFLICT\b[^;]*?\bDO\s+NOTHING\b/i.test(out)) {
    out = out
      .replace(/\bON\s+CONFLICT\s*(\([^)]*\))?\s*DO\s+NOTHING\b/gi, '')
      .replace(/\bINSERT\s+INTO\b/i, 'INSERT IGNORE INTO')
  }
  const upsert = /\bON\s+CONFLICT\s*\([^)]*\)\s*DO\s+UPDATE\s+SET\b/i.exec(out)
  if (upsert) {
    let rest = out.slice(upsert.index + upsert[0].length)
    const where = /\bWHERE\b/i.exec(rest.split(/\bRETURNING\b/i)[0] ?? '')
    if (where) rest = guardedSets(rest, where.index)
    out = `${out.slice(0, upsert.index)}ON DUPLICATE KEY UPDATE${rest.replace(/\bexcluded\.(\w+)/gi, 'VALUES($1)')}`
  }
  out = out
    .replace(/\bAS\s+TEXT\s*\)/gi, 'AS CHAR)')
    .replace(/\bAS\s+(BIGINT|INTEGER)\s*\)/gi, 'AS SIGNED)')
    .replace(/\bAS\s+(REAL|DOUBLE PRECISION)\s*\)/gi, 'AS DOUBLE)')
    .replace(RESERVED, '"$1"')
  out = rowComparisons(derivedSubqueries(out))
  cache.set(sql, out)
  return out
}

export interface UpdateReturning {
  table: string
  set: string
  where: string
  returning: string
  /** How many of the parameters belong to SET (the rest to WHERE). */
  setParams: number
}

/** `UPDATE t SET ... WHERE ... RETURNING ...` in its parts, or undefined for any other statement. */
export function splitUpdateReturning(sql: string): UpdateReturning | undefined {
  const m =
    /^\s*UPDATE\s+(\w+)\s+SET\s+([\s\S]+?)\s+WHERE\s+([\s\S]+?)\s+RETURNING\s+([\s\S]+?)\s*;?\s*$/i.exec(sql)
  if (!m) return undefined
  const [, table = '', set = '', where = '', returning = ''] = m
  return { table, set, where, returning, setParams: (set.match(/\?/g) ?? []).length }
}

/**
 * The migration DDL for MySQL. A TEXT column that is part of a key (primary, unique, foreign, an
 * index anywhere in `keyed`) becomes `VARCHAR(191)` (InnoDB indexes at most 3072 bytes, four
 * utf8mb4 columns of 191), any other TEXT `LONGTEXT` (unbounded, as TEXT is on the other two);
 * `INTEGER PRIMARY KEY` is `BIGINT`, `BLOB` `LONGBLOB`, `WITHOUT ROWID` goes, and every table is
 * InnoDB in utf8mb4 with a binary collation (case-sensitive, as on the other engines; the driver
 * makes it the server's NO PAD one, core/db/mysql.ts `noPadCollation`).
 */
export function mysqlDdl(sql: string, keyed: ReadonlySet<string>): string {
  const statements = sql
    .split(/;\s*(?:\n|$)/)
    .map((s) => s.replace(/^\s*--[^\n]*$/gm, '').trim())
    .filter((s) => s)
  return statements.map((s) => ddlStatement(s, keyed)).join(';\n')
}

function columnType(table: string, def: string, keyed: ReadonlySet<string>): string {
  const m = /^\s*("?\w+"?)\s+(TEXT|INTEGER|BLOB|REAL)\b/i.exec(def)
  if (!m) return def
  const name = (m[1] ?? '').replaceAll('"', '')
  const type = (m[2] ?? '').toUpperCase()
  let to = type
  if (type === 'TEXT')
    to =
      keyed.has(`${table}.${name}`) || /\b(PRIMARY KEY|UNIQUE|REFERENCES)\b/i.test(def)
        ? 'VARCHAR(191)'
        : 'LONGTEXT'
  else if (type === 'INTEGER') to = /\bPRIMARY KEY\b/i.test(def) ? 'BIGINT AUTO_INCREMENT' : 'INTEGER'
  else if (type === 'BLOB') to = 'LONGBLOB'
  else if (type === 'REAL') to = 'DOUBLE'
  const out = def.replace(m[0], `${m[1]} ${to}`)
  // MySQL gives a LONGTEXT or LONGBLOB no literal default, only an expression's (MariaDB both).
  return /^LONG/.test(to) ? out.replace(/\bDEFAULT\s+('(?:[^']|'')*'|-?\d+(?:\.\d+)?)/i, 'DEFAULT ($1)') : out
}

function splitTop(body: string): string[] {
  const parts: string[] = []
  let depth = 0
  let start = 0
  for (let i = 0; i < body.length; i++) {
    const ch = body[i]
    if (ch === '(') depth++
    else if (ch === ')') depth--
    else if (ch === ',' && depth === 0) {
      parts.push(body.slice(start, i))
      start = i + 1
    }
  }
  parts.push(body.slice(start))
  return parts
}

function ddlStatement(text: string, keyed: ReadonlySet<string>): string {
  let s = text
  // Translated already (a migration's text given to `exec`).
  if (/\bENGINE=InnoDB\b/.test(s)) return s
  const create = /^(?:--[^\n]*\n\s*)*CREATE TABLE (?:IF NOT EXISTS )?(\w+)\s*\(/i.exec(s)
  if (create) {
    const table = create[1] ?? ''
    const open = create[0].length - 1
    const close = closing(s, open)
    const cols = splitTop(s.slice(open + 1, close)).map((d) => columnType(table, d, keyed))
    const tail = s
      .slice(close + 1)
      .replace(/\bWITHOUT ROWID\b/gi, '')
      .trim()
    // MySQL commits each DDL statement: a migration that failed halfway is run again whole.
    const head = s
      .slice(0, open + 1)
      .replace(/CREATE TABLE (IF NOT EXISTS )?/i, 'CREATE TABLE IF NOT EXISTS ')
    return `${head}${cols.join(',')}) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin ${tail}`.replace(
      RESERVED,
      '"$1"',
    )
  }
  const add = /^ALTER TABLE (\w+) ADD COLUMN (.*)$/is.exec(s)
  if (add)
    return `ALTER TABLE ${add[1]} ADD COLUMN ${columnType(add[1] ?? '', add[2] ?? '', keyed)}`.replace(
      RESERVED,
      '"$1"',
    )
  const drop = /^DROP INDEX (IF EXISTS )?(\w+)$/i.exec(s)
  if (drop) {
    // MySQL names the table of an index; liveops' index names begin with their table's.
    const table = keyedTableOf(drop[2] ?? '', keyed)
    return `DROP INDEX ${drop[1] ?? ''}${drop[2]} ON ${table}`
  }
  // A migration's data statements divide integer columns by whole numbers as integers (as SQLite
  // and PostgreSQL do); MySQL's `/` divides exactly.
  if (/^(UPDATE|INSERT|WITH)\b/i.test(s)) s = s.replace(/\s\/\s*(\d+)\b/g, ' DIV $1')
  return s
    .replace(/^CREATE (UNIQUE )?INDEX (?!IF NOT EXISTS)/i, 'CREATE $1INDEX IF NOT EXISTS ')
    .replace(RESERVED, '"$1"')
}

function keyedTableOf(index: string, keyed: ReadonlySet<string>): string {
  let best = ''
  for (const k of keyed) {
    if (!k.startsWith('#')) continue
    const [name, table] = k.slice(1).split('=')
    if (name === index && table) return renamed(table, keyed)
    if (table && index.startsWith(table) && table.length > best.length) best = table
  }
  return renamed(best || index, keyed)
}

/** A table's name after the renames of the migrations (`%old=new`). */
function renamed(table: string, keyed: ReadonlySet<string>): string {
  for (const k of keyed) if (k.startsWith(`%${table}=`)) return renamed(k.slice(table.length + 2), keyed)
  return table
}

/**
 * The TEXT columns that some migration of the set indexes (`table.column`), and each index's table
 * (`#index=table`): gathered over every migration first, so a column an index of a later migration
 * names is a VARCHAR from its table's creation on.
 */
export function keyedColumns(sqls: readonly string[]): Set<string> {
  const out = new Set<string>()
  const re =
    /CREATE\s+(?:UNIQUE\s+)?INDEX\s+(?:IF NOT EXISTS\s+)?(\w+)\s+ON\s+(\w+)\s*\(([^;]*?)\)\s*(?:WHERE[^;]*)?(?:;|$)/gi
  const keys = /(?:PRIMARY KEY|UNIQUE|FOREIGN KEY)\s*\(([^)]*)\)/gi
  for (const sql of sqls) {
    for (const m of sql.matchAll(re)) {
      const [, name = '', table = '', cols = ''] = m
      out.add(`#${name}=${table}`)
      for (const c of cols.split(',')) {
        const id = /\w+/.exec(c.trim())?.[0]
        if (id) out.add(`${table}.${id}`)
      }
    }
    for (const r of sql.matchAll(/ALTER TABLE (\w+) RENAME TO (\w+)/gi)) out.add(`%${r[1]}=${r[2]}`)
    for (const t of sql.matchAll(/CREATE TABLE (?:IF NOT EXISTS )?(\w+)\s*\(/gi)) {
      const open = (t.index ?? 0) + t[0].length - 1
      const body = sql.slice(open, closing(sql, open) + 1)
      for (const k of body.matchAll(keys))
        for (const c of (k[1] ?? '').split(',')) {
          const id = /\w+/.exec(c.trim())?.[0]
          if (id) out.add(`${t[1]}.${id}`)
        }
    }
  }
  return out
}

export interface InsertReturning {
  table: string
  /** `INSERT [IGNORE] INTO t (cols) VALUES`, or without VALUES before a SELECT */
  head: string
  columns: string[]
  /** Each row's `( ... )` (or the one SELECT), how many parameters it takes, its values. */
  rows: Array<{ text: string; params: number; values: string[] }>
  /** What follows the rows (`ON DUPLICATE KEY UPDATE ...`) and how many parameters it takes. */
  tail: string
  tailParams: number
  returning: string
  kind: 'insert' | 'ignore' | 'upsert' | 'guarded'
}

/** Where `re` first matches outside parentheses and quotes, or -1. */
function topLevel(text: string, re: RegExp): number {
  for (const m of text.matchAll(re)) {
    const before = text.slice(0, m.index)
    const depth = (before.match(/\(/g) ?? []).length - (before.match(/\)/g) ?? []).length
    if (depth === 0 && (before.split("'").length - 1) % 2 === 0) return m.index ?? -1
  }
  return -1
}

/** The `?` outside quotes. */
export function placeholders(text: string): number {
  let n = 0
  let quoted = false
  for (const ch of text) {
    if (ch === "'") quoted = !quoted
    else if (ch === '?' && !quoted) n++
  }
  return n
}

/**
 * A translated `INSERT ... VALUES (...), ... [ON DUPLICATE KEY UPDATE ...] RETURNING ...` in its
 * parts (for MySQL 8, which returns no rows from an INSERT: mysql.ts runs it row by row and reads
 * the rows back), or undefined for any other statement.
 */
export function splitInsertReturning(sql: string): InsertReturning | undefined {
  const m = /^\s*INSERT\s+(IGNORE\s+)?INTO\s+("?\w+"?)\s*\(([^)]*)\)\s*(VALUES\s*|(?=SELECT\b))/i.exec(sql)
  if (!m) return undefined
  const rows: InsertReturning['rows'] = []
  let at = m[0].length
  if (!m[4]) {
    // INSERT ... SELECT: one row (its select list gives the key), up to the upsert or RETURNING.
    const end = /\s(ON\s+DUPLICATE\s+KEY\s+UPDATE|RETURNING)\b/i.exec(sql.slice(at))
    if (!end) return undefined
    const text = sql.slice(at, at + end.index)
    const from = topLevel(text, /\bFROM\b/gi)
    const list = text.slice('SELECT'.length, from < 0 ? text.length : from)
    rows.push({ text, params: placeholders(text), values: splitTop(list).map((v) => v.trim()) })
    at += end.index
  }
  while (sql[at] === '(') {
    const close = closing(sql, at)
    if (close < 0) return undefined
    const text = sql.slice(at, close + 1)
    rows.push({ text, params: placeholders(text), values: splitTop(text.slice(1, -1)).map((v) => v.trim()) })
    at = close + 1
    const next = /^\s*,\s*/.exec(sql.slice(at))
    if (!next) break
    at += next[0].length
  }
  const rest = sql.slice(at)
  const ret = [...rest.matchAll(/\bRETURNING\b/gi)].pop()
  if (!rows.length || ret?.index === undefined) return undefined
  const tail = rest.slice(0, ret.index).trim()
  return {
    table: (m[2] ?? '').replaceAll('"', ''),
    head: m[0].trim(),
    columns: (m[3] ?? '').split(',').map((c) => c.trim().replaceAll('"', '')),
    rows,
    tail,
    tailParams: placeholders(tail),
    returning: rest
      .slice(ret.index + 'RETURNING'.length)
      .replace(/;\s*$/, '')
      .trim(),
    kind: m[1] ? 'ignore' : !tail ? 'insert' : tail.includes('@liveops_upsert') ? 'guarded' : 'upsert',
  }
}

/** The columns of `ON CONFLICT (a, b)` in a statement as written, if it names them. */
export function conflictTarget(sql: string): string[] | undefined {
  const m = /\bON\s+CONFLICT\s*\(([^)]*)\)/i.exec(sql)
  return m?.[1]?.split(',').map((c) => c.trim().replaceAll('"', ''))
}
