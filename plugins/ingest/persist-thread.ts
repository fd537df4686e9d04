import type { CommitRows } from './persist'

/** Messages to the persist thread. */
export type PersistRequest =
  | { kind: 'open'; file: string }
  /** The rows as JSON text: one string crosses threads far cheaper than a structured clone of thousands of values. */
  | { kind: 'commit'; id: number; rows: string }
  | { kind: 'close'; id: number }
/** Its answers: the open, then one per commit, in order. */
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
 * The SQLite half of the group-commit writer on its own thread (performance note 2): the event
 * loop prepares each commit's rows and answers HTTP while a Worker with its own connection to
 * the same file runs the transactions, the fsyncs and the WAL checkpoints. Commits are applied
 * one at a time in the order they were sent; each promise settles when its transaction did.
 */
export class PersistThread {
  private worker: Worker
  private waiting = new Map<number, { resolve: () => void; reject: (e: Error) => void }>()
  private seq = 0
  private dead: Error | undefined

  constructor(file: string) {
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
    this.send({ kind: 'open', file })
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

  /** Waits for the commits sent so far, then closes the thread's connection and ends it. */
  async close(): Promise<void> {
    if (this.dead) return
    // Sent after every commit, so the thread answers it after they are all applied.
    const id = ++this.seq
    await new Promise<void>((resolve) => {
      this.waiting.set(id, { resolve, reject: () => resolve() })
      this.send({ kind: 'close', id })
    })
    this.worker.terminate()
    this.dead = new Error('persist thread closed')
  }
}
