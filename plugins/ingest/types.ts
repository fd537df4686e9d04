import type { Db, MigrationSet } from '../../core/db'
import type { InvocationQuery, InvocationRow } from './store/store'

/** One stored event as `IngestService.scan` returns it. */
export interface ScannedEvent {
  /** The store's time-ordered id: pass the last one as `afterId` for the next page. */
  id: number
  gameId: string
  env: string
  event: string
  /** Client time, epoch ms. */
  ts: number
  userId: string | null
  sessionId: string | null
  amountCents: number | null
  /** The event object as sent (business fields at top level or inside `attrs`). */
  props: Record<string, unknown>
}

/** What `IngestService.timeline` walks: the stream, the client-time range, the id range and the page size. */
export interface TimelineQuery {
  gameId: string
  env: string
  events?: string[]
  from: number
  to: number
  afterId: number
  toId: number
  limit: number
}

/**
 * A page of `IngestService.timeline` as columns: row i is `userId[i]` did `event[i]` at client
 * time `ts[i]` (epoch ms), rows in id order. Who did what when, nothing else.
 */
export interface TimelinePage {
  userId: string[]
  event: string[]
  ts: number[]
}

/**
 * A page of `IngestService.timelineText` as the store sent it, UTF-8 bytes: `rows` rows in id
 * order, their users joined by U+0001 in `users`, their names likewise in `events`, their client
 * times as decimal integers joined by commas in `ts`, each the time (epoch ms) minus `since`. No
 * user or name of such a page holds U+0001 (a page that has one comes as a `TimelinePage`), so
 * the i-th part of each is row i (byte 1 occurs in UTF-8 only as U+0001).
 */
export interface TimelineText {
  rows: number
  users: Uint8Array
  events: Uint8Array
  since: number
  ts: Uint8Array
}

/**
 * What the ingest plugin offers the plugins that depend on it (`ctx.service('ingest')`): the
 * event store and the log's consumers' tables in it, and server-side writes.
 */
/**
 * A sampling filter of one game and environment (the analytics `filters`), applied by the
 * client-facing ingestion routes on top of the environment's sampling rate. Payments are never
 * sampled or dropped; server-side writes are not filtered.
 */
export interface IngestFilter {
  /** Share of users kept, 0..1, multiplying the environment's own rate. */
  samplingRate: number
  /** Event names not stored at all. */
  dropEvents: ReadonlySet<string>
}

export interface IngestService {
  /**
   * Tables a consumer of the event log keeps beside the log (they are written in the transaction
   * that reads it): applied to a separate event store under `plugin`'s ledger, after ingest's own.
   * In the main store the owner's manifest migrations created them already. Call in `setup`.
   */
  storeTables(set: MigrationSet): void
  /**
   * Retention: called per environment with the cutoff (epoch ms) when ingest purges raw events,
   * for a consumer's detail; answers how many rows went. Call in `setup`.
   */
  onPurge(purge: (db: Db, env: { gameId: string; env: string }, cutoff: number) => Promise<number>): void
  /**
   * A consumer's result tables, each keyed by `game_id` and `env`: when an environment is deleted
   * (or a game, with every environment), ingest deletes its raw rows, lets the consumers take in
   * what was committed before, then deletes its rows of these tables and calls `after` (to drop
   * what the consumer caches of it). Call in `setup`.
   */
  onForget(tables: readonly string[], after?: (stream: { gameId: string; env?: string }) => void): void
  /**
   * A consumer's result tables and the event-time columns of each (epoch ms): the one-time
   * clean-up of far-dated rows (ingest migration 011, store/far-dated.ts) deletes their rows with
   * a time no event inside the event-time window could have made, then calls `after` (to drop what
   * the consumer caches). Call in `setup`.
   */
  onFarDated(tables: Readonly<Record<string, readonly string[]>>, after?: () => void): void
  /**
   * The event store: the main store, or the one `useStore` named (from start on). The event log
   * and its consumers' results live here.
   */
  readonly db: Db
  /**
   * Keeps events (and the log's consumers' results) in another store: a SQLite path or a
   * PostgreSQL URL; `embedded`, `none` or empty keep the main store. Call in `setup` (the analytics
   * plugin's warehouse setting); the store opens at start, migrated for ingest and `storeTables`.
   */
  useStore(dsn: string): void
  /**
   * Validates and stores events as a server-side write (not sampled; personal data policy
   * applied); 400 naming every bad event, nothing stored. Resolves once they are durable.
   */
  write(events: unknown[], opts: { payments: boolean }): Promise<{ ok: true; accepted: number }>
  /**
   * Stores already-validated events (used by tests and other plugins); resolves once they are
   * durable.
   */
  ingest(events: Array<Record<string, unknown>>): Promise<{ accepted: number }>
  /**
   * Why an event time `ts` (epoch ms) received at `now` is refused, or undefined: outside
   * `max_event_age_days` before and `max_event_future_s` after `now` (docs/analytics.md, "Event
   * times"). For plugins that take event times of their own (the agents' reports), so they name
   * their field; `write` and `ingest` refuse such events anyway.
   */
  eventTimeProblem(ts: number, now: number): string | undefined
  /** Stored invocations, newest first, paged (the invocation list is a raw read). */
  invocations(
    q: InvocationQuery,
  ): Promise<{ items: InvocationRow[]; total: number; page: number; pageSize: number }>
  /** Sets or (undefined) removes a game and environment's sampling filter; the next request follows it. */
  setFilter(gameId: string, env: string, filter: IngestFilter | undefined): void
  /**
   * One page of raw events of a game (training sets of the ml plugin), in store order, at most
   * `limit` (<= 10,000) rows: `env`, `events` (names) and the client-time range `[from, to]`
   * (epoch ms) narrow it; `afterId` continues after the last row of the previous page. A full
   * read walks the event table once, page by page. `toId` ends the walk at that id (ids are
   * receive time x 1024: a reader that knows when the events of a range arrived walks only
   * that slice); `userId` narrows to one user; `withProps: false` is a light read: `props` empty,
   * `sessionId` and `amountCents` null (and `env` empty when the query names none).
   */
  scan(q: {
    gameId: string
    env?: string
    events?: string[]
    from: number
    to: number
    afterId?: number
    toId?: number
    userId?: string
    withProps?: boolean
    limit: number
  }): Promise<ScannedEvent[]>
  /**
   * The lightest read of raw events, for sequence analyses (funnels, paths): the events of `env`
   * with a user, client time `[from, to)` and ids in `(afterId, toId]`, in id order, each only
   * its user, name and time, handed to `each` in pages of at most `limit` (<= 10,000) rows (never
   * an empty one); `events` narrows by name. Resolves once the last page was handed over.
   */
  timeline(q: TimelineQuery, each: (page: TimelinePage) => void): Promise<void>
  /**
   * The same walk with each page left as the store's joined text (both engines; a page whose
   * users or names hold U+0001 comes as `TimelinePage`): the reader parses it in place instead
   * of building a string per user and name (splitting a page cost more than the funnel on it).
   * A SQLite store with a file reads it on threads of its own (`WalkThreads`).
   */
  timelineText(q: TimelineQuery, each: (page: TimelineText | TimelinePage) => void): Promise<void>
  /** Waits for every commit queued so far (tests, shutdown of dependants). */
  idle(): Promise<void>
}

/** The part of the service the ml plugin reads its training sets through. */
export type EventsService = Pick<IngestService, 'scan' | 'ingest'>

declare module '../../core/plugin' {
  interface Services {
    ingest: IngestService
  }
}
