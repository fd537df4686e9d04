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

  test('a changed sketch is written at once when new, then at most once per flush interval; counters and spans with every commit', async () => {
    const r = new BehaviorRollup(undefined, undefined, 1000)
    await r.init(store.db)
    const gather = async (receivedAt: number, firstId: number, list: ReturnType<typeof events>) => {
      const b = await r.gather(list, { receivedAt, firstId })
      b.done?.()
      return b.rows as BehaviorRows
    }
    // Received at 10:00:00 (ids are receive time x 1024), two events of client hour 09:00.
    const recv = D + 10 * HOUR
    const one = await gather(
      recv,
      recv * 1024,
      events(['u1', 'x', D + 9 * HOUR], ['u2', 'x', D + 9 * HOUR + 5]),
    )
    expect(rowsOf(one.sketches, 8).map((s) => [s[3], s[4], s[5], s[7]])).toEqual([['event', 'x', 2, 1]])
    expect(rowsOf(one.counters, 9).map((c) => [c[3], c[4], c[5]])).toEqual([['event', 'x', 2]])
    expect(rowsOf(one.spans, 7)).toEqual([['g', 'prod', D + 9 * HOUR, recv, recv * 1024, recv * 1024 + 1, 2]])
    // 500 ms later: u3 changes the sketch, but it was written 500 ms ago: not yet; the counter is.
    const two = await gather(recv + 500, (recv + 500) * 1024, events(['u3', 'x', D + 9 * HOUR + 9]))
    expect(two.sketches).toEqual([])
    expect(rowsOf(two.counters, 9).map((c) => [c[4], c[5]])).toEqual([['x', 1]])
    // A second later: due, with u3 in it (version 2), beside a new sketch written at once.
    const three = await gather(recv + 1000, (recv + 1000) * 1024, events(['u4', 'y', D + 11 * HOUR]))
    expect(rowsOf(three.sketches, 8).map((s) => [s[4], s[5], s[7]])).toEqual([
      ['x', 3, 2],
      ['y', 1, 1],
    ])
    // Nothing changed since: nothing written, however long after (10 minutes).
    const four = await gather(recv + 600_000, (recv + 600_000) * 1024, events(['u1', 'x', D + 9 * HOUR]))
    expect(four.sketches).toEqual([])
    // Another receive window (10 minutes later): a span of its own for the same client hour.
    expect(rowsOf(four.spans, 7).map((s) => [s[2], s[3]])).toEqual([[D + 9 * HOUR, recv + 600_000]])
  })
})
