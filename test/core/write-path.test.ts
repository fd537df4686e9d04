import { expect, test } from 'bun:test'
import { insertMany } from '../../core/db/bulk'
import { GroupCommit } from '../../core/db/group-commit'
import { forEachEngine, rawDb, until } from '../helpers'

/** The one write path of core/db: group commit and bulk insert, on both engines. */

forEachEngine((engine) => {
  const withTable = async (fn: (db: Awaited<ReturnType<typeof rawDb>>['db']) => Promise<void>) => {
    const { db, done } = await rawDb(engine)
    try {
      await db.exec('CREATE TABLE wp (id TEXT PRIMARY KEY, n BIGINT NOT NULL, note TEXT)')
      await fn(db)
    } finally {
      await done()
    }
  }

  test('callers queued together share one transaction, and none is answered before it committed', async () =>
    withTable(async (db) => {
      const flushes: string[][] = []
      const gates: Array<() => void> = []
      const g = new GroupCommit<string>(async (ids) => {
        flushes.push(ids)
        await new Promise<void>((r) => gates.push(r))
        await db.tx((tx) =>
          insertMany(
            tx,
            'wp',
            ['id', 'n', 'note'],
            ids.flatMap((id, i) => [id, i, null]),
          ),
        )
      })
      let answered = 0
      const first = ['a', 'b', 'c'].map((id) => g.add(id).then(() => answered++))
      await until(() => flushes.length === 1)
      expect(flushes[0]).toEqual(['a', 'b', 'c'])
      expect(answered).toBe(0)
      const later = ['d', 'e'].map((id) => g.add(id).then(() => answered++))
      gates.shift()!()
      await Promise.all(first)
      await until(() => flushes.length === 2)
      expect(flushes[1]).toEqual(['d', 'e'])
      expect(answered).toBe(3)
      gates.shift()!()
      await Promise.all(later)
      await g.idle()
      const n = await db.get<{ n: number | string }>('SELECT COUNT(*) AS n FROM wp')
      expect(Number(n?.n)).toBe(5)
    }))

  test('a failed transaction rejects exactly its callers and writes none of their rows; the next batch still commits', async () =>
    withTable(async (db) => {
      const g = new GroupCommit<{ id: string }>(
        (items) =>
          db.tx(async (tx) => {
            await insertMany(
              tx,
              'wp',
              ['id', 'n'],
              items.flatMap((i) => [i.id, 1]),
            )
            if (items.some((i) => i.id === 'poison')) throw new Error('constraint in a later statement')
          }),
        { maxWeight: 2 },
      )
      const results = await Promise.allSettled([
        g.add({ id: 'x1' }),
        g.add({ id: 'poison' }),
        g.add({ id: 'y1' }),
      ])
      expect(results.map((r) => r.status)).toEqual(['rejected', 'rejected', 'fulfilled'])
      const rows = await db.all<{ id: string }>('SELECT id FROM wp ORDER BY id')
      expect(rows.map((r) => r.id)).toEqual(['y1'])
    }))

  test('maxWeight bounds a transaction by rows, not callers; observe sees every flush', async () =>
    withTable(async (db) => {
      const seen: Array<[number, boolean]> = []
      const g = new GroupCommit<string[]>(
        async (batches) => {
          await db.tx((tx) =>
            insertMany(
              tx,
              'wp',
              ['id', 'n'],
              batches.flat().flatMap((id) => [id, id.length]),
            ),
          )
        },
        { maxWeight: 4, weight: (b) => b.length, observe: (w, _s, ok) => seen.push([w, ok]) },
      )
      await Promise.all([g.add(['a', 'b', 'c']), g.add(['d', 'e']), g.add(['f'])])
      expect(seen).toEqual([
        [3, true],
        [3, true],
      ])
    }))

  test('insertMany stores every value exactly, in chunks past the parameter cap, with a RETURNING tail, on both dialect paths', async () =>
    withTable(async (db) => {
      const n = 3000
      const params = Array.from({ length: n }, (_, i) => [
        `id-${i}`,
        2 ** 53 - 1 - i,
        i % 7 ? `note "${i}"\n,é` : null,
      ]).flat()
      await db.tx((tx) => insertMany(tx, 'wp', ['id', 'n', 'note'], params))
      const back = await db.all<{ id: string; n: number | string; note: string | null }>(
        'SELECT id, n, note FROM wp ORDER BY n DESC',
      )
      expect(back).toHaveLength(n)
      expect(Number(back[0].n)).toBe(2 ** 53 - 1)
      expect({ ...back[1], n: Number(back[1].n) }).toEqual({
        id: 'id-1',
        n: 2 ** 53 - 2,
        note: 'note "1"\n,é',
      })
      // The JSON path (PostgreSQL with its BIGINT columns named) and the VALUES path agree.
      const more = await db.tx((tx) =>
        insertMany(tx, 'wp', ['id', 'n', 'note'], ['id-0', 1, 'dup', 'j-1', 42, 'nul\u0000byte'], {
          tail: 'ON CONFLICT (id) DO NOTHING RETURNING id',
          bigint: ['n'],
        }),
      )
      expect(more).toEqual([{ id: 'j-1' }])
      const j = await db.get<{ note: string }>("SELECT note FROM wp WHERE id = 'j-1'")
      expect(j?.note === 'nulbyte' || j?.note === 'nul\u0000byte').toBe(true)
    }))

  if (engine === 'postgres')
    test('copy (PostgreSQL COPY) stores every value exactly; its errors reject, and the transaction goes on after it', async () => {
      const { db, done } = await rawDb(engine)
      try {
        await db.exec(
          'CREATE TABLE cp (id TEXT PRIMARY KEY, n BIGINT, note TEXT, flag BOOLEAN, bytes BYTEA, x DOUBLE PRECISION)',
        )
        const cols = ['id', 'n', 'note', 'flag', 'bytes', 'x']
        const odd = 'tab\there\nline\r\\N back\\slash \\. é 日本 🎮 nul\u0000byte lone\ud800'
        const rows = [
          ['a', 2 ** 53 - 1, odd, true, new Uint8Array([0, 92, 255]), 1.5],
          ['b', null, null, false, null, Number.NaN],
          ['c', -7, '\\N', null, new Uint8Array([]), -0.25],
          ['d', 12n, '', true, null, null],
        ]
        const n = await db.tx(async (tx) => {
          const copied = await tx.copy!('cp', cols, rows.flat())
          // The next statement on the same connection runs after it.
          await tx.run("UPDATE cp SET note = note || '!' WHERE id = 'd'")
          return copied
        })
        expect(n).toBe(4)
        const back = await db.all<Record<string, unknown>>(
          "SELECT id, n, note, flag, encode(bytes, 'hex') AS hex, x FROM cp ORDER BY id",
        )
        expect(back).toEqual([
          // NUL dropped (PostgreSQL's text cannot hold it), a lone surrogate as U+FFFD.
          {
            id: 'a',
            n: 2 ** 53 - 1,
            note: odd.replace('\u0000', '').replace('\ud800', '\ufffd'),
            flag: true,
            hex: '005cff',
            x: 1.5,
          },
          // A number that is not finite is NULL, as in JSON.
          { id: 'b', n: null, note: null, flag: false, hex: null, x: null },
          // The text "\N" is not NULL.
          { id: 'c', n: -7, note: '\\N', flag: null, hex: '', x: -0.25 },
          { id: 'd', n: 12, note: '!', flag: true, hex: null, x: null },
        ])
        // A unique violation rejects with the server's error (not a hang), and rolls back.
        const dup = await db
          .tx((tx) => tx.copy!('cp', cols, ['e', 1, null, null, null, null, 'a', 2, null, null, null, null]))
          .then(
            () => undefined,
            (e) => e as { code?: string; table_name?: string },
          )
        expect(dup?.code).toBe('23505')
        expect(dup?.table_name).toBe('cp')
        // So does a value the column cannot take, and a column that is not there.
        await expect(db.tx((tx) => tx.copy!('cp', ['id', 'n'], ['f', 1.5]))).rejects.toThrow(/bigint/)
        await expect(db.tx((tx) => tx.copy!('cp', ['id', 'nope'], ['f', 1]))).rejects.toThrow(/nope/)
        expect((await db.get<{ n: number }>('SELECT COUNT(*) AS n FROM cp'))?.n).toBe(4)
        // The pool's connections are all usable afterwards.
        const pings = await Promise.all(Array.from({ length: 12 }, () => db.get('SELECT 1 AS one')))
        expect(pings.every((r) => r?.one === 1)).toBe(true)
      } finally {
        await done()
      }
    })
})
