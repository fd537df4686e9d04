import type { Db } from './db'
import { type CursorRow, LostLease, before, cursorOf } from './event-log-cursor'
import type { ConsumerStatus, LogConsumer, LogEntry, LogPosition, ParkedEvent } from './event-log-types'
import type { Logger } from './log'
import type { Metrics } from './metrics'

/** Failures of one row read alone, with an error of its own, before it is parked. */
export const PARK_AFTER = 3
/** The longest wait between two attempts of a failing consumer. */
export const MAX_BACKOFF_MS = 30_000

/**
 * Errors of the store, the network or the machine, not of a row: a batch failing with one is
 * retried as it is (the store coming back takes the whole batch again), never narrowed down and
 * never a reason to park a row.
 */
const TRANSIENT =
  /SQLITE_(BUSY|LOCKED|FULL|IOERR|CANTOPEN|READONLY|NOMEM|PROTOCOL)|database is locked|disk|no space|ECONN|EPIPE|ETIMEDOUT|EAI_AGAIN|socket|connection|terminat|shut ?down|deadlock|could not serialize|timeout|timed out|too many|out of memory|read-only|recovery|lost lease/i

export const transient = (e: unknown) => TRANSIENT.test(String(e instanceof Error ? e.message : e))

interface Trouble {
  /** Where the batch that failed first was read from: a cursor moved back before it (a rebuild) reads whole again. */
  start: LogPosition
  /** The last row of the batch that failed first: until the cursor passes it, reads are narrowed. */
  end: LogPosition
  /** Rows to read at once meanwhile: half of the last failed read. */
  limit: number
  /** Consecutive failures of a read of one row (the same row: the cursor has not moved). */
  alone: number
}

/** A row a consumer set aside, as `liveops_consumer_parked` (core migration 009) keeps it. */
export interface ParkedRow {
  consumer: string
  at: LogPosition
  entry: LogEntry
  error: string
}

/**
 * A poison row: one the consumer's code fails on every time (a definition that did not foresee
 * it). Without this, one such row stops its consumer for every game, and the lag grows without
 * end. A failed batch is read again in halves until the failing row is read alone; once it has
 * failed alone `PARK_AFTER` times with an error that is not the store's (`transient`), it is
 * parked: recorded in `liveops_consumer_parked` with its error, and the cursor moves past it in
 * the same transaction. A consumer that parked a row parks no other until a batch after it
 * commits, so an error that every row meets (a missing table, a broken release) parks one row
 * and then stops the consumer, as before, naming the error. A rebuild delivers parked rows
 * again (and forgets them): after the definition is fixed, they count.
 */
export class Parking {
  private readonly trouble = new Map<string, Trouble>()
  /** Consecutive failed steps of each consumer (the backoff). */
  private readonly failures = new Map<string, number>()
  /** Consumers that parked a row and committed no batch since. */
  private readonly justParked = new Set<string>()

  /**
   * Rows to read after `at`: the consumer's batch, or fewer while a failed batch is narrowed down.
   * Kept by position, so a cursor another instance moved past the failed batch, or one a rebuild
   * moved back before it, reads whole again.
   */
  limit(name: string, at: LogPosition, batch: number): number {
    const t = this.trouble.get(name)
    if (!t) return batch
    if (before(at, t.start) || !before(at, t.end)) {
      this.trouble.delete(name)
      return batch
    }
    return Math.min(batch, t.limit)
  }

  succeeded(name: string): void {
    this.failures.delete(name)
    this.justParked.delete(name)
    const t = this.trouble.get(name)
    if (t) t.alone = 0
  }

  /** A step failed after reading `entries` from `from`: whether its one row is now to be parked. */
  failed(name: string, entries: readonly LogEntry[], error: unknown, from: LogPosition): boolean {
    this.failures.set(name, (this.failures.get(name) ?? 0) + 1)
    if (!entries.length || transient(error)) return false
    const t = this.trouble.get(name) ?? {
      start: from,
      end: entries[entries.length - 1].at,
      limit: entries.length,
      alone: 0,
    }
    this.trouble.set(name, t)
    if (entries.length > 1) {
      t.limit = Math.ceil(entries.length / 2)
      t.alone = 0
      return false
    }
    t.limit = 1
    t.alone++
    return t.alone >= PARK_AFTER && !this.justParked.has(name)
  }

  /**
   * How long to wait before the next attempt: a short poll while a batch is being narrowed down
   * (halving 20,000 rows to one takes 15 reads), doubling from it while a row fails alone or the
   * store fails, up to `MAX_BACKOFF_MS`.
   */
  delay(name: string, pollMs: number): number {
    const t = this.trouble.get(name)
    if (t && t.limit > 1 && t.alone === 0) return pollMs
    const k = Math.min(this.failures.get(name) ?? 1, 16)
    return Math.min(MAX_BACKOFF_MS, pollMs * 2 ** (k - 1))
  }

  parked(name: string): void {
    this.trouble.delete(name)
    this.failures.delete(name)
    this.justParked.add(name)
  }
}

/** Records a parked row in `tx` (the transaction that moves the cursor past it). */
export async function recordParked(tx: Db, p: ParkedRow, now: number): Promise<void> {
  const r = p.entry.row
  await tx.run(
    `INSERT INTO liveops_consumer_parked (consumer, seq, pos, event_id, game_id, env, event, ts, error, parked_at)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
     ON CONFLICT (consumer, seq, pos) DO UPDATE SET error = excluded.error, parked_at = excluded.parked_at`,
    [
      p.consumer,
      p.at.seq,
      p.at.pos,
      r.eventId === null ? null : r.eventId.slice(0, 128),
      r.gameId.slice(0, 128),
      r.env.slice(0, 128),
      r.event.slice(0, 128),
      r.ts,
      p.error.slice(0, 500),
      now,
    ],
  )
}

/** A consumer's parked rows, newest first, at most `limit`, and how many there are. */
export async function parkedRows(
  db: Db,
  consumer: string,
  limit: number,
): Promise<{ total: number; items: ParkedEvent[] }> {
  const [rows, n] = await Promise.all([
    db.all<Record<string, string | number | null>>(
      `SELECT seq, pos, event_id, game_id, env, event, ts, error, parked_at FROM liveops_consumer_parked
       WHERE consumer = ? ORDER BY parked_at DESC, seq DESC, pos DESC LIMIT ?`,
      [consumer, limit],
    ),
    db.get<{ n: number | string }>('SELECT COUNT(*) AS n FROM liveops_consumer_parked WHERE consumer = ?', [
      consumer,
    ]),
  ])
  return {
    total: Number(n?.n ?? 0),
    items: rows.map((r) => ({
      at: { seq: Number(r.seq), pos: Number(r.pos) },
      eventId: r.event_id === null ? null : String(r.event_id),
      gameId: String(r.game_id),
      env: String(r.env),
      event: String(r.event),
      ts: Number(r.ts),
      error: String(r.error),
      parkedAt: Number(r.parked_at),
    })),
  }
}

/** Each consumer's parked rows, by name. */
export async function parkedCounts(db: Db): Promise<Map<string, number>> {
  const rows = await db.all<{ consumer: string; n: number | string }>(
    'SELECT consumer, COUNT(*) AS n FROM liveops_consumer_parked GROUP BY consumer',
  )
  return new Map(rows.map((r) => [r.consumer, Number(r.n)]))
}

/**
 * A rebuild delivers the parked rows again: those it re-delivers (everything, or from each game's
 * `cut`, the time its rows are replayed from) are forgotten, and park again if they still fail.
 */
export async function unpark(
  tx: Db,
  consumer: string,
  cut?: (gameId: string) => number | Promise<number>,
): Promise<void> {
  if (!cut) {
    await tx.run('DELETE FROM liveops_consumer_parked WHERE consumer = ?', [consumer])
    return
  }
  const rows = await tx.all<{ game_id: string; seq: number; pos: number; ts: number }>(
    'SELECT game_id, seq, pos, ts FROM liveops_consumer_parked WHERE consumer = ?',
    [consumer],
  )
  for (const r of rows)
    if (Number(r.ts) >= (await cut(r.game_id)))
      await tx.run('DELETE FROM liveops_consumer_parked WHERE consumer = ? AND seq = ? AND pos = ?', [
        consumer,
        r.seq,
        r.pos,
      ])
}

/**
 * Sets a poison row aside: recorded with its error, and the cursor moved past it, in one
 * transaction conditional on the lease and the cursor, like a batch's. Answers the rows taken (1).
 */
export async function parkRow(
  db: Db,
  c: LogConsumer,
  cur: CursorRow,
  entry: LogEntry,
  e: unknown,
  o: { instanceId: string; now: () => number; log: Logger; parking: Parking },
): Promise<number> {
  const at = cursorOf(cur)
  const until =
    cur.until_seq === null ? undefined : { seq: Number(cur.until_seq), pos: Number(cur.until_pos) }
  const done = until !== undefined && !before(entry.at, until)
  await db.tx(async (tx) => {
    await recordParked(tx, { consumer: c.name, at: entry.at, entry, error: String(e) }, o.now())
    const moved = await tx.run(
      `UPDATE liveops_consumers SET seq = ?, pos = ?, updated_at = ?, last_error = NULL${
        done ? ', rebuild_from = NULL, until_seq = NULL, until_pos = NULL' : ''
      }
       WHERE name = ? AND lease_owner = ? AND seq = ? AND pos = ? AND rebuild_request IS NULL`,
      [entry.at.seq, entry.at.pos, o.now(), c.name, o.instanceId, at.seq, at.pos],
    )
    if (moved !== 1) throw new LostLease(`consumer '${c.name}' moved under this instance`)
  })
  o.parking.parked(c.name)
  const r = entry.row
  o.log.error('consumer parked a row', {
    consumer: c.name,
    seq: entry.at.seq,
    pos: entry.at.pos,
    game_id: r.gameId,
    event: r.event,
    event_id: r.eventId,
    error: String(e),
  })
  return 1
}

/** The consumers' gauges, read from their status at each scrape. */
export function consumerMetrics(metrics: Metrics, status: () => Promise<ConsumerStatus[]>): void {
  const lagS = metrics.gauge(
    'svc_consumer_lag_seconds',
    'Age of the oldest row a consumer has not taken in',
    ['consumer'],
  )
  const lagN = metrics.gauge('svc_consumer_lag_events', 'Rows of the log a consumer has not taken in', [
    'consumer',
  ])
  const parked = metrics.gauge(
    'svc_consumer_parked_events',
    'Rows a consumer set aside after its code failed on each alone (a rebuild delivers them again)',
    ['consumer'],
  )
  metrics.collect(async () => {
    for (const s of await status()) {
      lagS.set({ consumer: s.name }, s.lagSeconds)
      lagN.set({ consumer: s.name }, s.lagEvents)
      parked.set({ consumer: s.name }, s.parked)
    }
  })
}
