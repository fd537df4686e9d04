import type { Db } from './db'
import { before } from './event-log-cursor'
import type { LogEntry, LogPosition, LogSource } from './event-log-types'

interface Kept {
  from: LogPosition
  below: number
  limit: number
  entries: LogEntry[]
  at: number
}

/**
 * Reads of the log by the position they start after, shared by the consumers that are there
 * within a second: consumers moving together read each batch once (rows and their parsed
 * props), not once each. A kept read is a prefix of any later one from the same place: its rows
 * were committed below its horizon, and a row committed since comes after all of them (a later
 * seq on SQLite and MySQL, at or above that horizon on PostgreSQL). So a consumer may take the
 * kept rows, fewer than the store now holds, and read the rest at its next step.
 *
 * A consumer whose cursor is one of a kept read's rows takes the rows after it (the same
 * argument: they are a prefix of what it would read). Consumers that woke at different times
 * then share: the one behind takes the tail of the read ahead of it, and both read on from its
 * end, from the same place.
 */
export class SharedReads {
  private readonly kept = new Map<string, Kept>()
  /** Reads served from a kept one, and reads of the store (for the benchmarks). */
  readonly counts = { shared: 0, read: 0 }
  /** Reads started ahead (`prefetch`), by the position they start after. */
  private readonly ahead = new Map<
    string,
    { below: number; limit: number; entries: Promise<LogEntry[]>; at: number }
  >()

  /**
   * Starts the read of a consumer's next batch while it writes this one (PostgreSQL, where the
   * read runs on a connection of its own): a consumer with a backlog then reads and writes at
   * once instead of in turn. The read is a prefix of any later one from the same place, by the
   * rule above, so it serves the next step whenever that comes (within 30 s).
   */
  prefetch(source: LogSource, at: LogPosition, below: number, limit: number, db: Db): void {
    const key = `${at.seq}:${at.pos}`
    if (this.ahead.has(key)) return
    const now = performance.now()
    for (const [k, r] of this.ahead) if (now - r.at >= 30_000 || this.ahead.size >= 16) this.ahead.delete(k)
    this.counts.read++
    const entries = source.read(at, below, limit, db)
    // A failed read ahead is read again by the step itself.
    entries.catch(() => undefined)
    this.ahead.set(key, { below, limit, entries, at: now })
  }

  async read(source: LogSource, at: LogPosition, below: number, limit: number, db: Db): Promise<LogEntry[]> {
    const key = `${at.seq}:${at.pos}`
    const ahead = this.ahead.get(key)
    if (ahead) {
      this.ahead.delete(key)
      if (ahead.below <= below && ahead.limit >= limit && performance.now() - ahead.at < 30_000) {
        const entries = await ahead.entries.catch(() => undefined)
        if (entries) return entries.length > limit ? entries.slice(0, limit) : entries
      }
    }
    // The monotonic clock: a test's frozen wall clock must not keep reads forever.
    const now = performance.now()
    const exact = this.kept.get(key)
    if (
      exact &&
      now - exact.at < 1000 &&
      exact.below <= below &&
      (exact.limit >= limit || exact.entries.length < exact.limit)
    ) {
      this.counts.shared++
      return exact.entries.length > limit ? exact.entries.slice(0, limit) : exact.entries
    }
    const tail = this.tailAfter(at, below, limit, now)
    if (tail) {
      this.counts.shared++
      return tail
    }
    this.counts.read++
    const entries = await source.read(at, below, limit, db)
    for (const [k, r] of this.kept) if (now - r.at >= 1000 || this.kept.size >= 32) this.kept.delete(k)
    if (entries.length) this.kept.set(key, { from: at, below, limit, entries, at: now })
    return entries
  }

  /** The rows of a kept read after `at`, when `at` is one of its rows other than its last. */
  private tailAfter(at: LogPosition, below: number, limit: number, now: number): LogEntry[] | undefined {
    for (const r of this.kept.values()) {
      const e = r.entries
      if (now - r.at >= 1000 || r.below > below || !before(r.from, at) || !before(at, e[e.length - 1].at))
        continue
      // Binary search for the row at `at` (rows are in log order).
      let lo = 0
      let hi = e.length - 1
      while (lo < hi) {
        const mid = (lo + hi) >>> 1
        if (before(e[mid].at, at)) lo = mid + 1
        else hi = mid
      }
      const p = e[lo].at
      if (p.seq !== at.seq || p.pos !== at.pos) continue
      return e.slice(lo + 1, Math.min(e.length, lo + 1 + limit))
    }
    return undefined
  }
}
