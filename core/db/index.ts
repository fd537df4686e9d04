import { mkdirSync } from 'node:fs'
import { join } from 'node:path'
import { type PgOptions, openPostgres } from './postgres'
import { openSqlite } from './sqlite'
import type { Db } from './types'

export type { Db, Dialect, Migration, Param, Row, StoreLocation } from './types'
export { migrate, MigrationError, type MigrationSet } from './migrate'

/** True for `postgres://` and `postgresql://` URLs. */
export function isPostgresUrl(url: string | undefined): boolean {
  return !!url && /^postgres(ql)?:\/\//.test(url)
}

/**
 * Opens the store a URL names: a PostgreSQL URL, a SQLite path (`sqlite:` prefix optional), or,
 * when empty, `liveops.sqlite` in the data directory.
 */
export function openDb(url: string | undefined, dataDir: string, pg: PgOptions = {}): Db {
  if (url && isPostgresUrl(url)) return openPostgres(url, pg)
  let path = url?.replace(/^sqlite:(\/\/)?/, '') || ''
  if (!path) {
    mkdirSync(dataDir, { recursive: true })
    path = join(dataDir, 'liveops.sqlite')
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
