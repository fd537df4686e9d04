import type { Db } from '../../core/db'
import { insertRows as insertMany } from '../../core/db/bulk'
import type { ExposureRows } from './exposures'

/** The write half of the exposures consumer, in the transaction that moves its cursor. */
export async function writeExposures(tx: Db, rows: ExposureRows): Promise<void> {
  await Promise.all([
    insertMany(
      tx,
      { name: 'experiments_exposures', bigint: ['ts'] },
      ['game_id', 'env', 'experiment_id', 'user_id', 'variant', 'ts'],
      rows.exposures,
      `ON CONFLICT (game_id, env, experiment_id, user_id) DO UPDATE SET variant = excluded.variant, ts = excluded.ts
       WHERE excluded.ts < experiments_exposures.ts`,
    ),
    insertMany(
      tx,
      { name: 'experiments_user_events', bigint: ['last_ts'] },
      ['game_id', 'env', 'user_id', 'event', 'last_ts'],
      rows.userEvents,
      `ON CONFLICT (game_id, env, user_id, event) DO UPDATE SET last_ts = excluded.last_ts
       WHERE excluded.last_ts > experiments_user_events.last_ts`,
    ),
  ])
}
