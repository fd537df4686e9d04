import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { type Db, openDb } from '../../core/db'
import { splitInsertReturning, toMysql } from '../../core/db/mysql-sql'
import { createLogger } from '../../core/log'
import { createSharedState } from '../../core/shared'
import { engines, freshMysqlDb } from '../helpers'

// Issue 39 point 1: MySQL 8 has no INSERT ... RETURNING (MariaDB has). The dialect layer then
// inserts row by row and reads the rows back; forced here on MariaDB, so CI runs both paths.

test('an INSERT ... RETURNING in its parts: rows, their parameters, the tail, the kind', () => {
  const ins = splitInsertReturning(
    toMysql(
      "INSERT INTO t (k, v, at) VALUES (?, 'x', ?), (?, ?, ?) ON CONFLICT (k) DO UPDATE SET v = excluded.v WHERE t.at <= ? RETURNING k, v",
    ),
  )
  expect(ins?.table).toBe('t')
  expect(ins?.columns).toEqual(['k', 'v', 'at'])
  expect(ins?.rows.map((r) => r.params)).toEqual([2, 3])
  expect(ins?.tailParams).toBe(1)
  expect(ins?.kind).toBe('guarded')
  expect(ins?.returning).toBe('k, v')
  expect(
    splitInsertReturning(toMysql('INSERT INTO t (k) VALUES (?) ON CONFLICT DO NOTHING RETURNING k'))?.kind,
  ).toBe('ignore')
  expect(splitInsertReturning('INSERT INTO t (k) VALUES (?)')).toBeUndefined()
})

const paths = engines.includes('mysql') ? (['native', 'without RETURNING'] as const) : []
for (const path of paths) {
  describe(`[mysql] INSERT ... RETURNING, ${path}`, () => {
    let db: Db
    let dir: string
    let drop: () => Promise<void>
    beforeAll(async () => {
      dir = mkdtempSync(join(tmpdir(), 'liveops-ret-'))
      const fresh = await freshMysqlDb()
      drop = fresh.drop
      const before = process.env.LIVEOPS_MYSQL_RETURNING
      process.env.LIVEOPS_MYSQL_RETURNING = path === 'native' ? 'on' : 'off'
      db = openDb(fresh.url, dir, { max: 4 })
      process.env.LIVEOPS_MYSQL_RETURNING = before ?? ''
      await db.exec('CREATE TABLE kv (k TEXT PRIMARY KEY, v TEXT NOT NULL, at BIGINT NOT NULL)')
      await db.exec('CREATE TABLE seq (id INTEGER PRIMARY KEY, name TEXT NOT NULL)')
      await db.exec(
        'CREATE TABLE pair (a TEXT NOT NULL, b TEXT NOT NULL, n BIGINT NOT NULL, PRIMARY KEY (a, b))',
      )
      await db.exec(await Bun.file(`${import.meta.dir}/../../core/auth/migrations/004_shared.sql`).text())
    })
    afterAll(async () => {
      await db.close()
      await drop()
      rmSync(dir, { recursive: true, force: true })
    })

    test('a plain insert returns its row, a generated id included', async () => {
      expect(await db.get('INSERT INTO kv (k, v, at) VALUES (?, ?, ?) RETURNING *', ['a', 'x', 1])).toEqual({
        k: 'a',
        v: 'x',
        at: 1,
      })
      const one = await db.get<{ id: number; name: string }>(
        'INSERT INTO seq (name) VALUES (?) RETURNING id, name',
        ['first'],
      )
      const two = await db.get<{ id: number }>("INSERT INTO seq (name) VALUES ('second') RETURNING id", [])
      expect(one?.name).toBe('first')
      expect(Number(two?.id)).toBe(Number(one?.id) + 1)
    })

    test('DO NOTHING returns the rows it inserted only, in the order given', async () => {
      await db.run('INSERT INTO kv (k, v, at) VALUES (?, ?, ?)', ['taken', 'old', 1])
      const won = await db.all<{ k: string; v: string }>(
        'INSERT INTO kv (k, v, at) VALUES (?, ?, ?), (?, ?, ?), (?, ?, ?) ON CONFLICT (k) DO NOTHING RETURNING k, v',
        ['z-new', 'n1', 2, 'taken', 'n2', 2, 'b-new', 'n3', 2],
      )
      expect(won).toEqual([
        { k: 'z-new', v: 'n1' },
        { k: 'b-new', v: 'n3' },
      ])
      expect(
        await db.run('INSERT INTO kv (k, v, at) VALUES (?, ?, ?) ON CONFLICT DO NOTHING RETURNING k', [
          'taken',
          'x',
          3,
        ]),
      ).toBe(0)
    })

    test('INSERT ... SELECT returns its row; DO NOTHING on a taken key none', async () => {
      const sql = `INSERT INTO seq (id, name) SELECT CAST(? AS INTEGER), CAST(? AS TEXT) FROM seq WHERE true
        ON CONFLICT (id) DO NOTHING RETURNING id, name`
      expect(await db.all(sql, [900, 'selected'])).toEqual([{ id: 900, name: 'selected' }])
      expect(await db.all(sql, [900, 'again'])).toEqual([])
    })

    test('INSERT ... SELECT of rows read from a table returns the rows it inserted, each once', async () => {
      await db.exec('CREATE TABLE src (id INTEGER PRIMARY KEY, a TEXT NOT NULL, b TEXT NOT NULL)')
      for (const [id, a, b] of [
        [1, 'p', 'one'],
        [2, 'p', 'one'],
        [3, 'p', 'two'],
        [4, 'q', 'taken'],
      ] as const)
        await db.run('INSERT INTO src (id, a, b) VALUES (?, ?, ?)', [id, a, b])
      await db.run('INSERT INTO pair (a, b, n) VALUES (?, ?, ?)', ['q', 'taken', 7])
      const rows = await db.all<{ a: string; b: string }>(
        'INSERT INTO pair (a, b, n) SELECT a, b, 0 FROM src WHERE id <= ? ORDER BY a, b ON CONFLICT (a, b) DO NOTHING RETURNING a, b',
        [4],
      )
      expect(rows.map((r) => `${r.a}/${r.b}`).sort()).toEqual(['p/one', 'p/two'])
      expect(await db.get('SELECT n FROM pair WHERE a = ? AND b = ?', ['q', 'taken'])).toEqual({ n: 7 })
    })

    test('an upsert returns every row; a guarded one only those its WHERE let through', async () => {
      const all = await db.all<{ a: string; b: string; n: number }>(
        `INSERT INTO pair (a, b, n) VALUES (?, ?, ?), (?, ?, ?)
         ON CONFLICT (a, b) DO UPDATE SET n = pair.n + excluded.n RETURNING a, b, n`,
        ['x', '1', 5, 'x', '2', 7],
      )
      expect(all).toEqual([
        { a: 'x', b: '1', n: 5 },
        { a: 'x', b: '2', n: 7 },
      ])
      const again = await db.all<{ n: number }>(
        'INSERT INTO pair (a, b, n) VALUES (?, ?, ?) ON CONFLICT (a, b) DO UPDATE SET n = pair.n + excluded.n RETURNING n',
        ['x', '1', 1],
      )
      expect(again).toEqual([{ n: 6 }])
      // Claims as core/shared.ts makes them: a key is won when new or when its claim expired.
      await db.run('INSERT INTO kv (k, v, at) VALUES (?, ?, ?), (?, ?, ?)', [
        'live',
        '1',
        1000,
        'expired',
        '1',
        10,
      ])
      const claimed = await db.all<{ k: string; at: number }>(
        `INSERT INTO kv (k, v, at) VALUES (?, '1', ?), (?, '1', ?), (?, '1', ?)
         ON CONFLICT (k) DO UPDATE SET v = '2', at = excluded.at WHERE kv.at <= ? RETURNING k, at`,
        ['live', 2000, 'expired', 2000, 'fresh', 2000, 500],
      )
      // MariaDB's own RETURNING also returns the row the WHERE kept ('live', at 1000): core/shared.ts
      // counts a claim won by the expiry it wrote. Without RETURNING, the rows are PostgreSQL's.
      const won = [
        { k: 'expired', at: 2000 },
        { k: 'fresh', at: 2000 },
      ]
      expect(claimed.filter((r) => Number(r.at) === 2000)).toEqual(won)
      if (path !== 'native') expect(claimed).toEqual(won)
      expect((await db.get<{ v: string }>("SELECT v FROM kv WHERE k = 'live'"))?.v).toBe('1')
    })

    test("shared state's claims, counters and token buckets (numbered parameters) keep their contract", async () => {
      const shared = createSharedState({
        db,
        log: createLogger(
          { level: 'error', format: 'json', max_size: 1, max_backups: 0, max_age: 0, sensitive_fields: [] },
          () => {},
        ),
      })
      try {
        expect(
          await Promise.all([shared.claimOnce('nonce-1', 60_000), shared.claimOnce('nonce-2', 60_000)]),
        ).toEqual([true, true])
        expect(await shared.claimOnce('nonce-1', 60_000)).toBe(false)
        expect(await shared.add('hits', 60_000)).toBe(1)
        expect(
          await shared.addAll([
            { key: 'hits', windowMs: 60_000, by: 2 },
            { key: 'other', windowMs: 60_000 },
          ]),
        ).toEqual([3, 1])
        const takes: boolean[] = []
        for (let i = 0; i < 4; i++)
          takes.push((await shared.take('bucket', { requestsPerMinute: 1, burstSize: 3 })).allowed)
        expect(takes).toEqual([true, true, true, false])
      } finally {
        await shared.close()
      }
    })
  })
}
