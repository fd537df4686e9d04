import type postgres from 'postgres'
import { StoreDown, isConnectionFault } from './faults'

/** A query in flight longer than this makes the pool ask PostgreSQL, on a fresh connection, whether it answers. */
const SLOW_MS = 600
/** How often queries in flight are looked at. */
const WATCH_MS = 100
/**
 * How long the fresh connection of a probe may take to connect and answer `SELECT 1` when the
 * server answers nothing else meanwhile; and, while it does answer other queries, how long it may
 * go silent before it is down.
 */
const PROBE_MS = 1000
/** The longest a probe waits for its `SELECT 1` while the server goes on answering other queries. */
const BUSY_MS = 10_000

/**
 * When the server last answered a query (a result or an error of its own, not a connection's
 * failure), by `performance.now()`: shared by the pools of one process that reach the same server.
 */
export interface Progress {
  at: number
}
/** While PostgreSQL is away, how often a probe asks whether it is back. */
const RETRY_MS = 500

export interface PoolEvents {
  down(cause: string): void
  up(downMs: number): void
}

/**
 * One postgres.js pool, watched. postgres.js alone waits for an answer as long as the socket
 * lives: against a PostgreSQL that went silent (a host gone, a blackholed network) a request
 * hung 11-32 s, and after a restart a connection could keep failing for 30 s on state the outage
 * left behind. So:
 * - a query in flight for over `SLOW_MS`, or one that failed on its connection, sends a probe on
 *   a fresh connection (never a pooled one, which may be the stuck one). It tells a server that
 *   cannot be reached from one that is busy: the probe fails when its connection fails, or when
 *   `PROBE_MS` pass with neither its `SELECT 1` nor any other query of the server answered. A
 *   loaded server (starting a backend and answering took over 1 s at a load of 11 on 2 cores,
 *   and the pool used to declare it down and refuse every request) answers other queries
 *   meanwhile, and its probe waits its turn, up to `BUSY_MS`;
 * - a failed probe declares the store down: the pool is replaced by a new one (no connection of
 *   the outage is ever used again) and the old one destroyed, which fails its queries in flight;
 * - while down every query fails at once (`StoreDown`, a 503 with Retry-After) instead of waiting,
 *   and a probe every `RETRY_MS` finds the moment PostgreSQL answers again;
 * - a connection fault the probe does not confirm (one connection lost, PostgreSQL answering)
 *   replaces the pool too, letting the old one's other queries finish first.
 * LISTEN subscriptions move to each new pool.
 */
export class WatchedPool {
  private sql: postgres.Sql
  private down?: { since: number; cause: string }
  private probing?: Promise<boolean>
  private inflight = new Map<number, number>()
  private seq = 0
  private watch: Timer
  private retry?: Timer
  private closed = false
  private listens = new Set<{
    channel: string
    fn: (payload: string) => void
    handle?: postgres.ListenMeta
  }>()

  constructor(
    private make: () => postgres.Sql,
    private probeOnce: () => postgres.Sql,
    private events: PoolEvents,
    /** When the server last answered; pools of the same server share it. */
    private progress: Progress = { at: 0 },
    private limits = { probeMs: PROBE_MS, busyMs: BUSY_MS },
  ) {
    this.sql = make()
    this.watch = setInterval(() => this.look(), WATCH_MS)
    this.watch.unref?.()
  }

  /** Runs `fn` on the current pool, refused at once while the store is down. */
  async run<T>(fn: (sql: postgres.Sql) => Promise<T>): Promise<T> {
    if (this.down) throw new StoreDown(this.down.cause, this.down.since)
    const id = ++this.seq
    this.inflight.set(id, performance.now())
    try {
      const out = await fn(this.sql)
      this.progress.at = performance.now()
      return out
    } catch (e) {
      if (isConnectionFault(e)) void this.check('fault', String((e as Error)?.message ?? e))
      else if (!(e instanceof StoreDown)) this.progress.at = performance.now()
      throw e
    } finally {
      this.inflight.delete(id)
    }
  }

  /** LISTEN on the current pool and on every pool that replaces it; answers the unlisten. */
  async listen(channel: string, fn: (payload: string) => void): Promise<() => Promise<void>> {
    const entry: { channel: string; fn: (payload: string) => void; handle?: postgres.ListenMeta } = {
      channel,
      fn,
    }
    this.listens.add(entry)
    entry.handle = await this.run((sql) => sql.listen(channel, fn))
    return async () => {
      this.listens.delete(entry)
      await entry.handle?.unlisten().catch(() => undefined)
    }
  }

  async close(): Promise<void> {
    this.closed = true
    clearInterval(this.watch)
    clearTimeout(this.retry)
    await this.sql.end({ timeout: 5 })
  }

  private look() {
    if (this.down || this.probing || !this.inflight.size) return
    const now = performance.now()
    for (const started of this.inflight.values())
      if (now - started > SLOW_MS) {
        void this.check('slow', `no answer to a query within ${SLOW_MS} ms`)
        return
      }
  }

  /**
   * Probes once (shared by every caller meanwhile) and acts on the answer: `slow` is a query
   * waiting long, `fault` one that failed on its connection.
   */
  private check(kind: 'slow' | 'fault', cause: string): Promise<boolean> {
    this.probing ??= this.probe()
      .then((ok) => {
        if (this.closed) return ok
        if (!ok) this.fail(cause)
        // PostgreSQL answers but a pooled connection failed: the pool may hold others the
        // outage broke. Its queries in flight get a moment to finish; new ones use a new pool.
        else if (kind === 'fault') this.replace(2)
        return ok
      })
      .finally(() => {
        this.probing = undefined
      })
    return this.probing
  }

  /**
   * Whether PostgreSQL answers: `SELECT 1` on a fresh connection. Its failure is an outage at
   * once; so is a stretch of `probeMs` in which neither it nor any other query was answered. While
   * the server answers others it waits, up to `busyMs`, after which the server counts as up (it
   * answers; it is only slow).
   */
  private async probe(): Promise<boolean> {
    const p = this.probeOnce()
    const { probeMs, busyMs } = this.limits
    const started = performance.now()
    let settled: boolean | undefined
    const answer = p`SELECT 1`.then(
      () => {
        settled = true
      },
      () => {
        settled = false
      },
    )
    try {
      // Silence is counted from here, or from the end of a stretch this process did not run.
      let from = started
      for (;;) {
        const tick = performance.now()
        let timer: Timer | undefined
        await Promise.race([
          answer,
          new Promise((r) => {
            timer = setTimeout(r, probeMs)
          }),
        ])
        clearTimeout(timer)
        // What arrived meanwhile is read before judging (answers queued behind a busy loop).
        await new Promise((r) => setImmediate(r))
        if (settled !== undefined) return settled
        const now = performance.now()
        // This process's own loop was held up (a long synchronous task, or no CPU for it): the
        // server's answers may wait unread in the socket, so that stretch proves nothing.
        if (now - tick > probeMs * 1.5) from = now
        // Silent for a whole interval this process was listening: not one answer from the server.
        else if (now - Math.max(this.progress.at, from) >= probeMs) return false
        if (now - started >= busyMs) return true
      }
    } finally {
      void p.end({ timeout: 0 }).catch(() => undefined)
    }
  }

  private fail(cause: string) {
    if (this.down) return
    this.down = { since: Date.now(), cause }
    this.events.down(cause)
    this.replace(0)
    this.retryLater()
  }

  /** A new pool for what comes next; the old one ends after `graceS` seconds (0: at once). */
  private replace(graceS: number) {
    const old = this.sql
    this.sql = this.make()
    void old.end({ timeout: graceS }).catch(() => undefined)
    if (!this.down) this.relisten()
  }

  private relisten() {
    for (const l of this.listens)
      void this.sql
        .listen(l.channel, l.fn)
        .then((h) => {
          l.handle = h
        })
        .catch(() => undefined)
  }

  private retryLater() {
    this.retry = setTimeout(async () => {
      if (this.closed) return
      if (await this.probe()) {
        const since = this.down?.since ?? Date.now()
        this.down = undefined
        this.relisten()
        this.events.up(Date.now() - since)
      } else this.retryLater()
    }, RETRY_MS)
    this.retry.unref?.()
  }
}
