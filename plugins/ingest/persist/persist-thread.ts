import type { StoreLocation } from '../../../core/db'
import { WriteGate } from '../../../core/db/write-gate'
import type { CommitRows } from './persist'
import { type WireCommit, encodeCommit, transferables } from './wire'

/** Messages to the persist thread. */
export type PersistRequest =
  | {
      kind: 'open'
      location: StoreLocation
      connections: number
      /** SQLite: `synchronous` of the commits' connection. */
      synchronous: Synchronous
    }
  /** The rows laid out for the crossing (wire.ts): far cheaper than a structured clone of thousands of values, or JSON. */
  | { kind: 'commit'; id: number; rows: WireCommit }
  /** Reads a setting of the thread's connection (`PRAGMA name` on SQLite, `SHOW name` on PostgreSQL). */
  | { kind: 'setting'; id: number; name: string }
  | { kind: 'close'; id: number }
/** SQLite: when a commit is synced to disk (`IngestConfig.sqlite_synchronous`). */
export type Synchronous = 'normal' | 'full'

/** Its answers: one per commit, and one for the close; with id 0, a `warning` of its own for the server's log. */
export type PersistReply = { id: number; error?: string; value?: unknown; warning?: string }

/**
 * The worker's module: next to this file when run from source; in the compiled binary, which
 * carries it as an extra entrypoint (scripts/build.ts), by its path from the repository root.
 */
function workerEntry(): string {
  if (import.meta.url.startsWith('file:///$bunfs/'))
    return './plugins/ingest/persist/persist-thread.worker.ts'
  return new URL('./persist-thread.worker.ts', import.meta.url).href
}

/**
 * The store half of the group-commit writer on its own thread (performance note 2): the event
 * loop verifies, parses and prepares each commit's rows and answers HTTP while a Worker with
 * its own connections to the same store runs the transactions: SQLite's statements, or
 * PostgreSQL's parameter encoding and round trips (half the event loop's time on that engine
 * when they ran there). Each promise settles when its transaction did. On SQLite the store's
 * checkpointer thread (core/db/checkpointer.ts, started by the event loop's `openSqlite`)
 * copies the WAL into the database file, so no commit pays for a checkpoint and its fsync.
 *
 * SQLite commits are applied one at a time, in the order sent. PostgreSQL commits run side by
 * side on up to `connections` connections, as they did on the event loop: rows are locked in
 * key order, counters only add and sketches only move forward, so their order does not matter.
 */
export class PersistThread {
  /** Undefined while a dead thread waits to be started again. */
  private worker: Worker | undefined
  private waiting = new Map<number, { resolve: (value?: unknown) => void; reject: (e: Error) => void }>()
  private seq = 0
  private dead: Error | undefined
  private readonly open: Extract<PersistRequest, { kind: 'open' }>
  /** Times the thread died and was started again. */
  restarts = 0

  constructor(
    location: StoreLocation,
    connections = 1,
    synchronous: Synchronous = 'normal',
    /** The thread's own warnings (`PersistReply.warning`), with the error's text. */
    private warn: (message: string, error: string) => void = () => undefined,
  ) {
    this.open = { kind: 'open', location, connections, synchronous }
    this.worker = this.spawn()
  }

  /**
   * Starts the thread. Should it die (a crash, or an error nothing caught), the commits it had
   * not answered are refused: their requests get an error and clients send them again (rows of
   * a transaction that had committed are then stored twice, as after kill -9). A new thread
   * takes over after a pause that doubles with each death, up to a second.
   */
  private spawn(): Worker {
    const w = new Worker(workerEntry())
    w.onmessage = (m: MessageEvent<PersistReply>) => {
      if (m.data.warning !== undefined) return this.warn(m.data.warning, m.data.error ?? '')
      const waiting = this.waiting.get(m.data.id)
      if (!waiting) return
      this.waiting.delete(m.data.id)
      if (m.data.error === undefined) waiting.resolve(m.data.value)
      else waiting.reject(new Error(m.data.error))
    }
    const lost = (why: string) => {
      if (this.worker !== w || this.dead) return
      this.worker = undefined
      w.terminate()
      // Its side of a SQLite store's write gate would otherwise stay taken.
      if (this.open.location.gate) new WriteGate(this.open.location.gate).forget(2)
      const e = new Error(`persist thread ${why}`)
      for (const waiting of this.waiting.values()) waiting.reject(e)
      this.waiting.clear()
      this.restarts++
      setTimeout(
        () => {
          if (!this.dead) this.worker = this.spawn()
        },
        Math.min(1000, 10 * 2 ** Math.min(this.restarts - 1, 7)),
      )
    }
    w.onerror = (e) => lost(`failed: ${e.message}`)
    w.addEventListener('close', () => lost('exited'))
    w.postMessage(this.open)
    return w
  }

  /** Resolves once the rows are committed, with the seq their events took on SQLite (`persist`). */
  persist(rows: CommitRows): Promise<number | undefined> {
    const wire = encodeCommit(rows)
    return this.ask((id) => ({ kind: 'commit', id, rows: wire }), transferables(wire)) as Promise<
      number | undefined
    >
  }

  /** A setting of the thread's store connection, as it answers for itself (diagnostics, tests). */
  setting(name: string): Promise<unknown> {
    if (!/^[a-z_]+$/.test(name)) return Promise.reject(new Error(`not a setting name: ${name}`))
    return this.ask((id) => ({ kind: 'setting', id, name }))
  }

  /** Sends one request under a fresh id; settles with the thread's answer to it. */
  private ask(request: (id: number) => PersistRequest, transfer: Transferable[] = []): Promise<unknown> {
    if (this.dead) return Promise.reject(this.dead)
    const w = this.worker
    if (!w) return Promise.reject(new Error('persist thread restarting'))
    const id = ++this.seq
    return new Promise((resolve, reject) => {
      this.waiting.set(id, { resolve, reject })
      w.postMessage(request(id), transfer)
    })
  }

  /** Waits for the commits sent so far, then closes the thread's connections and ends it. */
  async close(): Promise<void> {
    if (this.dead) return
    const w = this.worker
    if (w) {
      const id = ++this.seq
      await new Promise<void>((resolve) => {
        this.waiting.set(id, { resolve: () => resolve(), reject: () => resolve() })
        w.postMessage({ kind: 'close', id } satisfies PersistRequest)
      })
    }
    this.dead = new Error('persist thread closed')
    w?.terminate()
  }
}
