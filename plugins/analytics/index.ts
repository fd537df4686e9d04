import { Type as T } from '@sinclair/typebox'
import { definePlugin } from '../../core/plugin'
import '../games/types'
import '../ingest/types'
import { migrations } from './migrations'
import { AnalyticsRollup } from './rollup'
import { warehouseStore } from './warehouse'
import { warehouseRoutes } from './warehouse-routes'

/**
 * Game and server analytics (spec 1) over the event store: it owns the rollups registered into
 * ingest's commit (user-days, first sight, day counters, online sketches, invocation hours) and
 * every `/api/v1/analytics/*` route, the warehouse endpoints included. Without it, ingest still
 * stores events and those routes answer 404.
 */
export default definePlugin({
  name: 'analytics',
  dependsOn: ['ingest', 'games'],
  config: T.Object({}, { additionalProperties: false, default: {} }),
  migrations,
  setup(ctx) {
    const ingest = ctx.service('ingest')
    ingest.registerRollup(new AnalyticsRollup({ plugin: 'analytics', migrations }))
    const warehouse = ingest.warehouse ? warehouseStore(ingest.db) : undefined
    return warehouseRoutes(ctx.guard, ingest, warehouse)
  },
})
