import { expect, test } from 'bun:test'
import type { Param } from '../../../core/db'
import { forEachEngine } from '../../../test/helpers'
import { validateEvents } from '../../ingest/signed/validate'
import { migratedStore } from '../../ingest/testing'
import { analyticsTables } from '../store/testing'
import { BehaviorRollup, type BehaviorRows } from './behavior-rollup'

const D = Date.UTC(2026, 0, 12)
const HOUR = 3_600_000
const events = (...list: Array<[user: string, event: string, ts: number]>) =>
  validateEvents(
    list.map(([uid, event, ts]) => ({ event, uid, ts: String(ts), game_id: 'g', env: 'prod' })),
    { payments: false },
  ).events
/** The rows of one table, `width` values each. */
const rowsOf = (params: Param[], width: number) =>
  Array.from({ length: params.length / width }, (_, i) => params.slice(i * width, (i + 1) * width))

forEachEngine((engine) => {
  const store = migratedStore(engine, [analyticsTables])

  test('every sketch a batch changed is written by that batch; counters and spans with every batch', async () => {
    const r = new BehaviorRollup()
    await r.init(store.db)
    // Log rows carry their ids (receive time x 1024 plus a counter).
    const gather = async (firstId: number, list: ReturnType<typeof events>) => {
      const b = await r.gather(
        list.map((e, i) => ({ ...e, id: firstId + i, receivedAt: Math.floor(firstId / 1024) })),
      )
      b.done?.()
      return b.rows as BehaviorRows
    }
    // Received at 10:00:00, two events of client hour 09:00.
    const recv = D + 10 * HOUR
    const one = await gather(recv * 1024, events(['u1', 'x', D + 9 * HOUR], ['u2', 'x', D + 9 * HOUR + 5]))
    expect(rowsOf(one.sketches, 8).map((s) => [s[3], s[4], s[5], s[7]])).toEqual([['event', 'x', 2, 1]])
    expect(rowsOf(one.counters, 9).map((c) => [c[3], c[4], c[5]])).toEqual([['event', 'x', 2]])
    expect(rowsOf(one.spans, 7)).toEqual([['g', 'prod', D + 9 * HOUR, recv, recv * 1024, recv * 1024 + 1, 2]])
    // 500 ms later: u3 changes the sketch, written at once (version 2) with the counter.
    const two = await gather((recv + 500) * 1024, events(['u3', 'x', D + 9 * HOUR + 9]))
    expect(rowsOf(two.sketches, 8).map((s) => [s[4], s[5], s[7]])).toEqual([['x', 3, 2]])
    expect(rowsOf(two.counters, 9).map((c) => [c[4], c[5]])).toEqual([['x', 1]])
    // A user the sketch holds already changes no register: no sketch row, the counter still.
    const four = await gather((recv + 600_000) * 1024, events(['u1', 'x', D + 9 * HOUR]))
    expect(four.sketches).toEqual([])
    expect(rowsOf(four.counters, 9).map((c) => [c[4], c[5]])).toEqual([['x', 1]])
    // Another receive window (10 minutes later): a span of its own for the same client hour.
    expect(rowsOf(four.spans, 7).map((s) => [s[2], s[3]])).toEqual([[D + 9 * HOUR, recv + 600_000]])
  })
})
