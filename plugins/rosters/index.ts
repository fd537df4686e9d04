import { definePlugin } from '../../core/plugin'
import m001 from './migrations/001_rosters.sql' with { type: 'text' }
import { rosterRoutes } from './routes'
import { RostersConfig } from './schema'
import { rosterStore } from './store'

/**
 * On-call rosters (spec 2): periods pushed by an external scheduler, or imported from an
 * iCalendar text. It registers its silence check into the rules plugin, so a rule with
 * `silence: {roster}` holds while a period covers now.
 */
export default definePlugin({
  name: 'rosters',
  dependsOn: ['rules'],
  config: RostersConfig,
  migrations: [{ id: 1, name: 'rosters', sql: m001 }],
  permissions: { rosters: { write: ['operator'] } },
  setup(ctx) {
    const store = rosterStore(ctx.db, () => void ctx.changes.publish('rosters', {}))
    ctx.changes.on('rosters', (_d, origin) => {
      if (origin === 'remote')
        return store.sync().catch((e) => ctx.log.error('roster sync failed', { error: String(e) }))
    })
    if (ctx.config.manager) ctx.service('rules').setRosters({ covers: store.covers })
    ctx.onStart(() => store.sync())
    // The periods this instance holds in memory: every instance refreshes its own.
    ctx.schedule('rosters.sync', ctx.config.sync_ms, () => store.sync(), { perInstance: true })
    return rosterRoutes(ctx, store)
  },
})
