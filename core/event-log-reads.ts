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

  async read(source: LogSource, at: LogPosition, below: number, limit: number, db: Db): Promise<LogEntry[]> {
    const key = `${at.seq}:${at.pos}`
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
