import type { Db } from './db'
import type { LogEntry, LogPosition, LogSource } from './event-log-types'

/**
 * Reads of the log by the position they start after, shared by the consumers that are there
 * within a second: consumers moving together read each batch once (rows and their parsed
 * props), not once each. A kept read is a prefix of any later one from the same place: its rows
 * were committed below its horizon, and a row committed since comes after all of them (a later
 * seq on SQLite and MySQL, at or above that horizon on PostgreSQL). So a consumer may take the
 * kept rows, fewer than the store now holds, and read the rest at its next step.
 */
export class SharedReads {
  private readonly kept = new Map<string, { below: number; limit: number; entries: LogEntry[]; at: number }>()
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
    const kept = this.kept.get(key)
    if (
      kept &&
      now - kept.at < 1000 &&
      kept.below <= below &&
      (kept.limit >= limit || kept.entries.length < kept.limit)
    )
      return kept.entries.length > limit ? kept.entries.slice(0, limit) : kept.entries
    const entries = await source.read(at, below, limit, db)
    for (const [k, r] of this.kept) if (now - r.at >= 1000 || this.kept.size >= 32) this.kept.delete(k)
    if (entries.length) this.kept.set(key, { below, limit, entries, at: now })
    return entries
  }
}
