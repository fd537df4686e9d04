import type { Db, Param, Row } from '../../core/db'
import { clean } from './validate'

export const DAY = 86_400_000
export const HOUR = 3_600_000
export const MINUTE = 60_000
export const floorTo = (ms: number, unit: number) => Math.floor(ms / unit) * unit

// A few fixed statement shapes per table (power-of-two chunks) keep the prepared-statement
// caches of both engines small, whatever the batch size.
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
  /** PostgreSQL: the whole insert as one statement over one JSON array (built on first use). */
  json: string | undefined
  tuple: string
  returning: boolean
  /** Statement text by row count: the same string each time, so both engines' statement caches hit on a hashed string. */
  bySize: Map<number, string>
}
/** `table (cols)` -> tail -> shape: the same table may be written with other columns. */
const shapes = new Map<string, Map<string, Shape>>()

function shape(table: string, cols: readonly string[], tail: string): Shape {
  const key = `${table} (${cols.join(', ')})`
  let byTail = shapes.get(key)
  if (!byTail) {
    byTail = new Map()
    shapes.set(key, byTail)
  }
  let s = byTail.get(tail)
  if (!s) {
    s = {
      head: `INSERT INTO ${table} (${cols.join(', ')}) VALUES `,
      json: undefined,
      tuple: `(${cols.map(() => '?').join(', ')})`,
      returning: /\bRETURNING\b/i.test(tail),
      bySize: new Map(),
    }
    byTail.set(tail, s)
  }
  return s
}

/**
 * A table `insertMany` writes, with its BIGINT columns (every other column is TEXT): on
 * PostgreSQL `jsonSelect` casts to them. Rollups name their own tables this way; ingest's are
 * known by name.
 */
export interface Table {
  name: string
  bigint: readonly string[]
}
export type TableRef = string | Table

/** PostgreSQL BIGINT columns of ingest's own tables. */
const PG_BIGINT: Record<string, readonly string[]> = {
  ingest_events: ['id', 'received_at', 'ts', 'amount_cents', 'duration_ms'],
  ingest_payments: ['amount_cents', 'ts', 'received_at'],
  ingest_invocations: ['id', 'ts', 'received_at', 'duration_ms'],
  ingest_nonces: ['expires_at'],
}

const nameOf = (t: TableRef) => (typeof t === 'string' ? t : t.name)

function pgType(table: TableRef, col: string): 'bigint' | 'text' {
  const bigints = typeof table === 'string' ? PG_BIGINT[table] : table.bigint
  if (!bigints) throw new Error(`insertMany: no column types for table ${nameOf(table)}`)
  return bigints.includes(col) ? 'bigint' : 'text'
}

/**
 * `SELECT <cols> FROM` the rows of one JSON array parameter, PostgreSQL only: the rows' values
 * one after another (`jsonRows`), row `i`'s column `k` at index `i * width + k`, cast to the
 * column's type, rows in the order given: ORDER BY keeps the key order that keeps concurrent
 * commits from deadlocking. The parameter is text (postgres.js would encode a jsonb one again);
 * OFFSET 0 keeps the subquery apart, so its cast to jsonb runs once, not once per value read.
 */
export function jsonSelect(table: TableRef, cols: readonly string[]): string {
  const w = cols.length
  const list = cols
    .map((c, k) => {
      const v = `p.j ->> (i * ${w} + ${k})`
      return pgType(table, c) === 'bigint' ? `(${v})::bigint AS ${c}` : `${v} AS ${c}`
    })
    .join(', ')
  return `SELECT ${list} FROM (SELECT ?::text::jsonb AS j OFFSET 0) p, generate_series(0, jsonb_array_length(p.j) / ${w} - 1) AS i ORDER BY i`
}

/**
 * The parameter of `jsonSelect`: one native `JSON.stringify`, five times cheaper than a text
 * array literal per column built value by value. jsonb refuses two things a JS string can hold:
 * a lone surrogate (JSON.stringify writes it as `\udXXX`) and NUL (`\u0000`; the validator
 * already strips NULs from every stored string). Only when an escape of that kind may be
 * present are the strings made well-formed (U+FFFD, as a UTF-8 encoder writes them) and cleaned.
 */
export function jsonRows(params: Param[]): string {
  const text = JSON.stringify(params)
  if (!text.includes('\\u')) return text
  return JSON.stringify(params.map((v) => (typeof v === 'string' ? clean(v).toWellFormed() : v)))
}

/**
 * PostgreSQL: every row in one statement over one JSON array, `INSERT ... SELECT FROM` its
 * elements. Against multi-row VALUES with a parameter per value, PostgreSQL neither parses nor
 * plans thousands of parameters. Against one text array per column (`unnest`, sessions 4-5),
 * 2,000 raw events cost the client 1.0-1.8 µs each instead of 3.5-8 and the statement 5.3-6.6 µs
 * of wall time instead of 6.5-9.7.
 */
async function insertJson(
  db: Db,
  table: TableRef,
  cols: readonly string[],
  tail: string,
  params: Param[],
): Promise<Row[]> {
  const s = shape(nameOf(table), cols, tail)
  s.json ??= `INSERT INTO ${nameOf(table)} (${cols.join(', ')}) ${jsonSelect(table, cols)} ${tail}`
  const rows = [jsonRows(params)]
  if (s.returning) return db.all(s.json, rows)
  await db.run(s.json, rows)
  return []
}

/**
 * Multi-row INSERT of `params`, the rows' values one after another in `cols` order, with an
 * optional tail such as `ON CONFLICT ... DO NOTHING RETURNING ...`. On SQLite, chunks of
 * multi-row VALUES; on PostgreSQL one statement over a JSON array (`jsonSelect`).
 */
export async function insertMany(
  db: Db,
  table: TableRef,
  cols: readonly string[],
  params: Param[],
  tail = '',
): Promise<Row[]> {
  const width = cols.length
  const rows = params.length / width
  if (!rows) return []
  if (db.dialect === 'postgres') return insertJson(db, table, cols, tail, params)
  const s = shape(nameOf(table), cols, tail)
  const jobs: Promise<Row[] | number>[] = []
  let at = 0
  for (const size of chunks(rows, width)) {
    let sql = s.bySize.get(size)
    if (sql === undefined) {
      sql = `${s.head}${Array(size).fill(s.tuple).join(', ')} ${tail}`
      s.bySize.set(size, sql)
    }
    const chunk = size === rows ? params : params.slice(at * width, (at + size) * width)
    at += size
    jobs.push(s.returning ? db.all(sql, chunk) : db.run(sql, chunk))
  }
  if (!s.returning) {
    await Promise.all(jobs)
    return []
  }
  const out = (await Promise.all(jobs)) as Row[][]
  return out.length === 1 ? out[0] : out.flat()
}
