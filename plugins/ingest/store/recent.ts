import type { LogEvent } from '../../../core/event-log-types'
import type { EventRows } from '../persist/persist'

/**
 * The raw rows this process committed last, by id, on stores where the log is read back
 * (PostgreSQL, MySQL: other instances may write it too, and a row's place in the log, its
 * transaction's number, is known only to the store). A consumer's read then asks the store for
 * the positions alone (`seq`, `id`: the log index, no row built into JSON on the server nor
 * parsed here) and takes the rows from here. The positions still come from the store, so the
 * log's order, its horizon and the rows of other instances are the store's; a row's content never
 * changes once committed (its id is its primary key), so the one kept here is the one stored.
 * A read that meets a row not kept here (another instance's, one older than the kept ones) reads
 * the store as before (`store/log.ts`).
 */
export class RecentRows {
  /** Committed commits' rows, by first id (ids run from `firstId` up by one within a commit). */
  private blocks: Block[] = []
  private size = 0

  /**
   * `cap`: rows kept (the oldest go first), about 400 bytes each (80 MB at most). A PostgreSQL
   * benchmark's consumers lagged up to 2.3 s at 58,000 events/s (133,000 rows): with 100,000
   * kept, the one behind read its batches back from the store whole (3.5 s of the server's
   * statement time in a 40 s run, pg_stat_statements); with 200,000, none did.
   */
  constructor(private readonly cap = 200_000) {}

  /** A commit's rows, once it committed. */
  add(rows: EventRows): void {
    const n = rows.props.length
    if (!n) return
    const b: Block = { rows, built: new Array(n) }
    // Commits answer about in the order their ids were handed out: search from the end.
    let i = this.blocks.length
    while (i > 0 && this.blocks[i - 1].rows.firstId > rows.firstId) i--
    this.blocks.splice(i, 0, b)
    this.size += n
    while (this.size > this.cap && this.blocks.length > 1) {
      this.size -= this.blocks[0].rows.props.length
      this.blocks.shift()
    }
  }

  /** Whether a read after the row `id` may find its rows here: the id is not older than the kept rows. */
  holds(id: number): boolean {
    return this.blocks.length > 0 && id >= this.blocks[0].rows.firstId
  }

  /** The committed row `id`, when kept; built once and shared by the reads that meet it. */
  row(id: number, build: (rows: EventRows, i: number) => LogEvent): LogEvent | undefined {
    const blocks = this.blocks
    let lo = 0
    let hi = blocks.length - 1
    while (lo <= hi) {
      const mid = (lo + hi) >>> 1
      const b = blocks[mid]
      const i = id - b.rows.firstId
      if (i < 0) hi = mid - 1
      else if (i >= b.rows.props.length) lo = mid + 1
      else {
        b.built[i] ??= build(b.rows, i)
        return b.built[i]
      }
    }
    return undefined
  }
}

interface Block {
  rows: EventRows
  built: (LogEvent | undefined)[]
}
