/**
 * Faults of the store itself (a full disk, a read-only or vanished file, an unreachable or
 * restarting PostgreSQL), as opposed to a bad statement or a constraint. A request that meets
 * one answers 503 `storage_unavailable` naming the cause, `/readyz` turns 503 until a write
 * succeeds again, and nothing is acknowledged that was not stored.
 */
const SQLITE_CODES: Record<string, string> = {
  SQLITE_FULL: 'the disk is full',
  SQLITE_IOERR: 'the disk failed to read or write',
  SQLITE_READONLY: 'the database file is read-only',
  SQLITE_CANTOPEN: 'the database file cannot be opened',
  SQLITE_NOTADB: 'the database file is not a database',
  SQLITE_CORRUPT: 'the database file is corrupt',
}
const NODE_CODES: Record<string, string> = {
  ENOSPC: 'the disk is full',
  EROFS: 'the file system is read-only',
  EACCES: 'permission denied',
  ECONNREFUSED: 'the database refused the connection',
  ECONNRESET: 'the database connection was reset',
  ETIMEDOUT: 'the database did not answer',
  CONNECT_TIMEOUT: 'the database did not answer within the connect timeout',
  CONNECTION_CLOSED: 'the database connection closed',
  CONNECTION_ENDED: 'the database connection ended',
  CONNECTION_DESTROYED: 'the database connection was destroyed',
  DATABASE_DOWN: 'the database does not answer',
  // mysql2 / MySQL
  PROTOCOL_CONNECTION_LOST: 'the database connection was lost',
  ER_CON_COUNT_ERROR: 'the database has too many connections',
  ER_SERVER_SHUTDOWN: 'the database is shutting down',
  ER_RECORD_FILE_FULL: 'the database disk is full',
  // PostgreSQL: admin_shutdown, crash_shutdown, cannot_connect_now, disk_full, out of memory
  '57P01': 'the database is shutting down',
  '57P02': 'the database crashed',
  '57P03': 'the database is starting up',
  '53100': 'the database disk is full',
  '53200': 'the database is out of memory',
}

export interface StorageFault {
  /** What an operator reads first: `the disk is full (SQLITE_FULL)`. */
  cause: string
  /** The store's own error message, for the log. */
  detail: string
}

/** The fault of the store behind `e`, or undefined when `e` is something else. */
export function storageFault(e: unknown): StorageFault | undefined {
  const err = e as { code?: unknown; errno?: unknown; message?: unknown } | null
  if (!err || typeof err !== 'object') return undefined
  const code = typeof err.code === 'string' ? err.code : ''
  const message = typeof err.message === 'string' ? err.message : String(e)
  const base = code.startsWith('SQLITE_') ? code.replace(/^(SQLITE_[A-Z]+?)(_[A-Z_]+)?$/, '$1') : code
  const cause = SQLITE_CODES[base] ?? NODE_CODES[code]
  if (cause) return { cause: `${cause} (${code})`, detail: message }
  // Errors that crossed a thread boundary (the ingest persist thread) keep only their message.
  const known =
    /database or disk is full|disk I\/O error|attempt to write a readonly database|unable to open database file/i.exec(
      message,
    ) ?? CONNECTION_MESSAGE.exec(message)
  if (known) return { cause: `the store failed: ${known[0]}`, detail: message }
  return undefined
}

/** Connection failures as postgres.js and PostgreSQL word them (`write CONNECTION_CLOSED host:port`). */
const CONNECTION_MESSAGE =
  /\b(ECONNRESET|ECONNREFUSED|ETIMEDOUT|EPIPE|CONNECT_TIMEOUT|CONNECTION_CLOSED|CONNECTION_ENDED|CONNECTION_DESTROYED|DATABASE_DOWN|PROTOCOL_CONNECTION_LOST)\b|terminating connection due to administrator command|the database system is (shutting down|starting up|in recovery mode)/

/** True for a failure of the connection to the store rather than of a statement. */
export function isConnectionFault(e: unknown): boolean {
  const err = e as { code?: unknown; message?: unknown } | null
  if (!err || typeof err !== 'object') return false
  const code = typeof err.code === 'string' ? err.code : ''
  if (code.startsWith('57P') || code.startsWith('08') || code === 'PROTOCOL_CONNECTION_LOST') return true
  return CONNECTION_MESSAGE.test(typeof err.message === 'string' ? err.message : '')
}

/**
 * Thrown at once for every query while PostgreSQL is known not to answer (core/db/pg-pool.ts):
 * a 503 with Retry-After now, instead of a request waiting for a connection that will not come.
 */
export class StoreDown extends Error {
  readonly code = 'DATABASE_DOWN'
  constructor(cause: string, since: number) {
    super(`DATABASE_DOWN since ${new Date(since).toISOString()}: ${cause}`)
  }
}
