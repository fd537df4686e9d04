import { afterEach, expect, test } from 'bun:test'
import type { Db } from '../../core/db'
import { rowsByKeys } from '../../core/db/keyed'
import { forEachEngine, rawDb } from '../helpers'

/**
 * Lookups of rows by a list of keys in a scope (core/db/keyed.ts), on every engine: each key
 * held answered, keys repeated, absent or past one statement's worth, a key with several rows.
 * On PostgreSQL, a table never analyzed and grown large is read by its index: as an `IN` list,
 * it was read whole at every lookup (the refunds' order lookup of the ingest benchmark).
 */
const GAME = 'game-7e21'
const cleanups: Array<() => Promise<void>> = []
afterEach(async () => {
  for (const c of cleanups.splice(0)) await c()
})

async function ordersTable(engine: Parameters<typeof rawDb>[0]): Promise<Db> {
  const { db, done } = await rawDb(engine)
  cleanups.push(done)
  await db.exec(`CREATE TABLE orders (game_id VARCHAR(64) NOT NULL, env VARCHAR(16) NOT NULL,
    order_id VARCHAR(64) NOT NULL, amount BIGINT NOT NULL, PRIMARY KEY (game_id, env, order_id))
    ${engine === 'postgres' ? 'WITH (autovacuum_enabled = false)' : ''}`)
  return db
}

const byOrder = (db: Db, keys: string[], env = 'live') =>
  rowsByKeys<{ order_id: string; amount: number }>(db, {
    table: 'orders',
    cols: ['order_id', 'amount'],
    scope: [
      ['game_id', GAME],
      ['env', env],
    ],
    key: 'order_id',
    keys,
  })

forEachEngine((engine) => {
  test('every key held is answered once, whatever repeats, is absent or lies past a statement', async () => {
    const db = await ordersTable(engine)
    const values: unknown[] = []
    for (let i = 1; i <= 1500; i++) values.push(GAME, 'live', `o-${i}`, i * 3)
    // The same order ids in another environment and another game: outside the scope.
    values.push(GAME, 'test', 'o-1', 999, 'game-other', 'live', 'o-2', 999)
    for (let i = 0; i < values.length; i += 400)
      await db.run(
        `INSERT INTO orders (game_id, env, order_id, amount) VALUES ${Array.from(
          { length: Math.min(400, values.length - i) / 4 },
          () => '(?, ?, ?, ?)',
        ).join(', ')}`,
        values.slice(i, i + 400) as string[],
      )
    const asked = ['o-1', 'o-2', 'o-2', 'absent', 'o-1500', 'o-\'quoted"', 'o-7']
    const rows = await byOrder(db, asked)
    expect(new Map(rows.map((r) => [r.order_id, Number(r.amount)]))).toEqual(
      new Map([
        ['o-1', 3],
        ['o-2', 6],
        ['o-1500', 4500],
        ['o-7', 21],
      ]),
    )
    expect(rows.length).toBe(4)
    // 1,300 keys: three statements' worth, every one answered once.
    const many = Array.from({ length: 1300 }, (_, i) => `o-${i + 101}`)
    const found = await byOrder(db, many)
    expect(found.length).toBe(1300)
    expect(new Set(found.map((r) => r.order_id))).toEqual(new Set(many))
    expect(await byOrder(db, [])).toEqual([])
    expect((await byOrder(db, ['o-1'], 'test')).map((r) => Number(r.amount))).toEqual([999])
  })

  test('a key with several rows (only whether it is held matters) is answered', async () => {
    const { db, done } = await rawDb(engine)
    cleanups.push(done)
    await db.exec(
      'CREATE TABLE seen (game_id VARCHAR(64) NOT NULL, env VARCHAR(16) NOT NULL, user_id VARCHAR(64) NOT NULL, n INTEGER NOT NULL)',
    )
    await db.exec('CREATE INDEX seen_user ON seen (game_id, env, user_id)')
    for (const [u, n] of [
      ['u1', 1],
      ['u1', 2],
      ['u2', 3],
    ] as const)
      await db.run('INSERT INTO seen (game_id, env, user_id, n) VALUES (?, ?, ?, ?)', [GAME, 'live', u, n])
    const rows = await rowsByKeys<{ user_id: string }>(db, {
      table: 'seen',
      cols: ['user_id'],
      scope: [
        ['game_id', GAME],
        ['env', 'live'],
      ],
      key: 'user_id',
      keys: ['u1', 'u2', 'u3'],
    })
    expect(new Set(rows.map((r) => r.user_id))).toEqual(new Set(['u1', 'u2']))
  })

  if (engine === 'postgres')
    test('a table never analyzed, grown large, is read by its index', async () => {
      const db = await ordersTable(engine)
      await db.run(`INSERT INTO orders SELECT ?, 'live', 'o-' || i, i FROM generate_series(1, 150000) i`, [
        GAME,
      ])
      /** The table's whole reads, and the rows its indexes gave, as the statistics say once flushed. */
      const reads = async () => {
        await db.get('SELECT pg_stat_force_next_flush()')
        const r = await db.get<{ seq: number; tuples: number }>(
          `SELECT t.seq_scan AS seq, (SELECT SUM(i.idx_tup_read) FROM pg_stat_user_indexes i WHERE i.relid = t.relid) AS tuples
           FROM pg_stat_user_tables t WHERE t.schemaname = current_schema() AND t.relname = 'orders'`,
        )
        return { seq: Number(r?.seq), tuples: Number(r?.tuples) }
      }
      const before = await reads()
      const keys = Array.from({ length: 500 }, (_, i) => `o-${i * 300 + 1}`)
      // More runs than PostgreSQL's five planned with their values before it weighs a generic plan.
      for (let run = 0; run < 7; run++) expect((await byOrder(db, [...keys, `x-${run}`])).length).toBe(500)
      const after = await reads()
      expect(after.seq - before.seq).toBe(0)
      // A row of the index a key held: 3,500 in seven lookups, not the scope's 150,000 each.
      expect(after.tuples - before.tuples).toBeLessThanOrEqual(7 * 500)
    })
})
