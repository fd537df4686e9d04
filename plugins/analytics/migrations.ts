import type { Migration } from '../../core/db'
import m001 from './migrations/001_take_rollups.sql' with { type: 'text' }
import m002 from './migrations/002_game_analytics.sql' with { type: 'text' }
import m003 from './migrations/003_filters.sql' with { type: 'text' }
import m004 from './migrations/004_behavior.sql' with { type: 'text' }
import m006 from './migrations/006_cohorts.sql' with { type: 'text' }
import m007 from './migrations/007_realtime_minute.sql' with { type: 'text' }
import m008 from './migrations/008_first_seen_by_user.sql' with { type: 'text' }
import m009 from './migrations/009_platform_users.sql' with { type: 'text' }
import m010 from './migrations/010_paid_orders.sql' with { type: 'text' }
import m011 from './migrations/011_order_refunds.sql' with { type: 'text' }

/** SQLite keeps keyed rollups WITHOUT ROWID (see ingest 002); PostgreSQL has no such clause. */
const pg = (sql: string) => sql.replaceAll(') WITHOUT ROWID;', ');')

export const migrations: Migration[] = [
  { id: 1, name: 'take_rollups', sql: m001 },
  { id: 2, name: 'game_analytics', sql: m002, pg: pg(m002) },
  { id: 3, name: 'filters', sql: m003 },
  { id: 4, name: 'behavior', sql: m004, pg: pg(m004) },
  { id: 6, name: 'cohorts', sql: m006, pg: pg(m006) },
  { id: 7, name: 'realtime_minute', sql: m007, pg: pg(m007) },
  { id: 8, name: 'first_seen_by_user', sql: m008 },
  { id: 9, name: 'platform_users', sql: m009, pg: pg(m009) },
  { id: 10, name: 'paid_orders', sql: m010, pg: pg(m010) },
  { id: 11, name: 'order_refunds', sql: m011 },
]

/**
 * Every table of the consumers' results and of the environment's saved filters, each keyed by
 * `game_id` and `env`: what a deleted environment or game takes along (`IngestService.onForget`).
 * A table added here must be listed (forget.test.ts compares the list with the store's).
 */
export const RESULT_TABLES = [
  'analytics_online',
  'analytics_user_day',
  'analytics_user_day_log',
  'analytics_first_seen',
  'analytics_daily',
  'analytics_invocation_hour',
  'analytics_invocation_hist',
  'analytics_day_sketch',
  'analytics_game_day',
  'analytics_game_hour',
  'analytics_payer_day',
  'analytics_social_user',
  'analytics_filters',
  'analytics_behavior_day',
  'analytics_behavior_sketch',
  'analytics_event_span',
  'analytics_death',
  'analytics_transaction',
  'analytics_cohort_day',
  'analytics_user_week',
  'analytics_cohort_week',
  'analytics_minute',
  'analytics_platform_user',
  'analytics_order',
  'analytics_behavior_order',
] as const

/**
 * The event-time columns (epoch ms) of each result table: a row with a time no event inside the
 * event-time window could have made (a 1970 or 9999 event stored before ingestion refused them)
 * goes in ingest's one-time clean-up (`IngestService.onFarDated`). Every table of `RESULT_TABLES`
 * but the saved filters (forget.test.ts compares the lists).
 */
export const DATED_TABLES: Readonly<Record<string, readonly string[]>> = {
  analytics_online: ['minute'],
  analytics_user_day: ['day'],
  analytics_user_day_log: ['day'],
  analytics_first_seen: ['first_ts', 'first_day'],
  analytics_daily: ['day'],
  analytics_invocation_hour: ['hour'],
  analytics_invocation_hist: ['hour'],
  analytics_day_sketch: ['day'],
  analytics_game_day: ['day'],
  analytics_game_hour: ['hour'],
  analytics_payer_day: ['day'],
  analytics_social_user: ['first_ts'],
  analytics_behavior_day: ['day'],
  analytics_behavior_sketch: ['day'],
  analytics_event_span: ['hour'],
  analytics_death: ['ts'],
  analytics_transaction: ['ts'],
  analytics_cohort_day: ['cohort', 'day'],
  analytics_user_week: ['week'],
  analytics_cohort_week: ['cohort', 'week'],
  analytics_minute: ['minute'],
  analytics_platform_user: ['day'],
  analytics_order: ['ts'],
  analytics_behavior_order: ['ts'],
}
