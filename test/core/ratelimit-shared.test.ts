import { expect, test } from 'bun:test'
import { SharedRateLimiter } from '../../core/ratelimit'
import { MemoryState } from '../../core/shared'

// The platform limit counted in the shared state (core/shared.ts); the stores themselves are
// exercised in test/shared.test.ts and across instances in test/shared-budgets.test.ts.

test('counts both windows in the shared counters and gives a refused request its counts back', async () => {
  const state = new MemoryState()
  const warnings: string[] = []
  const l = new SharedRateLimiter(3, 0, state, { warn: (m) => warnings.push(m) })
  expect((await l.hit('user:a')).remaining).toBe(2)
  expect((await l.hit('user:a')).remaining).toBe(1)
  expect((await l.hit('user:a')).remaining).toBe(0)
  await expect(l.hit('user:a')).rejects.toMatchObject({ status: 429 })
  // A second limiter on the same state (another instance) sees the budget spent.
  const other = new SharedRateLimiter(3, 0, state, { warn: (m) => warnings.push(m) })
  await expect(other.hit('user:a')).rejects.toMatchObject({ status: 429 })
  expect((await other.hit('user:b')).remaining).toBe(2)
  const minute = Math.floor(Date.now() / 60_000)
  expect(state.get([`rl:m:user:a:${minute}`])[0]).toBe(3)
  expect(warnings).toEqual([])
})

test('the burst window refuses past its limit per second', async () => {
  const l = new SharedRateLimiter(100, 2, new MemoryState(), { warn: () => undefined })
  const second = Math.floor(Date.now() / 1000)
  const outcomes: Array<number | string> = []
  for (let i = 0; i < 3; i++)
    outcomes.push(
      await l.hit('k').then(
        (d) => d.remaining,
        (e) => e.status,
      ),
    )
  // All three within one second unless the second turned over between them.
  if (Math.floor(Date.now() / 1000) === second) expect(outcomes).toEqual([99, 98, 429])
})

test('shared counters that fail: this instance counts alone, warns once, and refuses nothing for it', async () => {
  let calls = 0
  const failing = {
    addAll: async () => {
      calls++
      throw new Error('connect ECONNREFUSED')
    },
  }
  const warnings: string[] = []
  const l = new SharedRateLimiter(2, 0, failing, { warn: (m) => warnings.push(m) })
  expect((await l.hit('user:c')).remaining).toBe(1)
  expect((await l.hit('user:c')).remaining).toBe(0)
  await expect(l.hit('user:c')).rejects.toMatchObject({ status: 429 })
  expect((await l.hit('user:d')).remaining).toBe(1)
  expect(warnings).toHaveLength(1)
  expect(warnings[0]).toContain('counting in this instance alone')
  // Not asked again within the second after a failure: a request does not wait on it each time.
  expect(calls).toBe(1)
})
