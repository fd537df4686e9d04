/** Messages to a checkpointer thread, and its one answer. */
export type CheckpointRequest =
  | { kind: 'start'; file: string; busyMs: number; idleMs: number }
  | { kind: 'close' }
export type CheckpointReply = { kind: 'closed' }

/**
 * How often the checkpointer copies committed WAL frames into the database file: while commits
 * arrive, and when nothing changed since its last look. At 200 ms under batch ingestion the
 * commit that passed the WAL limit had ~30 MB left to copy and fsync itself: 25-55 ms stalls
 * about five times a second (the batch benchmark's p99). At 20 ms p99 was 33-41 ms.
 */
const BUSY_MS = 20
const IDLE_MS = 200

/**
 * The worker's module: next to this file when run from source; in the compiled binary, which
 * carries it as an extra entrypoint (scripts/build.ts), by its path from the repository root.
 */
function workerEntry(): string {
  if (import.meta.url.startsWith('file:///$bunfs/')) return './core/db/checkpoint.worker.ts'
  return new URL('./checkpoint.worker.ts', import.meta.url).href
}

/**
 * A thread of its own that checkpoints a SQLite file (PASSIVE, every 20 ms while the WAL grows,
 * else every 200 ms), so commits made on the event loop never run a checkpoint: SQLite's
 * automatic one copies the WAL and fsyncs the database file inside the commit that passes
 * 1,000 pages (a rule save measured 17-22 ms then, against a p99 of 2-5 ms). Should the thread
 * fail, `lost` runs once: the caller's connections checkpoint again as SQLite does by default.
 */
export class Checkpointer {
  private worker: Worker | undefined

  constructor(file: string, lost: () => void) {
    // A small heap (it holds one connection), and it never keeps the process alive.
    const w = new Worker(workerEntry(), { ref: false, smol: true })
    const gone = () => {
      if (this.worker !== w) return
      this.worker = undefined
      lost()
    }
    w.onerror = gone
    w.addEventListener('close', gone)
    w.postMessage({ kind: 'start', file, busyMs: BUSY_MS, idleMs: IDLE_MS } satisfies CheckpointRequest)
    this.worker = w
  }

  /** A last checkpoint of everything committed, then the thread ends. */
  async close(): Promise<void> {
    const w = this.worker
    this.worker = undefined
    if (!w) return
    await new Promise<void>((resolve) => {
      w.onmessage = () => resolve()
      w.onerror = () => resolve()
      w.addEventListener('close', () => resolve())
      w.postMessage({ kind: 'close' } satisfies CheckpointRequest)
    })
    w.terminate()
  }
}
