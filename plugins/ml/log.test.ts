import { describe, expect, test } from 'bun:test'
import { type PredictionBatch, PredictionLog, type Served, packBatch, unpackBatch } from './log'

/** The prediction log's batches, in columns: what a sink receives and what crosses to the thread. */
describe('ml prediction log', () => {
  const a: Served = { modelId: 'm', servedBy: 'm', version: 1, arm: 'default' }
  const b: Served = { modelId: 'm', servedBy: 'base', version: 3, arm: 'baseline' }
  const rows = (batch: PredictionBatch) =>
    Array.from({ length: batch.n }, (_, i) => ({
      served: batch.served[batch.arm[i]],
      id: batch.ids[i],
      entityId: batch.entityIds[i],
      prediction: batch.predictions[i],
      probability: batch.probability[i],
      features: Array.from(batch.features.subarray(i ? batch.featureEnd[i - 1] : 0, batch.featureEnd[i])),
      latencyUs: batch.latencyUs[i],
      createdAt: batch.createdAt[i],
    }))

  test('a batch grows past its first room up to maxRows, then is flushed whole, every row intact', async () => {
    const got: PredictionBatch[] = []
    const log = new PredictionLog(
      async (batch) => {
        got.push(batch)
      },
      60_000,
      1000,
      (e) => {
        throw e
      },
    )
    // Features of varying length (models differ), so the features column grows too.
    const expected = []
    for (let i = 0; i < 1300; i++) {
      const served = i % 3 ? a : b
      const features = Array.from({ length: 1 + (i % 12) }, (_, j) => i + j / 10)
      log.add(
        served,
        `id-${i}`,
        i % 2 ? `e-${i}` : null,
        i % 5 ? 'yes' : 'no',
        i / 1300,
        features,
        i * 2,
        1e12 + i,
      )
      expected.push({
        served,
        id: `id-${i}`,
        entityId: i % 2 ? `e-${i}` : null,
        prediction: i % 5 ? 'yes' : 'no',
        probability: i / 1300,
        features,
        latencyUs: i * 2,
        createdAt: 1e12 + i,
      })
    }
    await log.flush()
    // maxRows reached at 1000: that batch went at once; the other 300 with the flush.
    expect(got.map((g) => g.n)).toEqual([1000, 300])
    expect(got[0].served).toEqual([b, a])
    expect([...rows(got[0]), ...rows(got[1])]).toEqual(expected)
    // Nothing pending: another flush sends nothing.
    await log.close()
    expect(got.length).toBe(2)
  })

  test('packed for the log thread and unpacked there, a batch is the same', async () => {
    let batch: PredictionBatch | undefined
    const log = new PredictionLog(
      async (x) => {
        batch = x
      },
      60_000,
      100,
      () => undefined,
    )
    log.add(a, 'p1', 'player "7"\n', 'yes', 0.75, [1.5, -2, 1e21], 12.5, 1e12)
    log.add(b, 'p2', null, 'no', 0.25, [0], 3, 1e12 + 1)
    await log.flush()
    const before = rows(batch!)
    const { packed, transfer } = packBatch(batch!)
    // What postMessage does with the transfer list: the buffers move.
    const moved = structuredClone(packed, { transfer })
    expect(rows(unpackBatch(moved))).toEqual(before)
    expect(batch!.probability.byteLength).toBe(0)
  })
})
