import type { Db, Param, Row } from './types'

/**
 * Bulk insert, the one way every plugin writes many rows at once (ingest's events, notify's
 * deliveries). The rows' values come one after another in `cols` order (`params.length` is a
 * multiple of `cols.length`), with an optional tail such as `ON CONFLICT ... DO NOTHING
 * RETURNING ...`.
 *
 * SQLite: chunks of multi-row VALUES in power-of-two sizes, so each table has a few fixed
 * statement texts and the prepared-statement cache stays small whatever the batch size.
 * PostgreSQL with `bigint` columns named: one statement over one JSON array parameter
 * (`jsonSelect`): PostgreSQL neither parses nor plans thousands of parameters (2,000 rows cost
 * the client 1.0-1.8 µs each instead of 3.5-8, see docs/performance.md). Without them, the same
 * VALUES chunks as SQLite.
 */
export interface BulkOptions {
  /** `ON CONFLICT ...`, `RETURNING ...`: appended to every statement. */
  tail?: string
  /** PostgreSQL: the columns to cast to BIGINT (the others are TEXT); enables the JSON path. */
  bigint?: readonly string[]
  /** Called with the number of rows the statements changed (a tail without RETURNING): `ON CONFLICT DO NOTHING` skips show. */
  changed?: (rows: number) => void
}

const MAX_PARAMS = 8192

function chunks(n: number, cols: number): number[] {
  const cap = 2 ** Math.floor(Math.log2(Math.max(1, Math.floor(MAX_PARAMS / cols))))
  const out: number[] = []
  let left = n
  while (left >= cap) {
    out.push(cap)
    left -= cap
  }
  for (let size = cap >> 1; size >= 1; size >>= 1) {
    if (left < size) continue
    out.push(size)
    left -= size
  }
  return out
}

interface Shape {
  head: string
  json: string | undefined
  tuple: string
  returning: boolean
  /** Statement text by row count: the same string each time, so the statement caches hit. */
  bySize: Map<number, string>
}
/** `table (cols)` + tail -> shape: the same table may be written with other columns. */
const shapes = new Map<string, Shape>()

function shape(table: string, cols: readonly string[], tail: string): Shape {
  const key = `${table} (${cols.join(', ')}) ${tail}`
  let s = shapes.get(key)
  if (!s) {
    s = {
      head: `INSERT INTO ${table} (${cols.join(', ')}) VALUES `,
      json: undefined,
      tuple: `(${cols.map(() => '?').join(', ')})`,
      returning: /\bRETURNING\b/i.test(tail),
      bySize: new Map(),
    }
    shapes.set(key, s)
  }
  return s
}

/**
 * `SELECT <cols> FROM` the rows of one JSON array parameter, PostgreSQL only: row `i`'s column
 * `k` at index `i * width + k`, cast to its type, rows in the order given (ORDER BY keeps the key
 * order that keeps concurrent commits from deadlocking). The parameter is text (postgres.js would
 * encode a jsonb one again); OFFSET 0 keeps the subquery apart, so its cast runs once.
 */
export function jsonSelect(cols: readonly string[], bigint: readonly string[]): string {
  const w = cols.length
  const list = cols
    .map((c, k) => {
      const v = `p.j ->> (i * ${w} + ${k})`
      return bigint.includes(c) ? `(${v})::bigint AS ${c}` : `${v} AS ${c}`
    })
    .join(', ')
  return `SELECT ${list} FROM (SELECT ?::text::jsonb AS j OFFSET 0) p, generate_series(0, jsonb_array_length(p.j) / ${w} - 1) AS i ORDER BY i`
}

/**
 * The parameter of `jsonSelect`: one native `JSON.stringify`. jsonb refuses a lone surrogate and
 * NUL; only when an escape of that kind may be present are strings made well-formed (U+FFFD)
 * and stripped of NUL.
 */
export function jsonRows(params: readonly Param[]): string {
  const text = JSON.stringify(params)
  if (!text.includes('\\u')) return text
  return JSON.stringify(
    params.map((v) => (typeof v === 'string' ? v.replaceAll('\u0000', '').toWellFormed() : v)),
  )
}

export async function insertMany(
  db: Db,
  table: string,
  cols: readonly string[],
  params: readonly Param[],
  opts: BulkOptions = {},
): Promise<Row[]> {
  const tail = opts.tail ?? ''
  const width = cols.length
  const rows = params.length / width
  if (!rows) return []
  if (!Number.isInteger(rows))
    throw new Error(`insertMany ${table}: ${params.length} values for ${width} columns`)
  const s = shape(table, cols, tail)
  if (db.dialect === 'postgres' && opts.bigint) {
    s.json ??= `INSERT INTO ${table} (${cols.join(', ')}) ${jsonSelect(cols, opts.bigint)} ${tail}`
    const p = [jsonRows(params)]
    if (s.returning) return db.all(s.json, p)
    const n = await db.run(s.json, p)
    opts.changed?.(n)
    return []
  }
  const jobs: Promise<Row[] | number>[] = []
  let at = 0
  for (const size of chunks(rows, width)) {
    let sql = s.bySize.get(size)
    if (sql === undefined) {
      sql = `${s.head}${Array(size).fill(s.tuple).join(', ')} ${tail}`
      s.bySize.set(size, sql)
    }
    const chunk = size === rows ? (params as Param[]) : params.slice(at * width, (at + size) * width)
    at += size
    // Issued together: postgres.js pipelines them on the transaction's connection.
    jobs.push(s.returning ? db.all(sql, chunk) : db.run(sql, chunk))
  }
  if (!s.returning) {
    const counts = (await Promise.all(jobs)) as number[]
    opts.changed?.(counts.reduce((a, b) => a + b, 0))
    return []
  }
  const out = (await Promise.all(jobs)) as Row[][]
  return out.length === 1 ? out[0] : out.flat()
}

/**
 * A table with its BIGINT columns (every other column is TEXT), as the plugins that write many
 * rows at once name theirs: PostgreSQL casts the JSON array's values to them (`tableSelect`).
 */
export interface Table {
  name: string
  bigint: readonly string[]
}

/** `SELECT <cols> FROM` one JSON array parameter, cast to `table`'s types. */
export function tableSelect(table: Table, cols: readonly string[]): string {
  return jsonSelect(cols, table.bigint)
}

/** `insertMany` into a typed table (the JSON path on PostgreSQL). */
export function insertRows(
  db: Db,
  table: Table,
  cols: readonly string[],
  params: Param[],
  tail = '',
  /** The number of rows written (a tail without RETURNING). */
  changed?: (rows: number) => void,
): Promise<Row[]> {
  return insertMany(db, table.name, cols, params, {
    tail,
    bigint: db.dialect === 'postgres' ? table.bigint : undefined,
    changed,
  })
}
