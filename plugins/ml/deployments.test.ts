import { expect, test } from 'bun:test'
import { DeploymentCache } from './deployments'
import type { ModelRow } from './store'

// A prediction reads the model's deployment from a cache. A read under way when the model was
// deployed again (or rolled back) must not cache the row from before: the older version would
// answer for a cache time.

test('a deployment read under way when its model changed is read again, not cached', async () => {
  const rows: Record<string, Partial<ModelRow>> = { churn: { id: 'churn', version: 3, ab_test: null } }
  let hold: Promise<void> | undefined
  let reads = 0
  const cache = new DeploymentCache<never>(
    async (id) => {
      const row = { ...rows[id] } as ModelRow
      reads++
      await hold
      return row
    },
    60_000,
    () => 1_000,
  )
  let release = () => {}
  hold = new Promise((r) => {
    release = r
  })
  const reading = cache.get('churn')
  while (reads < 1) await Bun.sleep(1)
  hold = undefined
  // Rolled back to version 2 while version 3 was being read.
  rows.churn = { id: 'churn', version: 2, ab_test: null }
  cache.forget('churn')
  release()
  expect((await reading).row.version).toBe(2)
  expect((await cache.get('churn')).row.version).toBe(2)
  expect(reads).toBe(2)
})
