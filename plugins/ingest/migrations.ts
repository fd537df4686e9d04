import type { Migration } from '../../core/db'
import m001 from './migrations/001_events.sql' with { type: 'text' }

/** Events are keyed by the rowid (`INTEGER PRIMARY KEY`), which the migration runner makes BIGINT on PostgreSQL. */
export const ingestMigrations: Migration[] = [{ id: 1, name: 'events', sql: m001 }]
