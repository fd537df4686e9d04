import { writeBehavior } from './analytics/behavior/behavior-write'
import { writeRealtime } from './analytics/realtime/realtime-rollup'
import { upkeepAnalytics, writeAnalytics } from './analytics/store/write'
import { writeExposures } from './experiments/exposures-write'
import type { RollupUpkeep, RollupWriter } from './ingest/rollup'

/**
 * The write half of every rollup a plugin can register into ingest's commit, by the rollup's
 * name (`ingest.registerRollup`, see `plugins/ingest/rollup.ts`). The persist thread runs the
 * transactions and cannot receive functions, so it imports this map; static imports keep the
 * compiled binary complete, as `plugins/index.ts` does for the plugins. A rollup written here
 * runs only when its plugin registered it.
 */
export const rollupWriters: Record<string, RollupWriter<unknown>> = {
  analytics: writeAnalytics,
  behavior: writeBehavior,
  exposures: writeExposures,
  realtime: writeRealtime,
}

/**
 * Work a rollup does between commits, by the rollup's name: the SQLite persist thread runs it
 * when no commit is queued, for the rollups its commits carried (see `RollupUpkeep`).
 */
export const rollupUpkeep: Record<string, RollupUpkeep> = {
  analytics: upkeepAnalytics,
}
