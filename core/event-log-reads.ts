import type { Db } from './db'
import { before } from './event-log-cursor'
import { CommittedTail } from './event-log-tail'
import type { Appended, LogEntry, LogPosition, LogSource } from './event-log-types'
import { turn } from './turn'

interface Kept {
  from: LogPosition
  below: number
  limit: number
  /** The read, shared while it runs. */
  entries: Promise<LogEntry[]>
  /** Its rows once read. */
  done?: LogEntry[]
  /** When it was made or last served (the monotonic clock), and how long it is kept from then. */
  at: number
  ttl: number
}

/** Rows per read of a SQLite log: a larger read is made of pages, with a turn of the event loop between. */
const PAGE = 5000

/**
 * A read of the log. SQLite's statements hold the thread (20,000 rows: ~50 ms, in which no
 * request is answered), so there it is read in pages, each after the last row of the one before,
 * with a turn of the event loop between: the same rows, as a row committed meanwhile comes after
 * them all (a later seq) and past `limit`'s end is not read.
 */
async function readPaged(source: LogSource, at: LogPosition, below: number, limit: number, db: Db) {
  if (db.dialect !== 'sqlite' || limit <= PAGE) return source.read(at, below, limit, db)
  const out: LogEntry[] = []
  let from = at
  for (;;) {
    const want = Math.min(PAGE, limit - out.length)
    const page = await source.read(from, below, want, db)
    for (const e of page) out.push(e)
    if (page.length < want || out.length >= limit) return out
    from = page[page.length - 1].at
    await turn()
  }
}

/** How long a read is kept for the consumers moving together, and a read ahead for its step. */
const KEEP_MS = 1000
const AHEAD_MS = 30_000
const KEPT_MAX = 32

/**
 * Reads of the log by the position they start after, shared by the consumers that are there
 * within a second: consumers moving together read each batch once (rows and their parsed
 * props), not once each, and one that arrives while the read runs waits for it. A kept read is a
 * prefix of any later one from the same place: its rows were committed below its horizon, and a
 * row committed since comes after all of them (a later seq on SQLite and MySQL, at or above that
 * horizon on PostgreSQL). So a consumer may take the kept rows, fewer than the store now holds,
 * and read the rest at its next step.
 *
 * A consumer whose cursor is one of a kept read's rows takes the rows after it (the same
 * argument: they are a prefix of what it would read). Consumers that woke at different times
 * then share: the one behind takes the tail of the read ahead of it, and both read on from its
 * end, from the same place.
 *
 * A read ahead (`prefetch`) is a kept read like the others, kept longer until it is first
 * served: every consumer at its position shares it, not only the one that asked for it.
 */
export class SharedReads {
  private readonly kept = new Map<string, Kept>()
  /** Reads served from a kept one, from the rows handed over at commit, and reads of the store (for the benchmarks). */
  readonly counts = { shared: 0, memory: 0, read: 0 }
  /** The rows the provider's last commits appended, as it handed them over. */
  private readonly tail = new CommittedTail()

  /** A commit's rows, handed over by a provider that writes the log alone (`EventLogService.notify`). */
  append(appended: Appended): void {
    this.tail.append(appended.entries, appended.after)
  }

  /**
   * Starts the read of a consumer's next batch while it writes this one (PostgreSQL, where the
   * read runs on a connection of its own): a consumer with a backlog then reads and writes at
   * once instead of in turn. The read is a prefix of any later one from the same place, by the
   * rule above, so it serves the next step whenever that comes (within 30 s).
   */
  prefetch(source: LogSource, at: LogPosition, below: number, limit: number, db: Db): void {
    const now = performance.now()
    this.prune(now)
    const key = `${at.seq}:${at.pos}`
    if (this.kept.has(key)) return
    // A failed read ahead is read again by the step itself.
    this.start(key, source, at, below, limit, db, now, AHEAD_MS).entries.catch(() => undefined)
  }

  async read(source: LogSource, at: LogPosition, below: number, limit: number, db: Db): Promise<LogEntry[]> {
    // The monotonic clock: a test's frozen wall clock must not keep reads forever.
    const handed = this.tail.after(at, below, limit)
    if (handed) {
      this.counts.memory++
      return handed
    }
    const now = performance.now()
    this.prune(now)
    const key = `${at.seq}:${at.pos}`
    const exact = this.kept.get(key)
    if (exact && exact.below <= below) {
      const entries = await exact.entries.catch(() => undefined)
      if (entries && (exact.limit >= limit || entries.length < exact.limit)) {
        this.counts.shared++
        // Served: kept from now on as any other read.
        exact.at = performance.now()
        exact.ttl = KEEP_MS
        return entries.length > limit ? entries.slice(0, limit) : entries
      }
    }
    const tail = this.tailAfter(at, below, limit, now)
    if (tail) {
      this.counts.shared++
      return tail
    }
    return this.start(key, source, at, below, limit, db, now, KEEP_MS).entries
  }

  /** Reads the store from `at` and keeps the read (while it runs too); a failed or empty one is forgotten. */
  private start(
    key: string,
    source: LogSource,
    at: LogPosition,
    below: number,
    limit: number,
    db: Db,
    now: number,
    ttl: number,
  ): Kept {
    this.counts.read++
    const r: Kept = { from: at, below, limit, entries: readPaged(source, at, below, limit, db), at: now, ttl }
    this.kept.set(key, r)
    const forget = () => {
      if (this.kept.get(key) === r) this.kept.delete(key)
    }
    r.entries.then((entries) => {
      if (entries.length) r.done = entries
      else forget()
    }, forget)
    return r
  }

  private prune(now: number): void {
    for (const [k, r] of this.kept) if (now - r.at >= r.ttl || this.kept.size >= KEPT_MAX) this.kept.delete(k)
  }

  /** The rows of a kept read after `at`, when `at` is one of its rows other than its last. */
  private tailAfter(at: LogPosition, below: number, limit: number, now: number): LogEntry[] | undefined {
    for (const r of this.kept.values()) {
      const e = r.done
      if (
        !e ||
        now - r.at >= r.ttl ||
        r.below > below ||
        !before(r.from, at) ||
        !before(at, e[e.length - 1].at)
      )
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
