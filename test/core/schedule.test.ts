import { expect, test } from 'bun:test'
import { createLogger } from '../../core/log'
import { Scheduler } from '../../core/schedule'

const log = createLogger({ level: 'error', sensitive_fields: [] } as never, () => undefined)

test('a scheduled job never overlaps itself and stops with its signal aborted', async () => {
  const s = new Scheduler(log)
  let active = 0
  let most = 0
  let runs = 0
  let seen: AbortSignal | undefined
  s.add(
    'slow',
    1,
    async (signal) => {
      active++
      most = Math.max(most, active)
      runs++
      await new Promise((r) => setTimeout(r, 5))
      seen = signal
      active--
    },
    { runAtStart: true },
  )
  s.start()
  while (runs < 4) await new Promise((r) => setTimeout(r, 2))
  const stopping = s.stop()
  await stopping
  const after = runs
  await new Promise((r) => setTimeout(r, 20))
  expect(most).toBe(1)
  expect(runs).toBe(after)
  expect(active).toBe(0)
  expect(seen?.aborted).toBe(true)
})

test('a name is registered once; a failing job runs again at its next tick', async () => {
  const s = new Scheduler(log)
  let runs = 0
  s.add('flaky', 1, () => {
    runs++
    throw new Error('boom')
  })
  expect(() => s.add('flaky', 1, () => undefined)).toThrow("'flaky' registered twice")
  s.start()
  while (runs < 3) await new Promise((r) => setTimeout(r, 2))
  await s.stop()
  expect(runs).toBeGreaterThanOrEqual(3)
})
