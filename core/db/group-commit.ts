/**
 * Group commit, the one write path for concurrent writers (performance note 2): callers hand
 * over their items and wait; one flush takes everything queued into a single transaction and
 * answers every caller in it only after it committed. Under load the next flush collects what
 * arrived while the previous one ran, so batches grow with the load, the store sees a few large
 * transactions instead of thousands of small ones, and the event loop never waits on a lock.
 */
export interface GroupCommitOptions<T> {
  /** Flushes in flight at once: > 1 lets a batch commit while another waits on the network (PostgreSQL). */
  parallel?: number
  /** A flush takes queued items until their weight reaches this. */
  maxWeight?: number
  /** An item's weight (rows it holds); 1 by default. */
  weight?: (item: T) => number
  /** Learns of every flush: its weight, its seconds, whether it committed (metrics). */
  observe?: (weight: number, seconds: number, ok: boolean) => void
}

export class GroupCommit<T> {
  private queue: Array<{ item: T; resolve: () => void; reject: (e: unknown) => void }> = []
  private running = 0
  private scheduled = false
  private idleWaiters: Array<() => void> = []
  private parallel: number
  private readonly maxWeight: number
  private readonly weight: (item: T) => number

  constructor(
    private flush: (items: T[]) => Promise<void>,
    private opts: GroupCommitOptions<T> = {},
  ) {
    this.parallel = opts.parallel ?? 1
    this.maxWeight = opts.maxWeight ?? 500
    this.weight = opts.weight ?? (() => 1)
  }

  /** Changes how many flushes may run at once (an owner that moved to another store). */
  setParallel(n: number): void {
    this.parallel = n
    this.kick()
  }

  /** Resolves once the transaction holding `item` committed; rejects with its error otherwise. */
  add(item: T): Promise<void> {
    return new Promise((resolve, reject) => {
      this.queue.push({ item, resolve, reject })
      this.kick()
    })
  }

  /** Waits until everything queued so far has been flushed (committed or failed). */
  idle(): Promise<void> {
    if (this.quiet()) return Promise.resolve()
    return new Promise((r) => this.idleWaiters.push(r))
  }

  private quiet(): boolean {
    return !this.running && !this.scheduled && !this.queue.length
  }

  private kick() {
    if (this.scheduled || this.running >= this.parallel || !this.queue.length) return
    this.scheduled = true
    // setImmediate lets every request parsed in this turn of the event loop join the batch.
    setImmediate(() => {
      this.scheduled = false
      void this.drainOne()
    })
  }

  private async drainOne(): Promise<void> {
    if (this.running >= this.parallel || !this.queue.length) return
    this.running++
    const batch: typeof this.queue = []
    let weight = 0
    while (this.queue.length && (weight < this.maxWeight || !batch.length)) {
      const next = this.queue[0]
      const w = this.weight(next.item)
      if (batch.length && weight + w > this.maxWeight) break
      batch.push(this.queue.shift()!)
      weight += w
    }
    // What arrives while this flush runs may start the next one (up to `parallel`).
    this.kick()
    const started = performance.now()
    let ok = false
    try {
      await this.flush(batch.map((b) => b.item))
      ok = true
    } catch (e) {
      for (const b of batch) b.reject(e)
    } finally {
      this.opts.observe?.(weight, (performance.now() - started) / 1000, ok)
      this.running--
      if (ok) for (const b of batch) b.resolve()
      this.kick()
      if (this.quiet()) for (const r of this.idleWaiters.splice(0)) r()
    }
  }
}
