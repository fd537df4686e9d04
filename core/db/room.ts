import { lockUntilCommit } from './migrate'
import type { Db, Param } from './types'

/** A lock held to a transaction's end (`lockUntilCommit`). */
export interface TxLock {
  pg: number
  mysql: string
  waitS: number
}

/**
 * Whether `table` (its rows matching `where`, when given) already holds `max` rows or more,
 * counted in `tx` under `lock`, held to the transaction's end: the writer that counts next waits
 * until this one committed its row. Counted without it, creates at once on PostgreSQL or MariaDB
 * each saw room and passed a cap together (SQLite's one writer needs no lock). Only where a row is
 * new: the lock serializes those writers.
 */
export async function atCap(
  tx: Db,
  lock: TxLock,
  table: string,
  max: number,
  where?: { sql: string; args: Param[] },
): Promise<boolean> {
  await lockUntilCommit(tx, lock)
  const row = await tx.get<{ n: number | string }>(
    `SELECT COUNT(*) AS n FROM ${table}${where ? ` WHERE ${where.sql}` : ''}`,
    where?.args ?? [],
  )
  return Number(row?.n ?? 0) >= max
}
