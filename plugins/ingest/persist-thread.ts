import { type StoreLocation, isPostgresUrl } from '../../core/db'
import type { CommitRows } from './persist'

/** Messages to the persist thread. */
export type PersistRequest =
  /** `checkpointer`: another thread checkpoints this SQLite store, so commits do not. */
  | { kind: 'open'; location: StoreLocation; connections: number; checkpointer: boolean }
  /** Makes the thread a WAL checkpointer of a SQLite file, every `everyMs`. */
  | { kind: 'checkpointer'; file: string; everyMs: number }
  /** The checkpointer failed: commits checkpoint again. */
  | { kind: 'autocheckpoint' }
  /** The rows as JSON text: one string crosses threads far cheaper than a structured clone of thousands of values. */
  | { kind: 'commit'; id: number; rows: string }
  | { kind: 'close'; id: number }
/** How often the checkpointer copies committed WAL frames into the database file. */
const CHECKPOINT_EVERY_MS = 200

/** Its answers: one per commit, and one for the close. */
export type PersistReply = { id: number; error?: string }

/**
 * The worker's module: next to this file when run from source; in the compiled binary, which
 * carries it as an extra entrypoint (scripts/build.ts), by its path from the repository root.
 */
function workerEntry(): string {
  if (import.meta.url.startsWith('file:///$bunfs/')) return './plugins/ingest/persist-thread.worker.ts'
  return new URL('./persist-thread.worker.ts', import.meta.url).href
}

/**
 * The store half of the group-commit writer on its own thread (performance note 2): the event
 * loop verifies, parses and prepares each commit's rows and answers HTTP while a Worker with
 * its own connections to the same store runs the transactions: SQLite's statements, or
 * PostgreSQL's parameter encoding and round trips (half the event loop's time on that engine
 * when they ran there). Each promise settles when its transaction did. On SQLite a third
 * thread copies the WAL into the database file (passive checkpoints every 200 ms), so no commit
 * pays for a checkpoint and its fsync; should it fail, commits checkpoint again themselves.
 *
 * SQLite commits are applied one at a time, in the order sent. PostgreSQL commits run side by
 * side on up to `connections` connections, as they did on the event loop: rows are locked in
 * key order, counters only add and sketches only move forward, so their order does not matter.
 */
export class PersistThread {
  private worker: Worker
  /** SQLite: a second thread running the WAL checkpoints, off the commits' path. */
  private checkpointer: Worker | undefined
  private waiting = new Map<number, { resolve: () => void; reject: (e: Error) => void }>()
  private seq = 0
  private dead: Error | undefined

  constructor(location: StoreLocation, connections = 1) {
    const sqlite = !isPostgresUrl(location.url)
    if (sqlite) {
      const cp = new Worker(workerEntry())
      const lost = () => {
        if (this.checkpointer !== cp) return
        this.checkpointer = undefined
        if (!this.dead) this.send({ kind: 'autocheckpoint' })
      }
      cp.onerror = lost
      cp.addEventListener('close', lost)
      cp.postMessage({
        kind: 'checkpointer',
        file: location.url,
        everyMs: CHECKPOINT_EVERY_MS,
      } satisfies PersistRequest)
      this.checkpointer = cp
    }
    this.worker = new Worker(workerEntry())
    this.worker.onmessage = (m: MessageEvent<PersistReply>) => {
      const w = this.waiting.get(m.data.id)
      if (!w) return
      this.waiting.delete(m.data.id)
      if (m.data.error === undefined) w.resolve()
      else w.reject(new Error(m.data.error))
    }
    this.worker.onerror = (e) => this.fail(new Error(`persist thread failed: ${e.message}`))
    this.worker.addEventListener('close', () => this.fail(new Error('persist thread exited')))
    this.send({ kind: 'open', location, connections, checkpointer: sqlite })
  }

  private send(msg: PersistRequest) {
    this.worker.postMessage(msg)
  }

  private fail(e: Error) {
    this.dead ??= e
    for (const w of this.waiting.values()) w.reject(e)
    this.waiting.clear()
  }

  /** Resolves once the rows are committed. */
  persist(rows: CommitRows): Promise<void> {
    if (this.dead) return Promise.reject(this.dead)
    const id = ++this.seq
    return new Promise((resolve, reject) => {
      this.waiting.set(id, { resolve, reject })
      this.send({ kind: 'commit', id, rows: JSON.stringify(rows) })
    })
  }

  /** Waits for the commits sent so far, then closes the thread's connections and ends it. */
  async close(): Promise<void> {
    if (this.dead) return
    const id = ++this.seq
    await new Promise<void>((resolve) => {
      this.waiting.set(id, { resolve, reject: () => resolve() })
      this.send({ kind: 'close', id })
    })
    this.worker.terminate()
    this.dead = new Error('persist thread closed')
    // Then one last checkpoint of everything committed, and the checkpointer ends too.
    const cp = this.checkpointer
    this.checkpointer = undefined
    if (cp) {
      await new Promise<void>((resolve) => {
        cp.onmessage = () => resolve()
        cp.onerror = () => resolve()
        cp.postMessage({ kind: 'close', id: 0 } satisfies PersistRequest)
      })
      cp.terminate()
    }
  }
}
