import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { type Db, openDb } from '../../core/db'
import { migrate } from '../../core/db/migrate'
import { convertPaddedTables } from '../../core/db/mysql'
import { engines, freshMysqlDb } from '../helpers'

// MariaDB's and MySQL's utf8mb4_bin pad with spaces ('x ' = 'x'): keys that differ by trailing
// spaces, distinct on SQLite and PostgreSQL, collided there (eighteenth session's audits: an SDK
// key's event id 'x ' failed every game's group commit; a signed request to '<game> ' reached a
// game's environment under the shared secret). Tables are made NO PAD, older ones converted.

if (engines.includes('mysql'))
  describe('[mysql] keys that differ by trailing spaces', () => {
    let db: Db
    let dir: string
    let drop: () => Promise<void>
    beforeAll(async () => {
      dir = mkdtempSync(join(tmpdir(), 'liveops-nopad-'))
      const fresh = await freshMysqlDb()
      drop = fresh.drop
      db = openDb(fresh.url, dir, { max: 2 })
    })
    afterAll(async () => {
      await db.close()
      await drop()
      rmSync(dir, { recursive: true, force: true })
    })

    const keys = async (table: string) =>
      (await db.all<{ k: string }>(`SELECT k FROM ${table} ORDER BY k`)).map((r) => `[${r.k}]`)

    test('a table made through the store keeps them apart, in its key and in a lookup', async () => {
      await db.exec('CREATE TABLE fresh_t (k TEXT PRIMARY KEY, n INTEGER)')
      await db.run('INSERT INTO fresh_t (k, n) VALUES (?, ?), (?, ?)', ['abc', 1, 'abc ', 2])
      expect(await keys('fresh_t')).toEqual(['[abc]', '[abc ]'])
      expect(await db.all('SELECT n FROM fresh_t WHERE k = ?', ['abc'])).toEqual([{ n: 1 }])
      expect(await db.all('SELECT n FROM fresh_t WHERE k IN (?)', ['abc  '])).toEqual([])
    })

    test('a table of an older release (utf8mb4_bin) is converted once at the start, its rows kept', async () => {
      await db.run(
        'CREATE TABLE old_t (k VARCHAR(191) PRIMARY KEY, v LONGTEXT) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin',
      )
      await db.run('INSERT INTO old_t (k, v) VALUES (?, ?)', ['x', 'kept'])
      await expect(db.run('INSERT INTO old_t (k, v) VALUES (?, ?)', ['x ', 'padded'])).rejects.toThrow(
        /Duplicate/,
      )
      // migrate() converts what the store holds, whatever made it.
      await migrate(db, [])
      await db.run('INSERT INTO old_t (k, v) VALUES (?, ?)', ['x ', 'padded'])
      expect(await keys('old_t')).toEqual(['[x]', '[x ]'])
      expect(await db.get('SELECT v FROM old_t WHERE k = ?', ['x'])).toEqual({ v: 'kept' })
      expect(await convertPaddedTables(db)).toEqual([])
    })
  })
