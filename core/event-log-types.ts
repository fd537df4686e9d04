import type { Db } from './db'

/**
 * The rows of the event log as consumers see them: what ingestion committed, deduplicated by one
 * rule (event_id; a payment also by order_id + status). Consumers import these, never the
 * ingest plugin's own rows.
 */
export interface LogEvent {
  kind: 'event'
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
  /** The event's properties as JSON text. */
  props: string
}

export interface LogPayment {
  kind: 'payment'
  id: number
  receivedAt: number
  gameId: string
  env: string
  orderId: string
  status: string
  amountCents: number
  currency: string | null
  userId: string | null
  ts: number
}

export interface LogInvocation {
  kind: 'invocation'
  id: number
  receivedAt: number
  gameId: string
  env: string
  ts: number
  functionId: string
  actor: string | null
  outcome: string
  durationMs: number | null
  traceId: string | null
}

export type LogRow = LogEvent | LogPayment | LogInvocation
export type LogKind = LogRow['kind']

/**
 * A place in the log. `seq` numbers the transaction that committed the row (PostgreSQL: its xid,
 * `pg_current_xact_id()`; SQLite: the one writer's commit counter) and `pos` orders the rows of
 * one transaction (unique within it across kinds). Positions compare by (seq, pos).
 */
export interface LogPosition {
  seq: number
  pos: number
}

export interface LogEntry {
  at: LogPosition
  row: LogRow
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
  /** How many rows lie after `after` (for the lag), and when the oldest of them was received. */
  pending(after: LogPosition, db: Db): Promise<{ rows: number; oldestReceivedAt: number | null }>
  /** The newest position (the end of the log now). */
  head(db: Db): Promise<LogPosition>
}

/**
 * A named derivation of the log. `handle` writes its results through `tx`, the transaction that
 * then advances the cursor: a throw rolls both back and the same rows come again.
 */
export interface LogConsumer {
  /** Unique in the app; the cursor's key. */
  name: string
  /** Rows per call (default 1000). */
  batch?: number
  /** The kinds it wants (default all); the cursor still moves past the others. */
  kinds?: readonly LogKind[]
  handle(rows: LogRow[], tx: Db): Promise<void>
  /**
   * Deletes its results for times at or after `from` (epoch ms; everything when undefined), in
   * `tx`, before a rebuild delivers those rows again.
   */
  reset(from: number | undefined, tx: Db): Promise<void>
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
}

/** `ctx.events`: the committed log and its consumers (core/event-log.ts, docs/plugins.md). */
export interface EventLogService {
  /** Installs the log's provider; one per app (the ingest plugin). */
  provide(source: LogSource): void
  /** Registers a consumer; it runs from start to stop, one instance at a time per name. */
  consume(consumer: LogConsumer): void
  /** Wakes the consumers now (a provider calls it after a commit). */
  notify(): void
  /** Resolves when every consumer (or the named one) has taken in the log as it stood at the call. */
  drain(name?: string, timeoutMs?: number): Promise<void>
  /** Recomputes a consumer's results from the log, from `from` (epoch ms of event time) on. */
  rebuild(name: string, from?: number): Promise<void>
  status(): Promise<ConsumerStatus[]>
  /** The time every consumer's results are complete to: the smallest `asOf`. */
  asOf(name?: string): Promise<number>
  names(): string[]
}
