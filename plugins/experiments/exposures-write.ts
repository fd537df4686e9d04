import { defineRollupWriter } from '../ingest/rollup'
import { insertMany } from '../ingest/store/sql'
import type { ExposureRows } from './exposures'

/** The write half of the exposure rollup, in ingest's commit transaction (see `plugins/rollups.ts`). */
export const writeExposures = defineRollupWriter<ExposureRows>(async (tx, rows) => {
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
})
