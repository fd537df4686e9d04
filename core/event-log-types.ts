import type { Db } from './db'

/**
 * One row of the event log as consumers see it: an event ingestion committed, deduplicated by one
 * rule every consumer sees (the client's event_id; a payment event also by order_id + status, so
 * a re-sent payment is in the log once). The provider (the ingest plugin) parses what its rows
 * say, so consumers import nothing of its own: a payment's facts and a function call's facts
 * come with the event.
 */
export interface LogEvent {
  /** The row's id in the log (time-ordered; unique). */
  id: number
  receivedAt: number
  gameId: string
  env: string
  event: string
  ts: number
  userId: string | null
  sessionId: string | null
  amountCents: number | null
  currency: string | null
  durationMs: number | null
  network: string | null
  level: string | null
  /** The client's id of the event, when it sent one. */
  eventId: string | null
  /** The event's other fields. */
  props: Record<string, unknown>
  /** A payment event's order (the log holds each order and status once, bar a superseding row). */
  payment?: LogPayment
  /** A `function.invoke` event's call. */
  invocation?: LogInvocation
}

/**
 * A payment's facts. `supersedes`: the row is the trusted server route's write of an order and
 * status a signed client stored first (docs/security.md, "Superseding payments"): a consumer that
 * counted `supersedes` (the client's row as it stood, same order and status) takes it off, then
 * counts this row. `recount: false` (a rebuild from a date whose cut lies between the two rows'
 * times): only the taking off applies, this row's own counts were kept.
 */
export interface LogPayment {
  orderId: string
  status: 'success' | 'refunded' | 'failed'
  amountCents: number
  supersedes?: LogEvent
  recount?: false
}

/** What a `function.invoke` event says of its call. */
export interface LogInvocation {
  functionId: string
  outcome: 'success' | 'failure'
  actor: string | null
  traceId: string | null
}

export type LogRow = LogEvent

/**
 * A place in the log. `seq` numbers the transaction that committed the row (PostgreSQL: its xid,
 * `pg_current_xact_id()`; SQLite: a counter its commits take under the one write lock) and `pos`
 * orders the rows of one transaction (the row's id). Positions compare by (seq, pos).
 */
export interface LogPosition {
  seq: number
  pos: number
}

export interface LogEntry {
  at: LogPosition
  row: LogRow
}

export interface Pending {
  rows: number
  oldestReceivedAt: number | null
}

export interface PendingOptions {
  until?: { at: LogPosition; rows: number }
  count?: boolean
}

/**
 * What provides the log (the ingest plugin). Every method reads through the `db` it is given (the
 * consumer's transaction when there is one).
 */
export interface LogSource {
  /**
   * The store the log lives in, when it is not the app's (a separate event store): the cursors
   * and every consumer's results are written there, in the transaction that reads the rows.
   */
  db?: Db
  /**
   * Up to `limit` rows after `after` and with seq below `below`, in (seq, pos) order. Rows below
   * the horizon come from finished transactions only, so none can appear there later.
   */
  read(after: LogPosition, below: number, limit: number, db: Db): Promise<LogEntry[]>
  /**
   * How many rows lie after `after` (for the lag; a source may stop counting at a cap), and when
   * the next of them was received. `o.until`: the rows after `until.at` (a later position) are
   * known to number `until.rows`; count only those up to it and add them. `o.count: false`: the
   * time alone (`rows` is then 0).
   */
  pending(after: LogPosition, db: Db, o?: PendingOptions): Promise<Pending>
  /** The newest position (the end of the log now). */
  head(db: Db): Promise<LogPosition>
  /**
   * PostgreSQL, optional: the seq below which every transaction that can still add rows has
   * finished (default: the server's oldest running transaction, which a long transaction
   * anywhere on the server holds back).
   */
  horizon?(db: Db): Promise<number>
  /**
   * Optional: no consumer of this process is before `lowest` (its slowest cursor, or the head
   * when it has none), so what the source keeps to count the rows after a cursor (`pending`) may
   * forget what lies before it. Called every 10 s while the log runs (`EventLog`); a cursor
   * before what was kept (a rebuild, another process's consumer) must still be counted.
   */
  trim?(lowest: LogPosition, db: Db): Promise<void>
  /**
   * Optional: rows no consumer is to take in (a deleted game's or environment's, whose results are
   * being deleted): the cursors move past them uncounted, so a consumer behind never writes
   * results back where the deletion has passed.
   */
  withheld?(row: LogRow): boolean
}

/** The seq a PostgreSQL row carries: the id of the transaction writing it. */
export const PG_SEQ_SQL = 'pg_current_xact_id()::text::bigint'

/**
 * A turn of the event loop between two slices of a rebuild's reset (`LogConsumer.reset`); throws
 * once the slices are to stop (the lease was lost, the app stops).
 */
export type Pause = () => Promise<void>

/**
 * A named derivation of the log. `handle` writes its results through `tx`, the transaction that
 * then advances the cursor: a throw rolls both back and the same rows come again.
 */
export interface LogConsumer {
  /** Unique in the app; the cursor's key. */
  name: string
  /** Rows per call (default 1000). */
  batch?: number
  /** Once at start, with the store the log and the consumers' results live in. */
  init?(db: Db): Promise<void>
  /**
   * Takes in a batch: writes its results through `tx`. What it returns runs once the transaction
   * committed (to remember what is now stored).
   */
  handle(rows: LogRow[], tx: Db, prepared?: unknown): Promise<unknown>
  /**
   * Optional first half of `handle`, outside the transaction: what needs no write (computing the
   * rows to write); its result reaches `handle` as `prepared`.
   */
  prepare?(rows: LogRow[]): Promise<unknown>
  /**
   * Drops what the consumer keeps in memory of its results: called when a batch rolled back and
   * when this instance (re)takes the consumer's lease, since another may have written meanwhile.
   */
  forget?(): void
  /**
   * Deletes its results for times at or after `from` (epoch ms; everything when undefined) through
   * `db`, before a rebuild delivers those rows again. No transaction holds it: each statement
   * commits alone, and the cursor moves afterwards in a transaction of its own. A large deletion
   * goes in slices (core/db/slices.ts) with `pause` between them: a turn of the event loop (on
   * SQLite a statement holds the thread), which throws once this instance lost the consumer's lease
   * or stops (the reset then ends there). Nothing else writes the results meanwhile (the consumer
   * takes no step), and a reset cut short is run again whole by the next holder of the lease (the
   * rebuild stays asked until the cursor moved): it must delete the same rows when run twice.
   */
  reset(from: number | undefined, db: Db, pause: Pause): Promise<void>
  /** Whether it can rebuild from a date (else only from the start of the log). */
  rebuildsFrom?: boolean
  /**
   * During a rebuild from `from`, the event time from which a game's rows are delivered again
   * (the results of earlier ones were kept by `reset`); default `from`. A consumer whose days are
   * each game's own (time zones) answers the start of that game's day.
   */
  replayFrom?(gameId: string, from: number): number | Promise<number>
}

/** One consumer's cursor and lag, as /healthz, the metrics and the admin route show it. */
export interface ConsumerStatus {
  name: string
  cursor: LogPosition
  delivered: number
  lagEvents: number
  lagSeconds: number
  /** The time the consumer's results are complete to (epoch ms). */
  asOf: number
  leaseOwner: string | null
  lastError: string | null
  rebuilding: boolean
  /** Rows set aside after its code failed on each alone (core/event-log-park.ts); a rebuild delivers them again. */
  parked: number
}

/** A row a consumer set aside (core/event-log-park.ts), as the admin route lists it. */
export interface ParkedEvent {
  at: LogPosition
  eventId: string | null
  gameId: string
  env: string
  event: string
  /** The event's time (epoch ms). */
  ts: number
  /** What the consumer's code threw on it, the last time. */
  error: string
  /** When it was set aside (epoch ms). */
  parkedAt: number
}

/** A commit's rows as its provider hands them over (`EventLogService.notify`). */
export interface Appended {
  entries: readonly LogEntry[]
  /** The last row committed before them; undefined when not known (the first commit after a start). */
  after: LogPosition | undefined
}

/** `ctx.events`: the committed log and its consumers (core/event-log.ts, docs/plugins.md). */
export interface EventLogService {
  /** Installs the log's provider; one per app (the ingest plugin). */
  provide(source: LogSource): void
  /** Registers a consumer; it runs from start to stop, one instance at a time per name. */
  consume(consumer: LogConsumer): void
  /**
   * Wakes the consumers now (a provider calls it after a commit). A provider that writes the log
   * alone (SQLite: one process owns the file) may hand over the rows the commit appended, all of
   * them in log order, and the last row committed before them when it knows it: consumers that
   * keep up then take them from memory instead of reading them back (core/event-log-tail.ts).
   */
  notify(appended?: Appended): void
  /**
   * Resolves when every consumer (or the named one) has taken in the log as it stood at the call;
   * rejects once `timeoutMs` passed without a step finding rows (a backlog it works through
   * keeps it going, to the head it read at the call).
   */
  drain(name?: string, timeoutMs?: number): Promise<void>
  /**
   * A reader's wait: a `drain`, waited for `timeoutMs` at most (not even for a step under way;
   * the drain goes on behind), never failing; answers `asOf` afterwards (the time every consumer's results are
   * complete to).
   */
  settle(timeoutMs: number): Promise<number>
  /**
   * Asks for a consumer's results to be recomputed from the log, from `from` (epoch ms of event
   * time) on; the instance holding its lease does it while ingestion goes on.
   */
  rebuild(name: string, from?: number): Promise<void>
  status(): Promise<ConsumerStatus[]>
  /** The rows a consumer set aside, newest first, at most `limit`, and how many there are. */
  parked(name: string, limit: number): Promise<{ total: number; items: ParkedEvent[] }>
  /** The time every consumer's results are complete to: the smallest `asOf`. */
  asOf(name?: string): Promise<number>
  names(): string[]
}
