import { join } from 'node:path'
import { privateDir, privateFile, tighten } from '../files'
import { openMysql } from './mysql'
import { type PgOptions, openPostgres } from './postgres'
import { openSqlite } from './sqlite'
import type { Db } from './types'

export type { Db, Dialect, Migration, Param, Row, StoreLocation } from './types'
export { migrate, MigrationError, type MigrationSet } from './migrate'

/** True for `postgres://` and `postgresql://` URLs. */
export function isPostgresUrl(url: string | undefined): boolean {
  return !!url && /^postgres(ql)?:\/\//.test(url)
}

/** True for `mysql://` and `mariadb://` URLs. */
export function isMysqlUrl(url: string | undefined): boolean {
  return !!url && /^(mysql|mariadb):\/\//.test(url)
}

/**
 * Opens the store a URL names: a PostgreSQL URL, a MySQL or MariaDB URL, a SQLite path (`sqlite:` prefix optional), or,
 * when empty, `liveops.sqlite` in the data directory.
 */
export function openDb(url: string | undefined, dataDir: string, pg: PgOptions = {}): Db {
  if (url && isPostgresUrl(url)) return openPostgres(url, pg)
  if (url && isMysqlUrl(url)) return openMysql(url, { max: pg.max, connectTimeoutS: pg.connectTimeoutS })
  let path = url?.replace(/^sqlite:(\/\/)?/, '') || ''
  if (!path) {
    privateDir(dataDir)
    path = join(dataDir, 'liveops.sqlite')
  }
  if (path !== ':memory:') {
    // SQLite gives the -wal and -shm files the mode of the database file: 0600 all three.
    privateFile(path)
    for (const side of ['-wal', '-shm']) tighten(path + side)
  }
  return openSqlite(path)
}

/** JSON stored as TEXT: parse with a fallback so one bad row never breaks a list. */
export function fromJson<T>(text: unknown, fallback: T): T {
  if (typeof text !== 'string' || text === '') return fallback
  try {
    return JSON.parse(text) as T
  } catch {
    return fallback
  }
}

/** Epoch milliseconds to the ISO 8601 UTC string the APIs speak. */
export function iso(ms: number | null | undefined): string | undefined {
  return ms === null || ms === undefined ? undefined : new Date(Number(ms)).toISOString()
}

/** Time-ordered ids keep inserts at the end of every index. */
export function newId(): string {
  return Bun.randomUUIDv7()
}

/**
 * One page of a filtered, sorted list and the total it belongs to, in one round trip each (run
 * together). `filters` are equality conditions; an undefined value is no filter. `order` is a
 * checked ORDER BY (`parseSort`); the id breaks ties in the same direction, so pages never
 * overlap.
 */
export async function selectPage<R>(
  db: Db,
  q: {
    table: string
    cols: string
    filters: ReadonlyArray<readonly [column: string, value: string | undefined]>
    order: string
    page: number
    size: number
  },
): Promise<{ rows: R[]; total: number }> {
  const where: string[] = []
  const args: string[] = []
  for (const [column, value] of q.filters) {
    if (value === undefined) continue
    where.push(`${column} = ?`)
    args.push(value)
  }
  const clause = where.length ? `WHERE ${where.join(' AND ')}` : ''
  const tie = q.order.endsWith('DESC') ? 'DESC' : 'ASC'
  const [rows, count] = await Promise.all([
    db.all<R>(`SELECT ${q.cols} FROM ${q.table} ${clause} ORDER BY ${q.order}, id ${tie} LIMIT ? OFFSET ?`, [
      ...args,
      q.size,
      q.page * q.size,
    ]),
    db.get<{ n: number }>(`SELECT COUNT(*) AS n FROM ${q.table} ${clause}`, args),
  ])
  return { rows, total: Number(count?.n ?? 0) }
}
