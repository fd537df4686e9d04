import { expect, test } from 'bun:test'
import { migrate } from '../../core/db'
import { forEachEngine, rawDb } from '../../test/helpers'
import rules from './index'
import { rulesStore } from './store'

forEachEngine((engine) => {
  test('every rule write bumps the revision other instances poll, exactly once, and answers it; a refused write does not', async () => {
    const { db, done } = await rawDb(engine)
    try {
      await migrate(db, [{ plugin: 'rules', migrations: rules.migrations ?? [] }])
      const store = rulesStore(db)
      const rev = async () => (await store.revisions()).rules ?? 0
      const rule = { id: 'r1', match: 'true', mode: 'off' as const, action: 'route' as const }
      const a = await store.createRule(rule)
      expect(a.seq).toBe(1)
      expect(await rev()).toBe(1)
      // Each write answers the revision it produced: the writer knows whether it is current.
      expect(a.rev).toBe(1)
      expect((await store.createRule({ ...rule, id: 'r2' })).seq).toBe(2)
      await expect(store.createRule(rule)).rejects.toThrow('already exists')
      expect(await rev()).toBe(2)
      expect((await store.updateRule({ ...rule, match: 'false' })).rev).toBe(3)
      await expect(store.updateRule({ ...rule, id: 'nope' })).rejects.toThrow('not found')
      expect(await rev()).toBe(3)
      expect(await store.deleteRule('r1')).toBe(4)
      await expect(store.deleteRule('r1')).rejects.toThrow('not found')
      expect(await rev()).toBe(4)
      expect((await store.listRules()).map((r) => r.rule.id)).toEqual(['r2'])
    } finally {
      await done()
    }
  })
})
