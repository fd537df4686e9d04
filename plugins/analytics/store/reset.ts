import type { Db } from '../../../core/db'

/** What the analytics consumer derives from the log (a rebuild deletes them first). */
export const ANALYTICS_TABLES = [
  'analytics_first_seen',
  'analytics_user_day',
  'analytics_user_day_log',
  'analytics_user_week',
  'analytics_daily',
  'analytics_online',
  'analytics_day_sketch',
  'analytics_invocation_hour',
  'analytics_invocation_hist',
  'analytics_game_day',
  'analytics_game_hour',
  'analytics_payer_day',
  'analytics_social_user',
  'analytics_platform_user',
  'analytics_cohort_day',
  'analytics_cohort_week',
] as const

/** The behavior consumer's tables. */
export const BEHAVIOR_TABLES = [
  'analytics_behavior_day',
  'analytics_behavior_sketch',
  'analytics_event_span',
  'analytics_death',
  'analytics_transaction',
] as const

/**
 * Deletes a consumer's results before a rebuild delivers the log again. Only whole rebuilds: a
 * day's counters, cohorts and sketches mix events from both sides of any instant.
 */
export async function resetTables(
  tx: Db,
  tables: readonly string[],
  from: number | undefined,
): Promise<void> {
  if (from !== undefined) throw new Error('this consumer rebuilds from the start of the log only')
  for (const t of tables) await tx.run(`DELETE FROM ${t}`)
}

export const resetAnalytics = (tx: Db, from: number | undefined) => resetTables(tx, ANALYTICS_TABLES, from)
