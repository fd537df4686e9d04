import { Writable } from 'node:stream'
import type postgres from 'postgres'
import { isConnectionFault } from './faults'
import { type Progress, WatchedPool } from './pg-pool'
import type { Db, Param, Row } from './types'

const converted = new Map<string, string>()

/** `?` placeholders become `$1..$n`; quoted text is left alone. Cached per statement text. */
export function toPg(sql: string): string {
  let out = converted.get(sql)
  if (out !== undefined) return out
  let n = 0
  let quoted = false
  out = ''
  for (const ch of sql) {
    if (ch === "'") quoted = !quoted
    out += ch === '?' && !quoted ? `$${++n}` : ch
  }
  converted.set(sql, out)
  return out
}

type Sql = postgres.Sql | postgres.TransactionSql

/**
 * One value in COPY's text format: `\N` for NULL; in text, the backslash and the three characters
 * that delimit rows and columns escaped, and NUL (which PostgreSQL's text cannot hold) dropped, as
 * `jsonRows` does; a lone surrogate becomes U+FFFD when the text is encoded. A number that is not
 * finite is NULL, as JSON makes it.
 */
function copyValue(v: Param | undefined): string {
  if (v === null || v === undefined) return '\\N'
  switch (typeof v) {
    case 'string':
      return /[\\\t\n\r\0]/.test(v) ? v.replace(/[\\\t\n\r\0]/g, copyEscape) : v
    case 'number':
      return Number.isFinite(v) ? String(v) : '\\N'
    case 'bigint':
      return String(v)
    case 'boolean':
      return v ? 't' : 'f'
    default:
      return `\\\\x${Buffer.from(v).toString('hex')}`
  }
}
const copyEscape = (c: string) =>
  c === '\\' ? '\\\\' : c === '\t' ? '\\t' : c === '\n' ? '\\n' : c === '\r' ? '\\r' : ''

/** Rows of `width` values, one after another, as COPY's text format. */
function copyText(params: readonly Param[], width: number): string {
  let out = ''
  for (let i = 0; i < params.length; i += width) {
    out += copyValue(params[i])
    for (let c = 1; c < width; c++) out += `\t${copyValue(params[i + c])}`
    out += '\n'
  }
  return out
}

/** What `copy` uses of a postgres.js query: it settles once with the stream, then once more. */
interface CopyQuery {
  resolve(x: unknown): void
  reject(e: unknown): void
  writable(): Promise<Writable>
}

/**
 * COPY in. postgres.js resolves a COPY's query with the stream when the server is ready for the
 * data, and after the data calls the query's own `resolve` (the server's count) or `reject` (its
 * error) on a promise that has settled already: an error there would be lost and the stream's
 * `finish` never come. So the outcome is taken from those two calls (postgres.js 3.4).
 */
async function copyIn(sql: Sql, table: string, cols: readonly string[], params: readonly Param[]) {
  const q = sql.unsafe(`COPY ${table} (${cols.join(', ')}) FROM STDIN`) as unknown as CopyQuery
  const done = new Promise<number>((resolve, reject) => {
    const [res, rej] = [q.resolve, q.reject]
    q.resolve = (x) => {
      res(x)
      if (!(x instanceof Writable)) resolve(Number((x as { count?: number } | undefined)?.count ?? 0))
    }
    q.reject = (e) => {
      rej(e)
      reject(e)
    }
  })
  done.catch(() => undefined)
  const stream = await q.writable()
  // An error before the end destroys the stream with it (and rejects `done`).
  stream.on('error', () => undefined)
  stream.end(Buffer.from(copyText(params, cols.length)))
  return done
}

/** Runs a statement on a connection: the watched pool's for the store, the transaction's inside one. */
type On = <T>(fn: (sql: Sql) => Promise<T>) => Promise<T>

/**
 * A transaction whose connection was lost. postgres.js 3.4 sends a statement given to such a
 * transaction, and the ROLLBACK it sends itself when the transaction's function fails, to the
 * dead connection, where a write scheduled on its closed socket throws outside any promise and
 * ends the process (seen under a PostgreSQL crash with transactions in flight). So once a
 * statement of it failed on its connection, its next statements are refused here, and its
 * function never settles: postgres.js then sends no ROLLBACK (PostgreSQL rolls back the
 * transaction of a closed connection itself), and the transaction's caller has its answer already,
 * the connection's failure.
 */
function onTx(s: Sql, lost: { yes: boolean }): On {
  return async (f) => {
    if (lost.yes)
      throw Object.assign(new Error('CONNECTION_CLOSED: the transaction lost its connection'), {
        code: 'CONNECTION_CLOSED',
      })
    try {
      return await f(s)
    } catch (e) {
      if (isConnectionFault(e)) lost.yes = true
      throw e
    }
  }
}

function afterLoss<T>(lost: { yes: boolean }, result: Promise<T>): Promise<T> {
  return result.catch((e) => {
    if (lost.yes || isConnectionFault(e)) {
      lost.yes = true
      return new Promise<T>(() => undefined)
    }
    throw e
  })
}

/**
 * PostgreSQL's text cannot hold U+0000 (SQLite and MariaDB store it): a NUL in any statement's
 * parameter failed as "invalid byte sequence" and the request answered 500, public routes
 * included (a login's email, a config lookup's game id). Refused before it is sent: 400, which
 * the error mapping answers from `status` (security audit).
 */
function refuseNul(params: readonly Param[]): void {
  for (const p of params)
    if (typeof p === 'string' && p.includes('\0'))
      throw Object.assign(new Error('a text holds a NUL character (U+0000), which is not accepted'), {
        status: 400,
      })
}

function wrap(on: On, root: () => Db): Db {
  const self: Db = {
    dialect: 'postgres',
    async all<T = Row>(q: string, params: readonly Param[] = []) {
      refuseNul(params)
      return (await on((sql) =>
        sql.unsafe(toPg(q), params as postgres.ParameterOrJSON<never>[], { prepare: true }),
      )) as unknown as T[]
    },
    async get<T = Row>(q: string, params: readonly Param[] = []) {
      const rows = await self.all<T>(q, params)
      return rows[0]
    },
    async raw(q: string, params: readonly Param[] = []) {
      refuseNul(params)
      return (await on(async (sql) =>
        sql.unsafe(toPg(q), params as postgres.ParameterOrJSON<never>[], { prepare: true }).raw(),
      )) as unknown as Array<Array<Uint8Array | null>>
    },
    async run(q: string, params: readonly Param[] = []) {
      refuseNul(params)
      const res = await on((sql) =>
        sql.unsafe(toPg(q), params as postgres.ParameterOrJSON<never>[], { prepare: true }),
      )
      return res.count
    },
    async tx<T>(fn: (tx: Db) => Promise<T>) {
      return on(async (sql) => {
        const lost = { yes: false }
        const inner = (s: Sql) => afterLoss(lost, fn(wrap(onTx(s, lost), root)))
        const done = 'savepoint' in sql ? sql.savepoint(inner) : (sql as postgres.Sql).begin(inner)
        // postgres.js rejects a transaction whose connection closed at once; later statements
        // of it are refused here (see afterLoss).
        done.catch((e) => {
          if (isConnectionFault(e)) lost.yes = true
        })
        return (await done) as T
      })
    },
    copy: (table, cols, params) => on((sql) => copyIn(sql, table, cols, params)),
    async exec(q: string) {
      await on((sql) => sql.unsafe(q))
    },
    ping: () => root().ping(),
    close: () => root().close(),
  }
  return self
}

export interface PgOptions {
  /** Schema every connection uses; tests get a fresh one each. */
  schema?: string
  max?: number
  /** Seconds a connection attempt may take (default 2). */
  connectTimeoutS?: number
  /**
   * Commits without waiting for the WAL flush (`synchronous_commit = off`): for state whose last
   * fraction of a second may be lost in a PostgreSQL crash (rate counters, login throttling).
   */
  asyncCommit?: boolean
  /** Told when the store stops answering and when it answers again (for the log). */
  onOutage?: (what: 'down' | 'up', detail: string) => void
}

/** BIGINT (epoch ms, counts) and NUMERIC (sums) come back as JS numbers, as on SQLite. */
const numberTypes = {
  bigint: {
    to: 20,
    from: [20],
    serialize: (x: number | bigint) => String(x),
    parse: (x: string) => Number(x),
  },
  numeric: { to: 1700, from: [1700], serialize: (x: number) => String(x), parse: (x: string) => Number(x) },
}

/** When each server (by URL) last answered this process: its pools judge an outage together. */
const progress = new Map<string, Progress>()

export function openPostgres(url: string, opts: PgOptions = {}): Db {
  // postgres.js and the Node modules it loads are evaluated when a PostgreSQL store is first
  // opened: a server on SQLite never does (~13 ms of the binary's start). The bundler keeps a
  // required module as a function it runs on the first call.
  const connect: typeof postgres = require('postgres').default
  const settings = {
    onnotice: () => undefined,
    types: numberTypes,
    connection: {
      ...(opts.schema ? { search_path: opts.schema } : {}),
      ...(opts.asyncCommit ? { synchronous_commit: 'off' } : {}),
    },
  }
  // A connection attempt to a silent host gives up after connect_timeout; a silent established
  // connection is found by the pool's watch (pg-pool.ts). Either way a request fails fast (503).
  const pool = new WatchedPool(
    () => connect(url, { ...settings, max: opts.max ?? 10, connect_timeout: opts.connectTimeoutS ?? 2 }),
    // The probe's deadlines are the pool's (pg-pool.ts): a busy server may take seconds to start a backend.
    // Its `SELECT 1` needs no array types: without fetch_types a probe is one query, not two (the
    // catalog query was 7% of PostgreSQL's busy samples in a rebuild, probes being frequent then).
    () => connect(url, { ...settings, max: 1, connect_timeout: 30, fetch_types: false }),
    {
      down: (cause) => opts.onOutage?.('down', cause),
      up: (ms) => opts.onOutage?.('up', `after ${Math.round(ms)} ms`),
    },
    progressOf(url),
  )
  const on: On = (fn) => pool.run(fn)
  const root: Db & {
    listen(channel: string, fn: (payload: string) => void): Promise<() => Promise<void>>
    notify(channel: string, payload: string): Promise<void>
  } = {
    ...wrap(on, () => root),
    location: { url, schema: opts.schema },
    // LISTEN holds one connection of its own; postgres.js re-listens after a reconnect, and the
    // pool moves it to the new pool that replaces one after an outage.
    listen: (channel, fn) => pool.listen(channel, fn),
    async notify(channel, payload) {
      await on((sql) => sql`SELECT pg_notify(${channel}, ${payload})`)
    },
    async ping() {
      const t = performance.now()
      await on((sql) => sql`SELECT 1`)
      return performance.now() - t
    },
    close: () => pool.close(),
  }
  return root
}

function progressOf(url: string): Progress {
  let p = progress.get(url)
  if (!p) {
    p = { at: 0 }
    progress.set(url, p)
  }
  return p
}
