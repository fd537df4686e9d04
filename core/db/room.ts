import { lockUntilCommit } from './migrate'
import type { Db } from './types'

/** A lock held to a transaction's end (`lockUntilCommit`). */
export interface TxLock {
  pg: number
  mysql: string
  waitS: number
}

/**
 * Whether `table` already holds `max` rows (or more), counted in `tx` under `lock`, held to the
 * transaction's end: the writer that counts next waits until this one committed its row. Counted
 * without it, creates at once on PostgreSQL or MariaDB each saw room and passed a cap together
 * (SQLite's one writer needs no lock). Only where a row is new: the lock serializes those writers.
 */
export async function full(tx: Db, lock: TxLock, table: string, max: number): Promise<boolean> {
  await lockUntilCommit(tx, lock)
  return Number((await tx.get<{ n: number | string }>(`SELECT COUNT(*) AS n FROM ${table}`))?.n ?? 0) >= max
}
