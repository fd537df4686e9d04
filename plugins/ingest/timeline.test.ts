import { expect, test } from 'bun:test'
import type { Param } from '../../core/db'
import { forEachEngine } from '../../test/helpers'
import { insertMany } from './sql'
import { timelineRows } from './store'
import { migratedStore } from './testing'

const COLS = ['id', 'received_at', 'game_id', 'env', 'event', 'ts', 'user_id', 'props'] as const

// The light read funnels and paths walk (`IngestService.timeline`), over rows written by hand.
forEachEngine((engine) => {
  const store = migratedStore(engine)
  const T = 1_795_000_000_000
  // id, game, env, event, ts, user
  const rows: Array<[number, string, string, string, number, string | null]> = [
    [101, 'g', 'prod', 'a', T, 'u1'],
    [102, 'g', 'prod', 'b', T + 5, 'u2'],
    [103, 'g', 'prod', 'a', T + 9, null], // no user: left out
    [104, 'g', 'qa', 'a', T + 1, 'u1'], // another environment
    [105, 'h', 'prod', 'a', T + 1, 'u1'], // another game
    [106, 'g', 'prod', 'c', T + 10, 'u1'], // at `to`: outside [from, to)
    [107, 'g', 'prod', 'b', T - 1, 'u3'], // before `from`
    [108, 'g', 'prod', 'c', T + 3, 'u3'],
    [109, 'g', 'prod', 'a', T + 2, 'u 4 ✓'],
  ]
  const q = { gameId: 'g', env: 'prod', from: T, to: T + 10, afterId: 100, toId: 200, limit: 100 }

  test('id, user, name and time only, of the range [from, to) with a user, in id order', async () => {
    const params: Param[] = []
    for (const [id, g, env, event, ts, user] of rows) params.push(id, T, g, env, event, ts, user, '{"x":1}')
    await store.db.tx((tx) => insertMany(tx, 'ingest_events', COLS, params))
    expect(await timelineRows(store.db, q)).toEqual([
      { id: 101, userId: 'u1', event: 'a', ts: T },
      { id: 102, userId: 'u2', event: 'b', ts: T + 5 },
      { id: 108, userId: 'u3', event: 'c', ts: T + 3 },
      { id: 109, userId: 'u 4 ✓', event: 'a', ts: T + 2 },
    ])
  })

  test('names narrow; ids (afterId, toId] and the limit page it', async () => {
    const ids = async (o: Partial<typeof q> & { events?: string[] }) =>
      (await timelineRows(store.db, { ...q, ...o })).map((r) => r.id)
    expect(await ids({ events: ['a', 'c'] })).toEqual([101, 108, 109])
    expect(await ids({ events: ['zzz'] })).toEqual([])
    expect(await ids({ afterId: 101, toId: 108 })).toEqual([102, 108])
    expect(await ids({ limit: 2 })).toEqual([101, 102])
    expect(await ids({ afterId: 102, limit: 2 })).toEqual([108, 109])
  })
})
