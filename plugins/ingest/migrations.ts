import type { Migration } from '../../core/db'
import m001pg from './migrations/001_events.pg.sql' with { type: 'text' }
import m001 from './migrations/001_events.sql' with { type: 'text' }

/** SQLite keys events by its rowid (INTEGER PRIMARY KEY); PostgreSQL needs BIGINT for the same ids. */
export const ingestMigrations: Migration[] = [{ id: 1, name: 'events', sql: m001, pg: m001pg }]
