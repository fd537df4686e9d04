import { expect, test } from 'bun:test'
import { migrate } from '../../core/db'
import { createLogger } from '../../core/log'
import { heldReads } from '../../test/held-reads'
import { type Engine, forEachEngine, rawDb } from '../../test/helpers'
import rules from './index'
import { rulesRuntime } from './runtime'
import { rulesStore } from './store'

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

/**
 * A runtime whose reads of `table` can be held (`heldReads`), and the store the test writes
 * through, as this instance's requests and another instance would; `run` gets both.
 */
async function withRuntime(
  engine: Engine,
  table: 'rules_rules' | 'rules_groups',
  run: (o: {
    runtime: ReturnType<typeof rulesRuntime>
    store: ReturnType<typeof rulesStore>
    held: ReturnType<typeof heldReads>
  }) => Promise<void>,
) {
  const { db, done } = await rawDb(engine)
  try {
    await migrate(db, [{ plugin: 'rules', migrations: rules.migrations ?? [] }])
    const held = heldReads(db, 'all', (sql) => sql.includes(`FROM ${table}`))
    const runtime = rulesRuntime({ store: rulesStore(held.db), notify: {} as never, log: quiet })
    await run({ runtime, store: rulesStore(db), held })
  } finally {
    await done()
  }
}

forEachEngine((engine) => {
  test("a sync that read the store before this instance's own save keeps the saved rule and its shadow statistics", () =>
    withRuntime(engine, 'rules_rules', async ({ runtime, store, held }) => {
      const shadow = { match: 'params.region == "eu"', mode: 'shadow' as const, action: 'route' as const }
      await store.createRule({ ...shadow, id: 'first' })
      await runtime.sync()
      // Another instance saves a rule: the next sync reads the store again.
      await store.createRule({ ...shadow, id: 'remote' })
      const release = held.hold()
      const syncing = runtime.sync()
      await held.reached(2)
      // Meanwhile this instance saves a rule, and a notification meets it.
      runtime.put(await store.createRule({ ...shadow, id: 'local' }))
      runtime.engine.evaluate(alert, false)
      expect(runtime.engine.shadowHits('local')).toBe(1)
      release()
      await syncing
      expect(runtime.engine.list().map((c) => c.rule.id)).toEqual(['first', 'remote', 'local'])
      expect(runtime.engine.shadowHits('local')).toBe(1)
      // The read that met the save was read again.
      expect(held.reads()).toBe(3)
    }))

  test("a sync that read the store before this instance's own group save keeps the saved group", () =>
    withRuntime(engine, 'rules_groups', async ({ runtime, store, held }) => {
      const members = (who: string) => [{ channel: 'email', recipients: [`${who}@studio.example`] }]
      await store.createGroup({ id: 'first', members: members('ana') })
      await runtime.sync()
      // Another instance saves a group: the next sync reads the groups again.
      await store.createGroup({ id: 'remote', members: members('bo') })
      const release = held.hold()
      const syncing = runtime.sync()
      await held.reached(2)
      // Meanwhile this instance saves a group and removes one.
      runtime.putGroup(await store.createGroup({ id: 'local', members: members('cy') }))
      runtime.removeGroup('first', await store.deleteGroup('first'))
      expect(runtime.group('local')).toEqual(members('cy'))
      release()
      await syncing
      expect(runtime.group('local')).toEqual(members('cy'))
      expect(runtime.group('remote')).toEqual(members('bo'))
      expect(runtime.group('first')).toBeUndefined()
      // The read that met the writes was read again.
      expect(held.reads()).toBe(3)
    }))
})
