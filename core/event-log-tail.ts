import { before } from './event-log-cursor'
import type { LogEntry, LogPosition } from './event-log-types'

const same = (a: LogPosition, b: LogPosition) => a.seq === b.seq && a.pos === b.pos

/**
 * The rows the log's provider committed last, in log order, as it handed them over
 * (`EventLogService.notify`): consumers that keep up take them from here instead of reading
 * them back. Only a provider that writes the log alone hands rows over (SQLite: one process owns
 * the file), and says which row came before them; the kept rows are then exactly the log's,
 * without a gap, and a read from one of them (or from the row before the first) is served here.
 * Anything else (a consumer behind, a rebuild, the first commit after a start) reads the store.
 */
export class CommittedTail {
  private rows: LogEntry[] = []
  /** Index of the first kept row in `rows` (dropped ones are cut off now and then, not one by one). */
  private first = 0
  /** The row just before the first kept one, when the provider said. */
  private prev: LogPosition | undefined

  constructor(private readonly cap = 100_000) {}

  /** A commit's rows, in log order; `after`: the last row committed before them, if known. */
  append(entries: readonly LogEntry[], after: LogPosition | undefined): void {
    if (!entries.length) return
    const last = this.rows.length > this.first ? this.rows[this.rows.length - 1].at : this.prev
    if (!after || !last || !same(after, last)) {
      this.rows = []
      this.first = 0
      this.prev = after
    }
    for (const e of entries) this.rows.push(e)
    const over = this.rows.length - this.first - this.cap
    if (over > 0) {
      this.first += over
      this.prev = this.rows[this.first - 1].at
      if (this.first >= this.cap) {
        this.rows = this.rows.slice(this.first)
        this.first = 0
      }
    }
  }

  /** The kept rows after `at` (at most `limit`, each below `below`); undefined when none are known to follow it. */
  after(at: LogPosition, below: number, limit: number): LogEntry[] | undefined {
    const rows = this.rows
    let i: number
    if (this.prev && same(at, this.prev)) i = this.first
    else {
      let lo = this.first
      let hi = rows.length - 1
      if (hi < lo || before(at, rows[lo].at)) return undefined
      while (lo < hi) {
        const mid = (lo + hi) >>> 1
        if (before(rows[mid].at, at)) lo = mid + 1
        else hi = mid
      }
      if (!same(rows[lo].at, at)) return undefined
      i = lo + 1
    }
    let end = Math.min(rows.length, i + limit)
    while (end > i && rows[end - 1].at.seq >= below) end--
    return end > i ? rows.slice(i, end) : undefined
  }
}
