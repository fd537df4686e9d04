import { describe, expect, test } from 'bun:test'
import { NotFound } from '../../core/http'
import { loopbackOutbound } from '../../test/helpers'
import { PredictionLog } from './log'
import { Serving } from './serving'
import type { ModelRow, ModelsStore } from './store'

/**
 * The deployment cache of Serving, on a store that counts its reads and a clock the test moves:
 * fresh entries cost no read, entries past the cache time are served while one read refreshes
 * them, older ones wait for the read.
 */
const artifact = {
  type: 'CLASSIFICATION',
  algorithm: 'logistic_regression',
  features: ['x'],
  classes: ['no', 'yes'],
  threshold: 0.5,
  model: { kind: 'logistic_regression', bias: 0, weights: [1], mean: [0], std: [1] },
  profile: [],
}

function fixture() {
  let clock = 1_000_000
  let status = 'DEPLOYED'
  let reads = 0
  let exists = true
  /** Resolves the read under way (reads wait for the test to let them through when held). */
  let held: Array<() => void> | undefined
  const row = (): ModelRow =>
    ({
      id: 'm1',
      status,
      deployed_version: status === 'ARCHIVED' ? null : 1,
      canary_version: null,
      canary_percent: null,
      ab_test: null,
      serving_endpoint: 'builtin',
    }) as unknown as ModelRow
  const models = {
    async row(id: string) {
      reads++
      if (held) await new Promise<void>((r) => held!.push(r))
      if (!exists) throw new NotFound(`model '${id}' not found`)
      return row()
    },
    async version() {
      return { artifact: JSON.stringify(artifact) }
    },
  } as unknown as ModelsStore
  const log = new PredictionLog(
    async () => undefined,
    1000,
    100,
    () => undefined,
  )
  const serving = new Serving(models, log, {
    cacheTtlMs: 1000,
    canaryPercent: 10,
    forwardTimeoutMs: 100,
    outbound: loopbackOutbound,
    now: () => clock,
  })
  const predict = () => serving.predict('m1', { x: 2 })
  return {
    serving,
    predict,
    reads: () => reads,
    tick: (ms: number) => {
      clock += ms
    },
    archive: () => {
      status = 'ARCHIVED'
    },
    remove: () => {
      exists = false
    },
    hold: () => {
      held = []
    },
    release: () => {
      const h = held ?? []
      held = undefined
      for (const r of h) r()
    },
    close: () => log.close(),
  }
}

/** Predicts until the answer is refused (the background read landed), for at most 5 s: its status. */
async function untilRefused(predict: () => Promise<unknown>): Promise<number> {
  const deadline = Date.now() + 5000
  let status = 200
  while (status === 200 && Date.now() < deadline) {
    status = await predict().then(
      () => 200,
      (e) => e.status,
    )
    await Bun.sleep(1)
  }
  return status
}

describe('ml deployment cache', () => {
  test('fresh: no read; past the cache time: served as cached while one read refreshes it', async () => {
    const f = fixture()
    expect((await f.predict()).prediction).toBe('yes')
    expect(f.reads()).toBe(1)
    f.tick(999)
    await f.predict()
    expect(f.reads()).toBe(1)
    // Archived in the store without a change notice (a notice would drop the entry at once).
    f.archive()
    f.tick(1)
    f.hold()
    // Past the cache time: the cached deployment answers, and one read starts, however many ask.
    expect((await f.predict()).prediction).toBe('yes')
    expect((await f.predict()).prediction).toBe('yes')
    expect(f.reads()).toBe(2)
    f.release()
    // The refreshed entry answers from then on.
    expect(await untilRefused(f.predict)).toBe(409)
    expect(f.reads()).toBe(2)
    await f.close()
  })

  test('twice the cache time or older: the request waits for the read', async () => {
    const f = fixture()
    await f.predict()
    f.archive()
    f.tick(2000)
    await expect(f.predict()).rejects.toMatchObject({ status: 409 })
    expect(f.reads()).toBe(2)
    await f.close()
  })

  test('a refresh that fails drops the entry: the next request reads and answers 404', async () => {
    const f = fixture()
    await f.predict()
    f.remove()
    f.tick(1500)
    // Served from the entry while the read fails.
    expect((await f.predict()).prediction).toBe('yes')
    expect(await untilRefused(f.predict)).toBe(404)
    await f.close()
  })

  test('invalidate drops the entry at once', async () => {
    const f = fixture()
    await f.predict()
    f.archive()
    f.serving.invalidate('m1')
    await expect(f.predict()).rejects.toMatchObject({ status: 409 })
    await f.close()
  })
})
