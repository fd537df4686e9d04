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

/**
 * Multi-row INSERT of `rows` (arrays in `cols` order), with an optional tail such as
 * `ON CONFLICT ... DO NOTHING RETURNING ...`. The chunks are sent together, so PostgreSQL
 * pipelines them on the transaction's connection.
 */
export async function insertMany(
  db: Db,
  table: string,
  cols: readonly string[],
  rows: Param[][],
  tail = '',
): Promise<Row[]> {
  if (!rows.length) return []
  const tuple = `(${cols.map(() => '?').join(', ')})`
  const head = `INSERT INTO ${table} (${cols.join(', ')}) VALUES `
  const returning = /\bRETURNING\b/i.test(tail)
  const jobs: Promise<Row[] | number>[] = []
  let at = 0
  for (const size of chunks(rows.length, cols.length)) {
    const sql = `${head}${Array(size).fill(tuple).join(', ')} ${tail}`
    const params = rows.slice(at, at + size).flat()
    at += size
    jobs.push(returning ? db.all(sql, params) : db.run(sql, params))
  }
  const out: Row[] = []
  for (const r of await Promise.all(jobs)) if (Array.isArray(r)) out.push(...r)
  return out
}
