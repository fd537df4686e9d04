import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { type Db, openDb } from '../../core/db'
import { engines, freshMysqlDb } from '../helpers'

// Issue 39 (reads within 20% of PostgreSQL): on MySQL/MariaDB a single SELECT with parameters,
// outside a transaction, runs as a server-side prepared statement (binary protocol); everything
// else keeps the text protocol. Its answers must be the text protocol's, value for value.

if (engines.includes('mysql'))
  describe('[mysql] prepared reads', () => {
    let db: Db
    let dir: string
    let drop: () => Promise<void>
    /** One connection, so the session's statement counters are the store's own. */
    const counters = async () => {
      const rows = await db.all<{ Variable_name: string; Value: string }>(
        "SHOW SESSION STATUS WHERE Variable_name IN ('Com_stmt_prepare', 'Com_stmt_execute')",
      )
      const of = (name: string) => Number(rows.find((r) => r.Variable_name === name)?.Value)
      return { prepare: of('Com_stmt_prepare'), execute: of('Com_stmt_execute') }
    }

    beforeAll(async () => {
      dir = mkdtempSync(join(tmpdir(), 'liveops-prep-'))
      const fresh = await freshMysqlDb()
      drop = fresh.drop
      db = openDb(fresh.url, dir, { max: 1 })
      await db.exec(
        'CREATE TABLE t (k TEXT PRIMARY KEY, n BIGINT, r REAL, s TEXT, b BLOB, at BIGINT NOT NULL)',
      )
      await db.run(
        'INSERT INTO t (k, n, r, s, b, at) VALUES (?, ?, ?, ?, ?, ?), (?, ?, ?, ?, ?, ?), (?, ?, ?, ?, ?, ?)',
        [
          'a',
          9_007_199_254_740_991n,
          0.25,
          'ゲーム "quoted" \\ back',
          new Uint8Array([0, 1, 255]),
          1_700_000_000_000,
          'b',
          -5,
          null,
          null,
          null,
          1_700_000_000_001,
          'c',
          9_223_372_036_854_775_807n,
          1e21,
          '',
          new Uint8Array([]),
          1_700_000_000_002,
        ],
      )
    })
    afterAll(async () => {
      await db?.close()
      await drop?.()
      rmSync(dir, { recursive: true, force: true })
    })

    const reads: Array<[string, unknown[]]> = [
      [
        'SELECT k, n, r, s, b, at FROM t WHERE at >= ? ORDER BY k LIMIT ? OFFSET ?',
        [1_700_000_000_000, 10, 0],
      ],
      ['SELECT k FROM t WHERE k IN (?, ?) AND n > ?', ['a', 'c', 0]],
      ['SELECT COUNT(*) AS c, SUM(at) AS total, AVG(r) AS mean, MAX(s) AS top FROM t WHERE at > ?', [0]],
      ['SELECT k, ? AS echo, COALESCE(s, ?) AS s FROM t WHERE k = ?', ['x', 'none', 'b']],
      ['SELECT k FROM t WHERE s = ?', [null]],
      ['SELECT k FROM t WHERE n = ?', [9_223_372_036_854_775_807n]],
    ]

    test('a SELECT with parameters answers as the text protocol does, value for value', async () => {
      for (const [sql, params] of reads) {
        const prepared = await db.all(sql, params as never)
        // Inside a transaction the same statement goes through the text protocol.
        const text = await db.tx((tx) => tx.all(sql, params as never))
        expect(prepared).toEqual(text)
      }
      const [a, b, c] = await db.all<Record<string, unknown>>(
        'SELECT k, n, r, s, b FROM t WHERE at > ? ORDER BY k',
        [0],
      )
      expect(a).toMatchObject({ k: 'a', n: 9_007_199_254_740_991, r: 0.25, s: 'ゲーム "quoted" \\ back' })
      expect([...(a.b as Uint8Array)]).toEqual([0, 1, 255])
      expect(b).toMatchObject({ k: 'b', n: -5, r: null, s: null, b: null })
      // Past the exact doubles a BIGINT is a string, as with the text protocol.
      expect(c).toMatchObject({ k: 'c', n: '9223372036854775807', r: 1e21, s: '' })
      const [sums] = await db.all<Record<string, unknown>>(reads[2][0], reads[2][1] as never)
      expect(sums).toEqual({
        c: 3,
        total: 5_100_000_000_003,
        mean: (0.25 + 1e21) / 2,
        top: 'ゲーム "quoted" \\ back',
      })
    })

    test('such a SELECT is prepared once and executed each time; without parameters, in a transaction or a write, it is not', async () => {
      const sql = 'SELECT k FROM t WHERE at > ? ORDER BY k'
      const before = await counters()
      for (let i = 0; i < 3; i++) expect(await db.all(sql, [i])).toHaveLength(3)
      const after = await counters()
      expect(after.execute - before.execute).toBe(3)
      expect(after.prepare - before.prepare).toBeLessThanOrEqual(1)
      await db.all('SELECT k FROM t ORDER BY k')
      await db.tx((tx) => tx.all(sql, [0]))
      await db.run('UPDATE t SET at = at WHERE k = ?', ['a'])
      expect((await counters()).execute).toBe(after.execute)
    })
  })
