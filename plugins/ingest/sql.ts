import type { Db, Param, Row } from '../../core/db'

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
  tuple: string
  returning: boolean
  /** Statement text by row count: the same string each time, so both engines' statement caches hit on a hashed string. */
  bySize: Map<number, string>
}
/** table -> tail -> shape */
const shapes = new Map<string, Map<string, Shape>>()

function shape(table: string, cols: readonly string[], tail: string): Shape {
  let byTail = shapes.get(table)
  if (!byTail) {
    byTail = new Map()
    shapes.set(table, byTail)
  }
  let s = byTail.get(tail)
  if (!s) {
    s = {
      head: `INSERT INTO ${table} (${cols.join(', ')}) VALUES `,
      tuple: `(${cols.map(() => '?').join(', ')})`,
      returning: /\bRETURNING\b/i.test(tail),
      bySize: new Map(),
    }
    byTail.set(tail, s)
  }
  return s
}

/**
 * Multi-row INSERT of `params`, the rows' values one after another in `cols` order, with an
 * optional tail such as `ON CONFLICT ... DO NOTHING RETURNING ...`. The chunks are sent
 * together, so PostgreSQL pipelines them on the transaction's connection.
 */
export async function insertMany(
  db: Db,
  table: string,
  cols: readonly string[],
  params: Param[],
  tail = '',
): Promise<Row[]> {
  const width = cols.length
  const rows = params.length / width
  if (!rows) return []
  const s = shape(table, cols, tail)
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
