import type { Db, Migration, Row } from '../../core/db'
import type { NormEvent } from './signed/validate'

/**
 * The extension point of ingest (issue 16 point 5), made the way notify takes providers: a
 * plugin that reads something derived from the events registers a rollup into ingest's group
 * commit with `ctx.service('ingest').registerRollup(rollup)`, and its rows are written in the
 * same transaction as the raw rows, on both engines and on the persist thread alike.
 *
 * A rollup has two halves. The event-loop half (`Rollup`) sees each commit's accepted events
 * and returns rows: plain JSON values, because they cross to the persist thread. The write half
 * (`RollupWriter`) runs in the commit's transaction wherever the transaction runs; the persist
 * thread cannot receive a function, so write halves are named in one static map,
 * `plugins/rollups.ts`, which the thread imports (the compiled binary carries it the same way).
 */
export interface Rollup<R = unknown> {
  /** Names the write half in `plugins/rollups.ts`. */
  name: string
  /**
   * The rollup's tables for a separate event store (WAREHOUSE_DSN naming another store): ingest
   * applies them there under `plugin`'s ledger, after its own. In the main store the owner's
   * manifest migrations created them already.
   */
  migrations?: { plugin: string; migrations: readonly Migration[] }
  /** Once, before the first commit, with the event store: warm caches from what is stored. */
  init?(db: Db): Promise<void>
  /**
   * Once per commit, on the event loop, in commit order: this commit's rows, or undefined when
   * it adds none. The synchronous part runs before the next commit's; keep it free of I/O where
   * possible. `done` runs once the commit is durable (what it stored is then known).
   */
  gather(
    events: readonly NormEvent[],
    /** `firstId`: the stored id of `events[0]`; event i is stored as `firstId + i`. */
    commit: { receivedAt: number; firstId: number },
  ): RollupBatch<R> | undefined | Promise<RollupBatch<R> | undefined>
  /**
   * Ingest's retention purge, per environment: deletes this rollup's detail older than `cutoff`
   * (epoch ms) and answers how many rows went. Counters meant to outlive raw events stay.
   */
  purge?(db: Db, env: { gameId: string; env: string }, cutoff: number): Promise<number>
}

export interface RollupBatch<R> {
  rows: R
  done?(): void
}

/** What the commit stored of ingest's own rows, for rollups that count from them. */
export interface Stored {
  /**
   * The payment rows that were new in this commit (a repeated order and status is stored once):
   * `game_id, env, order_id, status, amount_cents, ts, user_id`. Resolves at once to [] when
   * the commit has none.
   */
  payments: Promise<Row[]>
  /** Whether the commit holds payment rows at all (so a writer need not wait for them). */
  hasPayments: boolean
}

/**
 * The write half: runs in the commit's transaction; a throw rolls the whole commit back. `early`
 * is what its `early` part (if any) resolved to.
 */
export type RollupWrite<R = unknown, E = unknown> = (
  tx: Db,
  rows: R,
  stored: Stored,
  early: Promise<E>,
) => Promise<unknown>

/**
 * An optional first part of a write half, for rows that only one user's events touch (first
 * sights): on PostgreSQL ingest sends every rollup's `early` part before its rollup lock (see
 * `persist`), so that they run beside the other commits' instead of one commit at a time. It may
 * touch no row that any rollup writes after the lock, or commits could deadlock.
 */
export type RollupEarly<R = unknown, E = unknown> = (tx: Db, rows: R) => Promise<E>

export type RollupWriter<R = unknown, E = unknown> = RollupWrite<R, E> & { early?: RollupEarly<R, E> }

/**
 * Maintenance a rollup does in a transaction of its own, between commits, when the SQLite
 * persist thread has none queued (the analytics user-day log's merge): work that would otherwise
 * lengthen a commit and every request waiting on it. Answers whether it did anything (the thread
 * then asks again while it stays idle). A commit arriving meanwhile waits for it, so one call
 * does a bounded slice.
 */
export type RollupUpkeep = (db: Db) => Promise<boolean>

/** Types a write half (and its optional early part) for the static map. */
export function defineRollupWriter<R, E = undefined>(
  write: RollupWrite<R, E>,
  early?: RollupEarly<R, E>,
): RollupWriter<unknown> {
  return Object.assign(write, { early }) as RollupWriter<unknown>
}
