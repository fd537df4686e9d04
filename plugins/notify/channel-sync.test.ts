import { expect, test } from 'bun:test'
import { Type as T } from '@sinclair/typebox'
import { migrate } from '../../core/db'
import { createLogger } from '../../core/log'
import { ProviderRegistry, defineProvider } from '../../core/plugin'
import { forEachEngine, loopbackOutbound, rawDb } from '../../test/helpers'
import { channelManager } from './channels'
import notify from './index'

// A sync applies what another instance stored, building the channel's provider first, which may
// take seconds (its check of the target). A channel disabled here meanwhile stayed disabled only
// until that build ended: the sync then put the older state back, and the channel sent again.

const quiet = createLogger({ level: 'error', format: 'json', sensitive_fields: [] } as never)

forEachEngine((engine) => {
  test("a sync whose provider build outlasts this instance's disable leaves the channel disabled", async () => {
    const { db, done } = await rawDb(engine)
    try {
      await migrate(db, [{ plugin: 'notify', migrations: (notify.migrations ?? []).slice(0, 1) }])
      let hold: Promise<void> | undefined
      let checks = 0
      const registry = new ProviderRegistry()
      registry.register(
        defineProvider({
          type: 'pager',
          config: T.Object({ team: T.String() }, { additionalProperties: false }),
          create: () => ({
            async verify() {
              checks++
              await hold
            },
            send: async () => ({ ok: true }),
          }),
        }),
      )
      const manager = () =>
        channelManager({ db, registry, log: quiet, outbound: loopbackOutbound, sensitive: [], yaml: {} })
      const mine = manager()
      const other = manager()
      await mine.start()
      await other.start()
      await mine.put('oncall', { type: 'pager', config: { team: 'raids' } })
      // Another instance changes the channel (a millisecond later: changes are ordered by their
      // time); this one syncs, and the new provider's check is slow.
      await Bun.sleep(2)
      await other.put('oncall', { type: 'pager', config: { team: 'economy' } })
      let release = () => {}
      hold = new Promise((r) => {
        release = r
      })
      const before = checks
      const syncing = mine.sync()
      while (checks === before) await Bun.sleep(1)
      hold = undefined
      await mine.setEnabled('oncall', false)
      release()
      await syncing
      expect(mine.get('oncall').enabled).toBe(false)
    } finally {
      await done()
    }
  })
})
