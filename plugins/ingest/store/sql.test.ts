import { expect, test } from 'bun:test'
import type { Param } from '../../../core/db'
import { forEachEngine } from '../../../test/helpers'
import { migratedStore } from '../testing'
import { insertMany } from './sql'

/** A table named the way rollups name theirs: with its BIGINT columns (created by ingest 001, renamed by analytics). */
const FIRST_SEEN = { name: 'ingest_first_seen', bigint: ['first_ts'] }

const COLS = ['id', 'received_at', 'game_id', 'env', 'event', 'ts', 'user_id', 'session_id', 'props'] as const
const tricky = [
  'plain',
  '',
  'NULL',
  'null',
  'a,b',
  '{braces}',
  'quote " inside',
  'back\\slash \\" both',
  "single ' quote",
  'tab\tnew\nline',
  'ünïcødé ✓ 🎮',
  '  spaces  ',
  'control \u0001\u001f chars',
  'literal \\u0000 and \\ud800 text',
  '[1, "json", {"a": null}]',
]

forEachEngine((engine) => {
  const store = migratedStore(engine)

  test('insertMany stores every text, null and 53-bit number exactly as given', async () => {
    const params: Param[] = []
    tricky.forEach((text, i) =>
      params.push(
        2 ** 52 + i,
        1_795_000_000_000 + i,
        'g',
        'prod',
        text,
        1 - i,
        i % 2 ? null : text,
        i % 3 ? text : null,
        JSON.stringify({ text }),
      ),
    )
    await store.db.tx((tx) => insertMany(tx, 'ingest_events', COLS, params))
    const rows = await store.db.all<Record<string, unknown>>(
      `SELECT ${COLS.join(', ')} FROM ingest_events WHERE game_id = 'g' ORDER BY id`,
    )
    const got: unknown[][] = rows.map((r) =>
      COLS.map((c) => (typeof r[c] === 'string' || r[c] === null ? r[c] : Number(r[c]))),
    )
    expect(got).toEqual(tricky.map((_, i) => params.slice(i * COLS.length, (i + 1) * COLS.length)))
  })

  test('the same table written with its columns in another order gets a statement of its own', async () => {
    const firstSeen = (cols: string[], params: Param[]) =>
      store.db.tx((tx) => insertMany(tx, FIRST_SEEN, cols, params))
    await firstSeen(['game_id', 'env', 'user_id', 'first_ts'], ['cols', 'p', 'u1', 1])
    await firstSeen(['user_id', 'first_ts', 'game_id', 'env'], ['u2', 2, 'cols', 'p'])
    const rows = await store.db.all<{ user_id: string; first_ts: number }>(
      "SELECT user_id, first_ts FROM ingest_first_seen WHERE game_id = 'cols' ORDER BY first_ts",
    )
    expect(rows.map((r) => [r.user_id, Number(r.first_ts)])).toEqual([
      ['u1', 1],
      ['u2', 2],
    ])
  })

  test('a lone surrogate is stored as U+FFFD on both engines, its neighbours as given', async () => {
    const cols = ['game_id', 'env', 'user_id', 'first_ts']
    await store.db.tx((tx) =>
      insertMany(tx, FIRST_SEEN, cols, ['lone', 'p', 'a\ud800b', 1, 'lone', 'p', 'pair 🎮 \u0001', 2]),
    )
    const rows = await store.db.all<{ user_id: string }>(
      "SELECT user_id FROM ingest_first_seen WHERE game_id = 'lone' ORDER BY first_ts",
    )
    expect(rows.map((r) => r.user_id)).toEqual(['a\ufffdb', 'pair 🎮 \u0001'])
  })

  test('ON CONFLICT and RETURNING: only new keys come back, in the order given', async () => {
    const cols = ['game_id', 'env', 'user_id', 'first_ts']
    const tail = 'ON CONFLICT (game_id, env, user_id) DO NOTHING RETURNING user_id, first_ts'
    const first = await store.db.tx((tx) =>
      insertMany(tx, FIRST_SEEN, cols, ['g', 'p', 'b"1', 10, 'g', 'p', 'c,2', 20], tail),
    )
    expect(first.map((r) => [r.user_id, Number(r.first_ts)])).toEqual([
      ['b"1', 10],
      ['c,2', 20],
    ])
    const again = await store.db.tx((tx) =>
      insertMany(tx, FIRST_SEEN, cols, ['g', 'p', 'a\\0', 5, 'g', 'p', 'b"1', 1, 'g', 'p', 'd', 7], tail),
    )
    expect(again.map((r) => r.user_id)).toEqual(['a\\0', 'd'])
    const stored = await store.db.all<{ user_id: string; first_ts: number }>(
      "SELECT user_id, first_ts FROM ingest_first_seen WHERE game_id = 'g' ORDER BY user_id",
    )
    expect(stored.map((r) => [r.user_id, Number(r.first_ts)])).toEqual([
      ['a\\0', 5],
      ['b"1', 10],
      ['c,2', 20],
      ['d', 7],
    ])
  })

  test.skipIf(engine !== 'postgres')(
    'a table without declared column types is refused rather than guessed',
    async () => {
      await expect(store.db.tx((tx) => insertMany(tx, 'ingest_nope', ['a'], ['x']))).rejects.toThrow(
        /no column types/,
      )
    },
  )
})
