import type { Pool, PoolConnection } from 'mysql2'
import { isConnectionFault } from './faults'
import { ChangePoller } from './mysql-changes'
import { insertReturning } from './mysql-returning'
import { keyedColumns, mysqlDdl, numbered, splitUpdateReturning, toMysql } from './mysql-sql'
import { widthGuard } from './mysql-widths'
import type { Db, Param, Row } from './types'

/**
 * MySQL 8 / MariaDB 10.11 through mysql2. Every session speaks the ANSI flavour the statements
 * are written in (double-quoted identifiers, `||` concatenation), strict (a value that does not
 * fit fails instead of being cut), READ COMMITTED as PostgreSQL, in UTF-8 with a binary
 * collation without padding (`noPadCollation`). InnoDB commits durably when `innodb_flush_log_at_trx_commit = 1` (the default):
 * a statement resolves after its commit, so acknowledged means committed.
 */
const MODES = 'ANSI_QUOTES,PIPES_AS_CONCAT,STRICT_ALL_TABLES,NO_ENGINE_SUBSTITUTION,NO_ZERO_DATE'
const session = (mariadb: boolean) =>
  `SET SESSION sql_mode = '${MODES}', time_zone = '+00:00', group_concat_max_len = 67108864, ` +
  `NAMES utf8mb4 COLLATE ${noPadCollation(mariadb)}; SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED`

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

/** mysql2 escapes values itself; bigint, byte arrays and a missing value in the forms it knows. */
function values(params: readonly Param[]): unknown[] {
  return params.map((v) =>
    typeof v === 'bigint'
      ? v.toString()
      : v instanceof Uint8Array && !Buffer.isBuffer(v)
        ? Buffer.from(v)
        : (v ?? null),
  )
}

export type Exec = (sql: string, params: readonly Param[]) => Promise<unknown>
type Strict = (exec: Exec) => Exec

/**
 * One statement through mysql2's callback API, answering `[rows or result, fields]` as mysql2/promise
 * does: its promise wrapper captures a stack trace for every statement, 5-6% of the server's CPU
 * under the list reads (issue 39's profile); a statement's error still names the statement.
 * `execute`: as a server-side prepared statement (cached per connection), parsed and planned once.
 */
function send(
  on: Pick<Pool, 'query' | 'execute'>,
  sql: string,
  values?: unknown[],
  how: 'query' | 'execute' = 'query',
): Promise<[unknown, unknown]> {
  return new Promise((resolve, reject) =>
    on[how]({ sql, values }, (e: Error | null, result: unknown, fields: unknown) =>
      e ? reject(e) : resolve([result, fields]),
    ),
  )
}

/**
 * A single `SELECT` with parameters outside a transaction runs prepared: the list reads' two
 * queries cost MariaDB 20-25% less CPU (docs/performance.md, ninth session). Reads only: their
 * parameters are compared, never stored, so numbers crossing as doubles change nothing written.
 */
const PREPARABLE = /^\s*SELECT\b[^;]*$/i

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

/**
 * MySQL (not MariaDB) takes no `IF [NOT] EXISTS` on CREATE INDEX and DROP INDEX, which the
 * translated migrations use so that one failed halfway (MySQL commits each DDL statement) can run
 * again whole. There each such statement runs alone without it, and the error it meant to avoid
 * (the index is there already: 1061, or gone already: 1091) counts as done; the statements between
 * them still go in one round trip.
 */
async function execDdl(exec: Exec, sql: string, mariadb: boolean): Promise<void> {
  if (mariadb || !/\bINDEX\s+IF\s+(NOT\s+)?EXISTS\b/i.test(sql)) {
    await exec(sql, [])
    return
  }
  let plain: string[] = []
  const flush = async () => {
    if (plain.length) await exec(plain.join(';\n'), [])
    plain = []
  }
  for (const s of sql.split(/;\s*(?:\n|$)/).filter((x) => x.trim())) {
    const m = /^\s*(CREATE\s+(?:UNIQUE\s+)?INDEX|DROP\s+INDEX)\s+IF\s+(?:NOT\s+)?EXISTS\s+/i.exec(s)
    if (!m) {
      plain.push(s)
      continue
    }
    await flush()
    try {
      await exec(`${m[1]} ${s.slice(m[0].length)}`, [])
    } catch (e) {
      const done = /^\s*CREATE/i.test(s) ? 1061 : 1091
      if ((e as { errno?: number }).errno !== done) throw e
    }
  }
  await flush()
}

const isUpdateReturning = (sql: string) => /^\s*UPDATE\b/i.test(sql) && /\bRETURNING\b/i.test(sql)
const isInsertReturning = (sql: string) => /^\s*INSERT\b/i.test(sql) && /\bRETURNING\b/i.test(sql)

/** What the server is: MariaDB (else MySQL), and whether it returns rows from `INSERT ... RETURNING`. */
interface Flavour {
  mariadb: boolean
  returning: boolean
}

/**
 * The tables' collation: binary (case- and accent-sensitive) and NO PAD, so `'abc '` is another
 * key than `'abc'` as on SQLite and PostgreSQL. `utf8mb4_bin` pads with spaces on both servers:
 * an SDK key's event id `'x '` collided with `'x'` in a primary key and failed the group commit of
 * every game's requests, and a signed request to `'<game> '` found that game's environment under
 * the shared secret (eighteenth session's audits).
 */
export const noPadCollation = (mariadb: boolean) => (mariadb ? 'utf8mb4_nopad_bin' : 'utf8mb4_0900_bin')

/**
 * Tables made before the collation above (with `utf8mb4_bin`) are converted to it, once, at the
 * start after the migrations: each `ALTER TABLE ... CONVERT` rebuilds its table. NO PAD only
 * tells apart values PAD SPACE counted equal, so no key the tables hold collides after it.
 */
export async function convertPaddedTables(db: Db): Promise<string[]> {
  const version = await db.get<{ v: string }>('SELECT VERSION() AS v')
  const collation = noPadCollation(/mariadb/i.test(String(version?.v)))
  const tables = await db.all<{ t: string }>(
    `SELECT DISTINCT table_name AS t FROM information_schema.columns
     WHERE table_schema = DATABASE() AND collation_name LIKE 'utf8mb4%' AND collation_name <> ?`,
    [collation],
  )
  for (const { t } of tables)
    await db.run(
      `ALTER TABLE "${t.replaceAll('"', '""')}" CONVERT TO CHARACTER SET utf8mb4 COLLATE ${collation}`,
    )
  return tables.map((r) => r.t)
}

/**
 * Runs the several statements that stand for one (`... RETURNING` without the server's) as one:
 * a transaction of their own, or a savepoint in the caller's.
 */
type Atomic = <T>(fn: (tx: Db) => Promise<T>) => Promise<T>

function wrap(exec: Exec, tx: Db['tx'], atomic: Atomic, root: () => Db, flavour: () => Promise<Flavour>): Db {
  const native = async () => (await flavour()).returning
  const self: Db = {
    dialect: 'mysql',
    async all<T = Row>(sql: string, params: readonly Param[] = []) {
      if (isUpdateReturning(sql)) return atomic((t) => updateReturning<T>(t, sql, params))
      if (isInsertReturning(sql) && !(await native()))
        return atomic((t) => insertReturning<T>(t as RawDb, sql, ...prepare(sql, params)))
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
      const { mariadb } = await flavour()
      const text = /\b(CREATE|ALTER) TABLE\b/i.test(sql) ? mysqlDdl(sql, keyedColumns([sql])) : sql
      await execDdl(
        exec,
        text.replace(/\bCOLLATE=utf8mb4_bin\b/g, `COLLATE=${noPadCollation(mariadb)}`),
        mariadb,
      )
    },
    ping: () => root().ping(),
    close: () => root().close(),
  }
  return self
}

/** One connection's transaction, nesting as savepoints; user locks (GET_LOCK) end with it. */
function onConnection(
  conn: PoolConnection,
  root: () => Db,
  flavour: () => Promise<Flavour>,
  strict: Strict,
): Db {
  let depth = 0
  let locks = false
  const exec: Exec = strict(async (sql, params) => {
    if (/\bGET_LOCK\s*\(/i.test(sql)) locks = true
    return send(conn, sql, values(params))
  })
  const savepoint: Db['tx'] = async (fn) => {
    const name = `sp${++depth}`
    await send(conn, `SAVEPOINT ${name}`)
    try {
      const out = await fn(self)
      await send(conn, `RELEASE SAVEPOINT ${name}`)
      return out
    } catch (e) {
      if (!isConnectionFault(e)) await send(conn, `ROLLBACK TO SAVEPOINT ${name}`)
      throw e
    }
  }
  // A store issues several statements at once on its transaction (core/db/bulk.ts): two
  // emulated RETURNINGs among them would open overlapping savepoints, and releasing the first
  // releases every later one (InnoDB), so the second's release fails ("SAVEPOINT does not exist",
  // seen on MySQL 9.7). They take turns; what they run inside opens no savepoint of its own.
  let turn: Promise<unknown> = Promise.resolve()
  const atomic: Atomic = (fn) => {
    const run = turn.then(
      () => savepoint(fn),
      () => savepoint(fn),
    )
    turn = run.catch(() => undefined)
    return run
  }
  const self: Db = wrap(exec, savepoint, atomic, root, flavour)
  return Object.assign(self, {
    raw: (sql: string, params: readonly Param[]) => exec(sql, params),
    releaseLocks: async () => {
      if (locks) await send(conn, 'DO RELEASE_ALL_LOCKS()')
    },
  })
}

export function openMysql(url: string, opts: MysqlOptions = {}): Db {
  const mysql: typeof import('mysql2') = require('mysql2')
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
    // Prepared reads kept per connection: the server allows 16,382 in all by default.
    maxPreparedStatements: 256,
  })
  // Every new connection is set up before its first statement (mysql2 runs them in order).
  // The session's collation is the tables' (a CAST's text is the session's: COALESCE of one and a
  // column of another collation is an error). mysql2 tells MariaDB by the handshake.
  pool.on('connection', (c) => {
    c.query(session((c as unknown as { _isMariaDB?: boolean })._isMariaDB === true))
  })
  // INSERT IGNORE stays strict on every connection (mysql-widths.ts).
  const strict = widthGuard((sql, params) => send(pool, sql, values(params)))
  const exec: Exec = strict((sql, params) =>
    send(pool, sql, values(params), params.length && PREPARABLE.test(sql) ? 'execute' : 'query'),
  )
  // MariaDB returns rows from INSERT ... RETURNING, MySQL 8 answers a syntax error: the server's
  // version is asked once.
  const forced = opts.insertReturning ?? (process.env.LIVEOPS_MYSQL_RETURNING === 'off' ? false : undefined)
  let server: Promise<Flavour> | undefined
  const flavour = () => {
    server ??= exec('SELECT VERSION() AS v', []).then(
      (r) => {
        const mariadb = /mariadb/i.test(String(rowsOf<{ v: string }>(r)[0]?.v))
        return { mariadb, returning: forced ?? mariadb }
      },
      (e) => {
        server = undefined
        throw e
      },
    )
    return server
  }
  const poller = new ChangePoller(exec)
  const transaction: Db['tx'] = async (fn) => {
    const conn = await new Promise<PoolConnection>((resolve, reject) =>
      pool.getConnection((e, c) => (e ? reject(e) : resolve(c))),
    )
    let broken = false
    try {
      await send(conn, 'BEGIN')
      const tx = onConnection(conn, () => root, flavour, strict) as Db & { releaseLocks(): Promise<void> }
      try {
        const out = await fn(tx)
        await send(conn, 'COMMIT')
        await tx.releaseLocks()
        return out
      } catch (e) {
        if (isConnectionFault(e)) broken = true
        else {
          await send(conn, 'ROLLBACK')
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
  }
  const root: Db & Pick<ChangePoller, 'listen' | 'notify'> = {
    ...wrap(exec, transaction, transaction, () => root, flavour),
    location: { url },
    listen: (channel: string, fn: (payload: string) => void) => poller.listen(channel, fn),
    notify: (channel: string, payload: string) => poller.notify(channel, payload),
    async ping() {
      const t = performance.now()
      await send(pool, 'SELECT 1')
      return performance.now() - t
    },
    async close() {
      await poller.close()
      await new Promise<void>((resolve, reject) => pool.end((e) => (e ? reject(e) : resolve())))
    },
  }
  return root
}
