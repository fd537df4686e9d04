import type { Migration } from '../db'
import m001 from './migrations/001_auth.sql' with { type: 'text' }
import m002 from './migrations/002_app_tokens.sql' with { type: 'text' }
import m003 from './migrations/003_probe.sql' with { type: 'text' }
import m004 from './migrations/004_shared.sql' with { type: 'text' }
import m005 from './migrations/005_trust.sql' with { type: 'text' }
import m006 from './migrations/006_consumers.sql' with { type: 'text' }
import m007 from './migrations/007_changes.sql' with { type: 'text' }
import m008 from './migrations/008_consumer_rebuild.sql' with { type: 'text' }
import m009 from './migrations/009_consumer_parked.sql' with { type: 'text' }
import m010 from './migrations/010_refresh_gen.sql' with { type: 'text' }
import m011my from './migrations/011_api_keys_game.mysql.sql' with { type: 'text' }
import m011 from './migrations/011_api_keys_game.sql' with { type: 'text' }

/** Core's own migrations, recorded in the ledger under the name `core`. */
export const coreMigrations: Migration[] = [
  { id: 1, name: 'auth', sql: m001 },
  { id: 2, name: 'app_tokens', sql: m002 },
  { id: 3, name: 'probe', sql: m003 },
  { id: 4, name: 'shared', sql: m004 },
  { id: 5, name: 'trust', sql: m005 },
  { id: 6, name: 'consumers', sql: m006 },
  { id: 7, name: 'changes', sql: m007 },
  { id: 8, name: 'consumer_rebuild', sql: m008 },
  { id: 9, name: 'consumer_parked', sql: m009 },
  { id: 10, name: 'refresh_gen', sql: m010 },
  { id: 11, name: 'api_keys_game', sql: m011, mysql: m011my },
]

/** The consumers' cursor table alone, for a separate event store (core/event-log.ts). */
export const consumerMigrations: Migration[] = [
  { id: 1, name: 'consumers', sql: m006 },
  { id: 2, name: 'consumer_rebuild', sql: m008 },
  { id: 3, name: 'consumer_parked', sql: m009 },
]
