import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { type Db, openDb } from '../../core/db'
import { mysqlDdl, numbered, toMysql } from '../../core/db/mysql-sql'
import { engines, freshMysqlDb } from '../helpers'

// MariaDB reads no index range for a row comparison; the dialect spells it out (core/db/mysql-sql.ts).

test('a row comparison becomes a range on its first column, the first parameter given twice', () => {
  const t = toMysql('SELECT id FROM e WHERE (seq, id) > (?, ?) AND seq < ? ORDER BY seq, id LIMIT ?')
  expect(t).toBe(
    'SELECT id FROM e WHERE (seq >= ?1 AND (seq > ?1 OR id > ?2)) AND seq < ?3 ORDER BY seq, id LIMIT ?4',
  )
  expect(numbered(t)?.order).toEqual([0, 0, 1, 2, 3])
  expect(toMysql('SELECT 1 FROM e WHERE (a, b) <= (?2, ?1)')).toBe(
    'SELECT 1 FROM e WHERE (a <= ?2 AND (a < ?2 OR b <= ?1))',
  )
  expect(toMysql('SELECT 1 FROM e WHERE a > ?')).toBe('SELECT 1 FROM e WHERE a > ?')
})

test('a subquery of an UPDATE or DELETE reads through a derived table (MySQL refuses the changed table in it)', () => {
  expect(toMysql('DELETE FROM t WHERE a < (SELECT a FROM t ORDER BY a DESC LIMIT 1 OFFSET ?)')).toBe(
    'DELETE FROM t WHERE a < (SELECT * FROM (SELECT a FROM t ORDER BY a DESC LIMIT 1 OFFSET ?) AS liveops_sub)',
  )
  expect(toMysql('UPDATE t SET b = 1 WHERE id IN (SELECT id FROM t WHERE c = ? LIMIT 5)')).toBe(
    'UPDATE t SET b = 1 WHERE id IN (SELECT * FROM (SELECT id FROM t WHERE c = ? LIMIT 5) AS liveops_sub)',
  )
  expect(toMysql('SELECT a FROM t WHERE a < (SELECT MAX(a) FROM t)')).toBe(
    'SELECT a FROM t WHERE a < (SELECT MAX(a) FROM t)',
  )
})

test("MySQL 8's reserved last_value is quoted as a column, not as the function", () => {
  expect(toMysql('UPDATE t SET last_value = ? WHERE id = ?')).toBe(
    'UPDATE t SET "last_value" = ? WHERE id = ?',
  )
  expect(toMysql('SELECT LAST_VALUE(x) OVER (ORDER BY y) FROM t')).toBe(
    'SELECT LAST_VALUE(x) OVER (ORDER BY y) FROM t',
  )
})

test('an unkeyed TEXT default becomes an expression (MySQL takes no literal default on LONGTEXT)', () => {
  const ddl = mysqlDdl(
    "CREATE TABLE t (id TEXT PRIMARY KEY, kind TEXT NOT NULL DEFAULT 'it''s', n INTEGER NOT NULL DEFAULT 0, b BLOB DEFAULT 'x')",
    new Set(),
  )
  expect(ddl).toContain("kind LONGTEXT NOT NULL DEFAULT ('it''s')")
  expect(ddl).toContain('n INTEGER NOT NULL DEFAULT 0')
  expect(ddl).toContain("b LONGBLOB DEFAULT ('x')")
  expect(mysqlDdl("ALTER TABLE t ADD COLUMN c TEXT NOT NULL DEFAULT ''", new Set())).toBe(
    "ALTER TABLE t ADD COLUMN c LONGTEXT NOT NULL DEFAULT ('')",
  )
})

if (engines.includes('mysql'))
  describe('[mysql] row comparisons', () => {
    let db: Db
    let drop: () => Promise<void>
    const dir = mkdtempSync(join(tmpdir(), 'liveops-rowcmp-'))
    beforeAll(async () => {
      const fresh = await freshMysqlDb()
      drop = fresh.drop
      db = openDb(fresh.url, dir, { max: 2 })
      await db.exec('CREATE TABLE e (id BIGINT PRIMARY KEY, seq BIGINT NOT NULL)')
      await db.exec('CREATE INDEX e_log ON e (seq, id)')
      for (const [seq, id] of [
        [1, 1],
        [1, 5],
        [2, 2],
        [2, 3],
        [2, 9],
        [3, 4],
      ])
        await db.run('INSERT INTO e (id, seq) VALUES (?, ?)', [id, seq])
    })
    afterAll(async () => {
      await db.close()
      await drop()
      rmSync(dir, { recursive: true, force: true })
    })

    test('answer as the comparison of rows does, at every position and in each direction', async () => {
      const all = (await db.all<{ id: number; seq: number }>('SELECT id, seq FROM e ORDER BY seq, id')).map(
        (r) => [Number(r.seq), Number(r.id)] as const,
      )
      const cmp = (a: readonly [number, number], b: readonly [number, number]) => a[0] - b[0] || a[1] - b[1]
      for (const at of [
        [0, 0],
        [1, 1],
        [1, 4],
        [2, 3],
        [2, 9],
        [3, 4],
        [4, 0],
      ] as const)
        for (const [op, keep] of [
          ['>', (c: number) => c > 0],
          ['>=', (c: number) => c >= 0],
          ['<', (c: number) => c < 0],
          ['<=', (c: number) => c <= 0],
        ] as const) {
          const got = await db.all<{ id: number }>(
            `SELECT id FROM e WHERE (seq, id) ${op} (?, ?) ORDER BY seq, id`,
            [at[0], at[1]],
          )
          expect({ at, op, ids: got.map((r) => Number(r.id)) }).toEqual({
            at,
            op,
            ids: all.filter((r) => keep(cmp(r, at))).map((r) => r[1]),
          })
        }
    })
  })
