import { inPartOrder } from '../../../core/ordered'
import type { TimelinePage, TimelineQuery, TimelineText } from '../types'

/** Messages to a walk thread, and its answers. */
export type WalkRequest =
  | { kind: 'start'; file: string }
  | { kind: 'walk'; id: number; q: TimelineQuery }
  | { kind: 'close' }
export type WalkReply =
  | { kind: 'page'; id: number; page: TimelineText | TimelinePage; last: number }
  | { kind: 'done'; id: number }
  | { kind: 'failed'; id: number; error: string }
  | { kind: 'closed'; id?: undefined }

/**
 * The worker's module: next to this file when run from source; in the compiled binary, which
 * carries it as an extra entrypoint (scripts/build.ts), by its path from the repository root.
 */
function workerEntry(): string {
  if (import.meta.url.startsWith('file:///$bunfs/')) return './plugins/ingest/store/walk.worker.ts'
  return new URL('./walk.worker.ts', import.meta.url).href
}

/** Threads a walk's id range is split over. */
const THREADS = 2

type Page = TimelineText | TimelinePage
type Waiting = {
  page: (page: Page, last: number) => void
  done: () => void
  failed: (e: Error) => void
  lost: () => void
}

/**
 * SQLite walks (`walkTimelineText`) read on worker threads, each with its own connection to the
 * store's file: the id range in `THREADS` parts, each read by one thread at the same time, its
 * joined pages (`sqliteWalk`) handed over as they are read (their bytes transferred, not
 * copied) and to the caller in id order (a part's pages are held until the parts before it are
 * handed over), as the PostgreSQL walk reads on several connections. On the event loop the
 * 24-hour walk of the 10 M benchmark spent over half its time in SQLite's statements; now the
 * event loop only parses pages while the threads read the next ones.
 *
 * A part whose thread fails or exits goes on on the event loop from its last page handed over
 * (`here`), and later walks run there from the start: a thread's death loses no page.
 */
export class WalkThreads {
  private workers: Worker[] | undefined = []
  private next = 0
  private readonly waiting = new Map<number, Waiting>()

  /** `lost` runs once should the threads be lost (not when closed). */
  constructor(
    file: string,
    private readonly onLost?: () => void,
  ) {
    for (let i = 0; i < THREADS && this.workers; i++) {
      let w: Worker
      try {
        // It never keeps the process alive.
        w = new Worker(workerEntry(), { ref: false })
      } catch {
        this.lost()
        break
      }
      w.onmessage = (m: MessageEvent<WalkReply>) => {
        const r = m.data
        if (r.kind === 'closed') return
        const waiting = this.waiting.get(r.id)
        if (!waiting) return
        if (r.kind === 'page') return waiting.page(r.page, r.last)
        this.waiting.delete(r.id)
        if (r.kind === 'done') waiting.done()
        else waiting.failed(new Error(r.error))
      }
      w.onerror = () => this.lost()
      w.addEventListener('close', () => this.lost())
      w.postMessage({ kind: 'start', file } satisfies WalkRequest)
      this.workers?.push(w)
    }
  }

  /** A thread failed or exited: every thread is ended, and each part waiting goes on on the event loop. */
  private lost(): void {
    const workers = this.workers
    this.workers = undefined
    if (workers) this.onLost?.()
    for (const w of workers ?? []) w.terminate()
    const waiting = [...this.waiting.values()]
    this.waiting.clear()
    for (const w of waiting) w.lost()
  }

  /**
   * `q`'s walk, its pages handed to `each` in id order. `here` walks a part on the event loop:
   * all of it when the threads are gone, the rest of a part whose thread was lost.
   */
  async walk(
    q: TimelineQuery,
    each: (page: Page) => void,
    here: (q: TimelineQuery, each: (page: Page) => void) => Promise<void>,
  ): Promise<void> {
    const workers = this.workers
    if (!workers) return here(q, each)
    const K = workers.length
    const cut = (i: number) => (i === K ? q.toId : q.afterId + Math.floor(((q.toId - q.afterId) / K) * i))
    const parts = workers.map((worker, i) => (emit: (page: Page) => void) => {
      const part = { ...q, afterId: cut(i), toId: cut(i + 1) }
      return new Promise<void>((resolve, reject) => {
        let after = part.afterId
        const id = this.next++
        this.waiting.set(id, {
          page: (page, last) => {
            after = last
            emit(page)
          },
          done: resolve,
          failed: reject,
          lost: () => here({ ...part, afterId: after }, emit).then(resolve, reject),
        })
        worker.postMessage({ kind: 'walk', id, q: part } satisfies WalkRequest)
      })
    })
    await inPartOrder(parts, each)
  }

  /** Ends the threads, each closing its connection first; parts waiting go on on the event loop. */
  async close(): Promise<void> {
    const workers = this.workers
    this.workers = undefined
    const waiting = [...this.waiting.values()]
    this.waiting.clear()
    for (const w of waiting) w.lost()
    await Promise.all(
      (workers ?? []).map(
        (w) =>
          new Promise<void>((resolve) => {
            w.onmessage = (m: MessageEvent<WalkReply>) => m.data.kind === 'closed' && resolve()
            w.onerror = () => resolve()
            w.addEventListener('close', () => resolve())
            w.postMessage({ kind: 'close' } satisfies WalkRequest)
          }),
      ),
    )
    for (const w of workers ?? []) w.terminate()
  }
}
