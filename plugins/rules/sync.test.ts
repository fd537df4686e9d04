import { expect, test } from 'bun:test'
import { migrate } from '../../core/db'
import { createLogger } from '../../core/log'
import { forEachEngine, rawDb } from '../../test/helpers'
import rules from './index'
import { rulesRuntime } from './runtime'
import { type GroupRecord, type RuleRecord, rulesStore } from './store'

// A sync reads the store while requests go on (on PostgreSQL its reads wait on the network). A rule
// this instance saved meanwhile is not in what it read: installing that read dropped the rule and
// its shadow statistics until the next sync (the console's shadow statistics showed 0 in CI). A
// group saved meanwhile was lost the same way: notifications to it found no members until then.

const quiet = createLogger({ level: 'error', format: 'json', sensitive_fields: [] } as never)
const alert = {
  type: 'server_down',
  level: 'critical',
  title: 'Lobby down',
  body: '',
  params: { region: 'eu' },
}

forEachEngine((engine) => {
  test("a sync that read the store before this instance's own save keeps the saved rule and its shadow statistics", async () => {
    const { db, done } = await rawDb(engine)
    try {
      await migrate(db, [{ plugin: 'rules', migrations: rules.migrations ?? [] }])
      const store = rulesStore(db)
      let hold: Promise<void> | undefined
      let reads = 0
      const runtime = rulesRuntime({
        store: {
          ...store,
          async listRules(): Promise<RuleRecord[]> {
            const read = await store.listRules()
            reads++
            await hold
            return read
          },
        },
        notify: {} as never,
        log: quiet,
      })
      const shadow = { match: 'params.region == "eu"', mode: 'shadow' as const, action: 'route' as const }
      await store.createRule({ ...shadow, id: 'first' })
      await runtime.sync()
      // Another instance saves a rule: the next sync reads the store again.
      await store.createRule({ ...shadow, id: 'remote' })
      let release = () => {}
      hold = new Promise((r) => {
        release = r
      })
      const syncing = runtime.sync()
      while (reads < 2) await Bun.sleep(1)
      // Meanwhile this instance saves a rule, and a notification meets it.
      runtime.put(await store.createRule({ ...shadow, id: 'local' }))
      runtime.engine.evaluate(alert, false)
      expect(runtime.engine.shadowHits('local')).toBe(1)
      hold = undefined
      release()
      await syncing
      expect(runtime.engine.list().map((c) => c.rule.id)).toEqual(['first', 'remote', 'local'])
      expect(runtime.engine.shadowHits('local')).toBe(1)
      // The read that met the save was read again.
      expect(reads).toBe(3)
    } finally {
      await done()
    }
  })
  test("a sync that read the store before this instance's own group save keeps the saved group", async () => {
    const { db, done } = await rawDb(engine)
    try {
      await migrate(db, [{ plugin: 'rules', migrations: rules.migrations ?? [] }])
      const store = rulesStore(db)
      let hold: Promise<void> | undefined
      let reads = 0
      const runtime = rulesRuntime({
        store: {
          ...store,
          async listGroups(): Promise<GroupRecord[]> {
            const read = await store.listGroups()
            reads++
            await hold
            return read
          },
        },
        notify: {} as never,
        log: quiet,
      })
      const members = (who: string) => [{ channel: 'email', recipients: [`${who}@studio.example`] }]
      await store.createGroup({ id: 'first', members: members('ana') })
      await runtime.sync()
      // Another instance saves a group: the next sync reads the groups again.
      await store.createGroup({ id: 'remote', members: members('bo') })
      let release = () => {}
      hold = new Promise((r) => {
        release = r
      })
      const syncing = runtime.sync()
      while (reads < 2) await Bun.sleep(1)
      // Meanwhile this instance saves a group and removes one.
      runtime.putGroup(await store.createGroup({ id: 'local', members: members('cy') }))
      await store.deleteGroup('first')
      runtime.removeGroup('first')
      expect(runtime.group('local')).toEqual(members('cy'))
      hold = undefined
      release()
      await syncing
      expect(runtime.group('local')).toEqual(members('cy'))
      expect(runtime.group('remote')).toEqual(members('bo'))
      expect(runtime.group('first')).toBeUndefined()
      // The read that met the writes was read again.
      expect(reads).toBe(3)
    } finally {
      await done()
    }
  })
})
