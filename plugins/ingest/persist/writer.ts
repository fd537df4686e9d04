import type { Db, Param } from '../../../core/db'
import { GroupCommit } from '../../../core/db/group-commit'
import { rowsByKeys } from '../../../core/db/keyed'
import type { Appended, LogPosition } from '../../../core/event-log-types'
import type { Logger } from '../../../core/log'
import type { NormEvent } from '../signed/validate'
import { committedEntries } from '../store/log'
import type { RecentRows } from '../store/recent'
import { type CommitRows, DUPLICATE_EVENTS, DUPLICATE_PAYMENTS, persist } from './persist'
import { settlePayments } from './supersede'
import { REPEATED_IDS, firstOfEachId, firstOfEachPayment, gatherRows, nonceRows } from './writer-rows'

/**
 * Commits in flight at once. PostgreSQL overlaps round trips and fsyncs on several connections.
 * SQLite has one writer: with a persist thread (a file store), the event loop prepares the next
 * commits while the thread stores one; without one (`:memory:`), one at a time. Three rather than two on SQLite:
 * once merges left the commits (session 15) the thread still idled between them, and three pairs
 * of alternated batch runs measured 159,000 / 155,100 / 145,700 events/s against 155,100 /
 * 149,000 / 143,300 with two (docs/performance.md).
 */
export const COMMITS_IN_FLIGHT = { sqlite: 3, postgres: 3, mysql: 3 } as const
/** PostgreSQL's message for SQLSTATE 40P01 (errors cross from the persist thread as text). */
const DEADLOCK = /\bdeadlock detected\b/
/**
 * PostgreSQL's unique violation on a raw row's id: another instance sharing the store numbered
 * rows received in the same milliseconds (ids are receive time x 1024 plus a counter).
 */
const TAKEN_ID = /unique constraint "ingest_(events|invocations)_pkey"/

/** Largest transaction; a bigger backlog is committed in several. */
const MAX_ROWS_PER_TX = 20_000

interface Pending {
  events: NormEvent[]
  /** The signed request's nonce and when it leaves the replay window, stored with its events. */
  nonce?: [string, number]
}

/**
 * Group commit (performance note 2): requests hand their events over and wait; one writer
 * drains everything queued into a single transaction of raw rows, then acknowledges every
 * request in it (what is derived from them follows the event log, `ctx.events`). Under load the next transaction collects what arrived while
 * the previous one ran, so batches grow with the load and the event loop never waits on a lock.
 */
export class GroupWriter {
  /** Core's group commit (core/db/group-commit.ts): requests queued together share a transaction. */
  private group: GroupCommit<Pending>
  private ready: Promise<void> | undefined
  /** The last raw row id handed out (see `gatherRows`). */
  private ids = { last: 0 }
  private started = false
  /** Told after each commit (the event log wakes its consumers), with its rows where they are handed over. */
  private committed: ((appended?: Appended) => void) | undefined
  /**
   * Whether a commit's rows are handed to the consumers (SQLite: this process writes the log
   * alone, one commit at a time, on its persist thread or here, and the commits answer in the
   * order they ran), and the last row handed over.
   */
  private handOver = false
  private lastAt: LogPosition | undefined
  /** Elsewhere, the rows of the last commits, which the log's reads take instead of reading them back. */
  private recent: RecentRows | undefined

  /** Answers the seq the commit's events took, where the commit numbers them (`persist`). */
  private persistRows: (rows: CommitRows) => Promise<number | undefined>

  /**
   * `thread` runs each commit's transaction somewhere else (a persist thread with its own
   * connections); by default `persist` on `db`. It must resolve only once the rows are committed.
   * `observe` learns of every commit: its events, its time from preparing the rows to the
   * answer, and whether it committed (the plugin's metrics).
   */
  constructor(
    private db: Db,
    private log: Logger,
    thread?: (rows: CommitRows) => Promise<number | undefined>,
    private observe?: (events: number, seconds: number, ok: boolean) => void,
  ) {
    this.persistRows = thread ?? ((rows) => persist(db, rows))
    this.group = new GroupCommit<Pending>((batch) => this.flush(batch), {
      parallel: this.inFlight(db, !!thread),
      maxWeight: MAX_ROWS_PER_TX,
      weight: (p) => p.events.length,
    })
  }

  /** Commits in flight at once: a persist thread (or PostgreSQL) overlaps them; SQLite alone cannot. */
  private inFlight(db: Db, threaded: boolean): number {
    return threaded || db.dialect !== 'sqlite' ? COMMITS_IN_FLIGHT[db.dialect] : 1
  }

  /**
   * Moves the writer to another store (and its thread) before the first commit: the event store
   * is chosen at start, once every plugin had its say (the analytics warehouse setting).
   */
  attach(
    db: Db,
    thread?: (rows: CommitRows) => Promise<number | undefined>,
    committed?: (appended?: Appended) => void,
    recent?: RecentRows,
  ): void {
    if (this.started) throw new Error('the event store cannot change once ingestion started')
    this.db = db
    this.committed = committed
    this.handOver = db.dialect === 'sqlite'
    this.recent = this.handOver ? undefined : recent
    this.persistRows = thread ?? ((rows) => persist(db, rows))
    this.group.setParallel(this.inFlight(db, !!thread))
  }

  /** Resolves once the events are committed. */
  write(events: NormEvent[], nonce?: [string, number]): Promise<void> {
    if (!events.length) return Promise.resolve()
    return this.group.add({ events, nonce })
  }

  /** Waits for everything queued so far. */
  idle(): Promise<void> {
    return this.group.idle()
  }

  /** One transaction for everything the group commit took together. */
  private async flush(batch: Pending[]): Promise<void> {
    let n = 0
    for (const p of batch) n += p.events.length
    try {
      // A failed start (store unreachable) is retried by the next commit.
      this.ready ??= this.init().catch((e) => {
        this.ready = undefined
        throw e
      })
      await this.ready
      const started = performance.now()
      let ok = false
      try {
        await this.commit(
          batch.length === 1 ? batch[0].events : batch.flatMap((p) => p.events),
          batch.flatMap((p) => p.nonce ?? []),
        )
        ok = true
      } finally {
        this.observe?.(n, (performance.now() - started) / 1000, ok)
      }
    } catch (e) {
      this.log.error('event batch commit failed', { error: String(e), events: n })
      throw e
    }
  }

  private async init() {
    this.started = true
    this.ids.last = await this.storedMaxId()
  }

  /** The largest raw row id stored (events and invocations), by any instance. */
  private async storedMaxId(): Promise<number> {
    const max = await this.db.get<{ m: number | null }>('SELECT MAX(id) AS m FROM ingest_events')
    const maxInv = await this.db.get<{ m: number | null }>('SELECT MAX(id) AS m FROM ingest_invocations')
    return Math.max(Number(max?.m ?? 0), Number(maxInv?.m ?? 0))
  }

  /**
   * Commits the events, each (game, environment, event_id) once: repeats within the commit are
   * dropped here; one the store holds already (an earlier commit, another instance's) makes the
   * transaction roll back, and the commit runs again without it. Events without an id are stored
   * as sent. A transaction PostgreSQL chose as a deadlock's victim was rolled back whole, and runs
   * again as it was (as PostgreSQL's manual advises), instead of failing its requests. One whose
   * raw row ids another instance took first runs again with ids past the largest stored.
   */
  private async commit(events: NormEvent[], nonces: Param[] = []): Promise<void> {
    let list = firstOfEachPayment(events)
    for (let attempt = 1; ; attempt++) {
      // Every event was stored already (a client's retry under a new nonce): the requests' nonces
      // are still committed, so a replay after a restart is refused like any other.
      if (!list.length) {
        if (nonces.length) await this.persistRows(nonceRows(nonces))
        return
      }
      try {
        return await this.commitOnce(list, nonces)
      } catch (e) {
        // The attempt may have committed without answering (its thread died after the commit):
        // the next commit's rows are handed over without saying what came before them, so the
        // consumers read whatever this one left in the store (core/event-log-tail.ts).
        this.lastAt = undefined
        // Rare (a retry within the same commit): found by the sort of the ids, before any rollup saw the events.
        if (e === REPEATED_IDS) {
          list = firstOfEachId(list)
          continue
        }
        // A few rounds only, should retries keep racing other commits.
        const message = String((e as Error)?.message)
        if (attempt >= 5) throw e
        // Each attempt takes out what the store held.
        if (message.includes(DUPLICATE_EVENTS)) list = await this.withoutStored(list)
        else if (message.includes(DUPLICATE_PAYMENTS)) list = await settlePayments(this.db, list)
        else if (TAKEN_ID.test(message))
          // Past the rows stored and past the present (the other instance's commit in flight
          // numbered from about now), by a random step: the two do not pick the same ids again.
          this.ids.last =
            Math.max(this.ids.last, await this.storedMaxId(), Date.now() * 1024) +
            1024 +
            Math.floor(Math.random() * 8192)
        else if (!DEADLOCK.test(message)) throw e
      }
    }
  }

  /** The events whose event_id the store does not hold. */
  private async withoutStored(events: NormEvent[]): Promise<NormEvent[]> {
    const byStream = new Map<string, { gameId: string; env: string; ids: string[] }>()
    for (const e of events) {
      if (e.eventId === null) continue
      const k = `${e.gameId}\u0001${e.env}`
      let s = byStream.get(k)
      if (!s) {
        s = { gameId: e.gameId, env: e.env, ids: [] }
        byStream.set(k, s)
      }
      s.ids.push(e.eventId)
    }
    const stored = new Set<string>()
    for (const { gameId, env, ids } of byStream.values()) {
      const stream = await this.db.get<{ id: number }>(
        'SELECT id FROM ingest_streams WHERE game_id = ? AND env = ?',
        [gameId, env],
      )
      if (!stream) continue
      // One index probe an id on PostgreSQL too, whatever the table's statistics (core/db/keyed.ts).
      const rows = await rowsByKeys<{ event_id: string }>(this.db, {
        table: 'ingest_event_ids',
        cols: ['event_id'],
        scope: [['stream', stream.id]],
        key: 'event_id',
        keys: ids,
      })
      for (const r of rows) stored.add(`${gameId}\u0001${env}\u0001${r.event_id}`)
    }
    return events.filter(
      (e) => e.eventId === null || !stored.has(`${e.gameId}\u0001${e.env}\u0001${e.eventId}`),
    )
  }

  private async commitOnce(events: NormEvent[], nonces: Param[]): Promise<void> {
    // The per-event work runs in a plain function, which the JIT optimizes better than async ones.
    const { ev, ...rows } = gatherRows(events, Date.now(), this.ids)
    const seq = await this.persistRows({ events: ev, ...rows, nonces })
    if (this.handOver && typeof seq === 'number' && ev.props.length) {
      const entries = committedEntries(ev, seq)
      const after = this.lastAt
      this.lastAt = entries[entries.length - 1].at
      this.committed?.({ entries, after })
    } else {
      this.recent?.add(ev)
      this.committed?.()
    }
  }
}
