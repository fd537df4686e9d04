import type { Migration } from '../../core/db'
import m001 from './migrations/001_events.sql' with { type: 'text' }
import m002 from './migrations/002_without_rowid.sql' with { type: 'text' }
import m003 from './migrations/003_user_day_log.sql' with { type: 'text' }
import m004 from './migrations/004_nonces.sql' with { type: 'text' }
import m005 from './migrations/005_event_ids.sql' with { type: 'text' }

/** Events are keyed by the rowid (`INTEGER PRIMARY KEY`), which the migration runner makes BIGINT on PostgreSQL. */
export const ingestMigrations: Migration[] = [
  { id: 1, name: 'events', sql: m001 },
  // SQLite's storage layout only: a PostgreSQL table is always a heap with separate indexes.
  { id: 2, name: 'without_rowid', sql: m002, pg: 'SELECT 1' },
  { id: 3, name: 'user_day_log', sql: m003 },
  { id: 4, name: 'nonces', sql: m004 },
  { id: 5, name: 'event_ids', sql: m005, pg: m005.replace(') WITHOUT ROWID;', ');') },
]
