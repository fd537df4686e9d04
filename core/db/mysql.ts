import type { Pool, PoolConnection } from 'mysql2/promise'
import { isConnectionFault } from './faults'
import { insertReturning } from './mysql-returning'
import { keyedColumns, mysqlDdl, numbered, splitUpdateReturning, toMysql } from './mysql-sql'
import type { Db, Param, Row } from './types'

/**
 * MySQL 8 / MariaDB 10.11 through mysql2. Every session speaks the ANSI flavour the statements
 * are written in (double-quoted identifiers, `||` concatenation), strict (a value that does not
 * fit fails instead of being cut), READ COMMITTED as PostgreSQL, in UTF-8 with a binary
 * collation. InnoDB commits durably when `innodb_flush_log_at_trx_commit = 1` (the default):
 * a statement resolves after its commit, so acknowledged means committed.
 */
const SESSION =
  "SET SESSION sql_mode = 'ANSI_QUOTES,PIPES_AS_CONCAT,STRICT_ALL_TABLES,NO_ENGINE_SUBSTITUTION,NO_ZERO_DATE', " +
  "time_zone = '+00:00', group_concat_max_len = 67108864, NAMES utf8mb4 COLLATE utf8mb4_bin; " +
  'SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED'

export interface MysqlOptions {
  max?: number
  /**
   * Whether the server returns rows from `INSERT ... RETURNING` (MariaDB does, MySQL 8 does not):
   * read from the server's version at the first connection unless given (false forces the path
   * without RETURNING on MariaDB too, as its tests do; so does LIVEOPS_MYSQL_RETURNING=off).
   */
  insertReturning?: boolean
  /** Seconds a connection attempt may take (default 2). */
  connectTimeoutS?: number
}

/** A statement for mysql2: translated, with numbered parameters spelled out (`numbered`). */
function prepare(sql: string, params: readonly Param[]): [string, readonly Param[]] {
  const text = toMysql(sql)
  const n = numbered(text)
  return n ? [n.sql, n.order.map((i) => params[i] ?? null)] : [text, params]
}

/** mysql2 escapes values itself; bigint and byte arrays are given in the forms it knows. */
function values(params: readonly Param[]): unknown[] {
  return params.map((v) =>
    typeof v === 'bigint'
      ? v.toString()
      : v instanceof Uint8Array && !Buffer.isBuffer(v)
        ? Buffer.from(v)
        : v,
  )
}

type Exec = (sql: string, params: readonly Param[]) => Promise<unknown>

/** A transaction's Db with its connection's raw results (several statements' in one round trip). */
export type RawDb = Db & { raw(sql: string, params: readonly Param[]): Promise<unknown> }

function rowsOf<T>(res: unknown): T[] {
  const first = (res as [unknown])[0]
  return Array.isArray(first) ? (first as T[]) : []
}

function countOf(res: unknown): number {
  const first = (res as [unknown])[0] as { affectedRows?: number } | unknown[]
  return Array.isArray(first) ? first.length : Number(first?.affectedRows ?? 0)
}

/**
 * `UPDATE ... RETURNING`: the rows the WHERE matches are locked and named by id, updated by id,
 * and read back, in one transaction (the caller's, or one of its own).
 */
async function updateReturning<T>(tx: Db, sql: string, params: readonly Param[]): Promise<T[]> {
  const u = splitUpdateReturning(sql)
  if (!u) throw new Error(`MySQL: cannot run ${sql}`)
  // `WHERE id IN (SELECT id ... LIMIT ? [FOR UPDATE SKIP LOCKED])` (a claim) locks through the
  // inner query itself: MySQL takes no LIMIT in an IN subquery.
  const inner = /^id\s+IN\s+\((SELECT\s+id\s+FROM\s+[\s\S]+)\)$/i.exec(u.where.trim())?.[1]
  const lock = inner
    ? /\bFOR\s+UPDATE\b/i.test(inner)
      ? inner
      : `${inner} FOR UPDATE`
    : `SELECT id FROM ${u.table} WHERE ${u.where} FOR UPDATE`
  const ids = await tx.all<{ id: string }>(lock, params.slice(u.setParams))
  if (!ids.length) return []
  const list = ids.map(() => '?').join(', ')
  const keys = ids.map((r) => r.id as Param)
  await tx.run(`UPDATE ${u.table} SET ${u.set} WHERE id IN (${list})`, [
    ...params.slice(0, u.setParams),
    ...keys,
  ])
  return tx.all<T>(`SELECT ${u.returning} FROM ${u.table} WHERE id IN (${list})`, keys)
}

const isUpdateReturning = (sql: string) => /^\s*UPDATE\b/i.test(sql) && /\bRETURNING\b/i.test(sql)
const isInsertReturning = (sql: string) => /^\s*INSERT\b/i.test(sql) && /\bRETURNING\b/i.test(sql)

function wrap(exec: Exec, tx: Db['tx'], root: () => Db, native: () => Promise<boolean>): Db {
  const self: Db = {
    dialect: 'mysql',
    async all<T = Row>(sql: string, params: readonly Param[] = []) {
      if (isUpdateReturning(sql)) return self.tx((t) => updateReturning<T>(t, sql, params))
      if (isInsertReturning(sql) && !(await native()))
        return self.tx((t) => insertReturning<T>(t as RawDb, sql, ...prepare(sql, params)))
      return rowsOf<T>(await exec(...prepare(sql, params)))
    },
    async get<T = Row>(sql: string, params: readonly Param[] = []) {
      return (await self.all<T>(sql, params))[0]
    },
    async run(sql: string, params: readonly Param[] = []) {
      if (isUpdateReturning(sql) || isInsertReturning(sql)) return (await self.all(sql, params)).length
      return countOf(await exec(...prepare(sql, params)))
    },
    tx,
    // DDL is written once for every engine: a CREATE or ALTER TABLE is translated (mysqlDdl).
    async exec(sql: string) {
      await exec(/\b(CREATE|ALTER) TABLE\b/i.test(sql) ? mysqlDdl(sql, keyedColumns([sql])) : sql, [])
    },
    ping: () => root().ping(),
    close: () => root().close(),
  }
  return self
}

/** One connection's transaction, nesting as savepoints; user locks (GET_LOCK) end with it. */
function onConnection(conn: PoolConnection, root: () => Db, native: () => Promise<boolean>): Db {
  let depth = 0
  let locks = false
  const exec: Exec = async (sql, params) => {
    if (/\bGET_LOCK\s*\(/i.test(sql)) locks = true
    return conn.query({ sql, values: values(params) })
  }
  const self: Db = wrap(
    exec,
    async (fn) => {
      const name = `sp${++depth}`
      await conn.query(`SAVEPOINT ${name}`)
      try {
        const out = await fn(self)
        await conn.query(`RELEASE SAVEPOINT ${name}`)
        return out
      } catch (e) {
        if (!isConnectionFault(e)) await conn.query(`ROLLBACK TO SAVEPOINT ${name}`)
        throw e
      }
    },
    root,
    native,
  )
  return Object.assign(self, {
    raw: (sql: string, params: readonly Param[]) => exec(sql, params),
    releaseLocks: async () => {
      if (locks) await conn.query('DO RELEASE_ALL_LOCKS()')
    },
  })
}

export function openMysql(url: string, opts: MysqlOptions = {}): Db {
  const mysql: typeof import('mysql2/promise') = require('mysql2/promise')
  const pool: Pool = mysql.createPool({
    uri: url.replace(/^mariadb:/, 'mysql:'),
    connectionLimit: opts.max ?? 10,
    connectTimeout: (opts.connectTimeoutS ?? 2) * 1000,
    multipleStatements: true,
    decimalNumbers: true,
    supportBigNumbers: true,
    bigNumberStrings: false,
    dateStrings: true,
    charset: 'utf8mb4_bin',
    // UPDATE counts the rows it matched, as on SQLite and PostgreSQL, not only those it changed.
    flags: ['+FOUND_ROWS'],
  })
  // Every new connection is set up before its first statement (mysql2 runs them in order).
  pool.pool.on('connection', (c) => {
    c.query(SESSION)
  })
  const exec: Exec = (sql, params) => pool.query({ sql, values: values(params) })
  // MariaDB returns rows from INSERT ... RETURNING, MySQL 8 answers a syntax error: asked once.
  const forced = opts.insertReturning ?? (process.env.LIVEOPS_MYSQL_RETURNING === 'off' ? false : undefined)
  let returning: Promise<boolean> | undefined
  const native = () => {
    returning ??=
      forced !== undefined
        ? Promise.resolve(forced)
        : exec('SELECT VERSION() AS v', []).then(
            (r) => /mariadb/i.test(String(rowsOf<{ v: string }>(r)[0]?.v)),
            (e) => {
              returning = undefined
              throw e
            },
          )
    return returning
  }
  const poller = new ChangePoller(exec)
  const root: Db & Pick<ChangePoller, 'listen' | 'notify'> = {
    ...wrap(
      exec,
      async (fn) => {
        const conn = await pool.getConnection()
        let broken = false
        try {
          await conn.query('BEGIN')
          const tx = onConnection(conn, () => root, native) as Db & { releaseLocks(): Promise<void> }
          try {
            const out = await fn(tx)
            await conn.query('COMMIT')
            await tx.releaseLocks()
            return out
          } catch (e) {
            if (isConnectionFault(e)) broken = true
            else {
              await conn.query('ROLLBACK')
              await tx.releaseLocks()
            }
            throw e
          }
        } catch (e) {
          if (isConnectionFault(e)) broken = true
          throw e
        } finally {
          if (broken) conn.destroy()
          else conn.release()
        }
      },
      () => root,
      native,
    ),
    location: { url },
    listen: (channel: string, fn: (payload: string) => void) => poller.listen(channel, fn),
    notify: (channel: string, payload: string) => poller.notify(channel, payload),
    async ping() {
      const t = performance.now()
      await pool.query('SELECT 1')
      return performance.now() - t
    },
    async close() {
      await poller.close()
      await pool.end()
    },
  }
  return root
}

/** How often an instance reads the notices of the others. */
export const CHANGE_POLL_MS = 50
const CHANGE_KEEP_MS = 60_000

/**
 * LISTEN/NOTIFY over a table (core migration 007, `liveops_changes`): a notice is a row, each
 * listener polls for rows past the last id it read every CHANGE_POLL_MS. A notice whose row
 * commits after a poll saw a later id (two inserts racing) is missed; the pollers of the plugins
 * that cache (core/changes.ts) catch up on it, as after a lost PostgreSQL notice.
 */
class ChangePoller {
  private channels = new Map<string, { last: number; fns: Set<(payload: string) => void> }>()
  private timer: ReturnType<typeof setInterval> | undefined
  private busy = false
  private sent = 0

  constructor(private readonly exec: Exec) {}

  async listen(channel: string, fn: (payload: string) => void): Promise<() => Promise<void>> {
    let ch = this.channels.get(channel)
    if (!ch) {
      const top = rowsOf<{ id: number | null }>(
        await this.exec('SELECT MAX(id) AS id FROM liveops_changes WHERE channel = ?', [channel]),
      )[0]
      ch = { last: Number(top?.id ?? 0), fns: new Set() }
      this.channels.set(channel, ch)
    }
    ch.fns.add(fn)
    this.timer ??= setInterval(() => void this.poll(), CHANGE_POLL_MS)
    return async () => {
      ch.fns.delete(fn)
      if (!ch.fns.size) this.channels.delete(channel)
      if (!this.channels.size) await this.close()
    }
  }

  async notify(channel: string, payload: string): Promise<void> {
    const now = Date.now()
    await this.exec('INSERT INTO liveops_changes (channel, payload, created_at) VALUES (?, ?, ?)', [
      channel,
      payload,
      now,
    ])
    if (++this.sent % 100 === 0)
      await this.exec('DELETE FROM liveops_changes WHERE created_at < ?', [now - CHANGE_KEEP_MS])
  }

  private async poll() {
    if (this.busy) return
    this.busy = true
    try {
      for (const [channel, ch] of this.channels) {
        const rows = rowsOf<{ id: number; payload: string }>(
          await this.exec(
            'SELECT id, payload FROM liveops_changes WHERE channel = ? AND id > ? ORDER BY id',
            [channel, ch.last],
          ),
        )
        for (const r of rows) {
          ch.last = Math.max(ch.last, Number(r.id))
          for (const fn of ch.fns) fn(r.payload)
        }
      }
    } catch {
      // The store is down: the next poll tries again.
    } finally {
      this.busy = false
    }
  }

  async close() {
    clearInterval(this.timer)
    this.timer = undefined
  }
}
