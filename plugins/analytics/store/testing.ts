import { consumerMigrations } from '../../../core/auth/migrations'
import { type Db, type MigrationSet, migrate } from '../../../core/db'
import { derivedConsumer } from '../../../core/derive'
import { EventLog } from '../../../core/event-log'
import { createLogger } from '../../../core/log'
import { countedIn } from '../../experiments/exposed'
import { ExposureRollup } from '../../experiments/exposures'
import { eventLog } from '../../ingest/store/log'
import { BehaviorRollup } from '../behavior/behavior-rollup'
import { migrations } from '../migrations'
import { MinuteRollup } from '../realtime/realtime-rollup'
import { AnalyticsRollup } from './rollup'

/** The analytics plugin's tables, for `migratedStore` of the ingest tests. */
export const analyticsTables: MigrationSet = { plugin: 'analytics', migrations }

const quiet = createLogger(
  { level: 'error', format: 'json', max_size: 1, max_backups: 0, max_age: 0, sensitive_fields: [] },
  () => {},
)

/**
 * Runs the event log's consumers over a store without an app (store-level tests), as a new
 * process would: from their stored cursors to the end of the log, then stops. By default the
 * three analytics consumers; `exposures` adds experiments' (its tables must be migrated).
 */
export async function derive(
  db: Db,
  o: { timezone?: (gameId: string) => Promise<string | undefined>; exposures?: boolean } = {},
): Promise<void> {
  await migrate(db, [{ plugin: 'core.consumers', migrations: consumerMigrations }])
  const log = new EventLog({ db, instanceId: 'test', log: quiet, pollMs: 60_000 })
  log.provide(eventLog(() => db))
  log.consume(derivedConsumer(new AnalyticsRollup(o.timezone)))
  log.consume(derivedConsumer(new BehaviorRollup(o.timezone)))
  log.consume(derivedConsumer(new MinuteRollup()))
  if (o.exposures) log.consume(derivedConsumer(new ExposureRollup(countedIn(db))))
  await log.start()
  try {
    await log.drain()
  } finally {
    await log.stop()
  }
}
