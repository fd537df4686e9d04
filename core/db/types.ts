export type Param = string | number | bigint | boolean | null | Uint8Array
export type Row = Record<string, unknown>
export type Dialect = 'sqlite' | 'postgres' | 'mysql'

/** A store's address: a SQLite file path or a PostgreSQL URL, with the schema its connections use. */
export interface StoreLocation {
  url: string
  schema?: string
  /** SQLite: the event loop's write gate (write-gate.ts), for a thread that writes the same file. */
  gate?: SharedArrayBuffer
}

/**
 * The one storage facade. Both engines run the same SQL: `?` placeholders, TEXT ids, BIGINT
 * epoch-ms times, JSON as TEXT, `ON CONFLICT`, `RETURNING`. Reads outside a transaction never see
 * uncommitted rows; writes on SQLite go through one serialized writer.
 *
 * PostgreSQL must know each parameter's type: an optional filter written `(? IS NULL OR col = ?)`
 * needs `(CAST(? AS TEXT) IS NULL OR col = ?)`.
 */
export interface Db {
  readonly dialect: Dialect
  /**
   * How another thread opens this same store with connections of its own (a persist thread);
   * undefined for an in-memory SQLite store, which no other connection can reach.
   */
  readonly location?: StoreLocation
  /** Rows of a query. */
  all<T = Row>(sql: string, params?: readonly Param[]): Promise<T[]>
  /** First row or undefined. */
  get<T = Row>(sql: string, params?: readonly Param[]): Promise<T | undefined>
  /** A write; resolves to the number of changed rows. */
  run(sql: string, params?: readonly Param[]): Promise<number>
  /** Runs `fn` in one transaction; a throw rolls back only this transaction's writes. Nests as savepoints. */
  tx<T>(fn: (tx: Db) => Promise<T>): Promise<T>
  /**
   * PostgreSQL only: rows of a query as arrays of each column's bytes as the server sent them
   * (text format, UTF-8; null for NULL), nothing parsed: for readers of large joined texts that
   * parse them in place (decoding them to strings costs more than the parse).
   */
  raw?(sql: string, params?: readonly Param[]): Promise<Array<Array<Uint8Array | null>>>
  /**
   * PostgreSQL only: `COPY table (cols) FROM STDIN` of rows given one value after another in
   * `cols` order; resolves to the number of rows copied. The cheapest way in for many plain rows
   * (no `ON CONFLICT`, no `RETURNING`): the server parses no JSON and plans nothing. While it
   * runs, no other statement may be sent on the same connection (in a transaction: await it
   * before sending the next).
   */
  copy?(table: string, cols: readonly string[], params: readonly Param[]): Promise<number>
  /** Several statements without parameters (DDL). */
  exec(sql: string): Promise<void>
  /** Round trip in milliseconds; throws when the store is unreachable. */
  ping(): Promise<number>
  close(): Promise<void>
}

export interface Migration {
  /** Positive and increasing within a plugin; the ledger key with the plugin name. */
  id: number
  name: string
  /** Portable SQL, run on both engines unless `pg` is given. */
  sql: string
  /** A PostgreSQL twin for the rare statement that must differ. */
  pg?: string
  /** A MySQL twin (else `sql`, translated by core/db/mysql-sql.ts `mysqlDdl`). */
  mysql?: string
}
