import type { Db } from './db'
import type {
  ConsumerStatus,
  LogConsumer,
  LogEntry,
  LogPosition,
  LogRow,
  LogSource,
  Pending,
} from './event-log-types'
import type { Logger } from './log'
import type { HealthResult } from './plugin'

/** A row of `liveops_consumers` (core migrations 006 and 008): one consumer's cursor, lease and rebuild. */
export interface CursorRow {
  name: string
  seq: number | string
  pos: number | string
  delivered: number | string
  lease_owner: string | null
  lease_until: number | string | null
  last_error: string | null
  rebuild_from: number | string | null
  until_seq: number | string | null
  until_pos: number | string | null
  rebuild_request: number | string | null
}

/** `rebuild_request` of a whole rebuild. */
export const WHOLE = -1

export const START: LogPosition = { seq: 0, pos: 0 }
export const before = (a: LogPosition, b: LogPosition) => a.seq < b.seq || (a.seq === b.seq && a.pos < b.pos)

/** Positions in log order: negative when `a` comes first, 0 when they are the same place. */
export const compare = (a: LogPosition, b: LogPosition) => (before(a, b) ? -1 : before(b, a) ? 1 : 0)

/** A step whose cursor or lease moved under it: rolled back, not an error. */
export class LostLease extends Error {}

export const cursorOf = (r: CursorRow): LogPosition => ({ seq: Number(r.seq), pos: Number(r.pos) })

/** Where a rebuild must re-deliver only rows from its date: the old cursor, or an unfinished rebuild's end. */
export function rebuildUntil(cur: CursorRow): LogPosition {
  const at = cursorOf(cur)
  if (cur.until_seq === null) return at
  const earlier = { seq: Number(cur.until_seq), pos: Number(cur.until_pos) }
  return before(at, earlier) ? earlier : at
}

/**
 * The rows of a batch the consumer takes: none the source withholds (a deleted game's), and during
 * a rebuild from a date, the re-counted times (from the date, or from where the consumer says each
 * game's results were kept to).
 */
export async function deliverable(
  c: LogConsumer,
  cur: CursorRow,
  entries: LogEntry[],
  withheld?: (row: LogRow) => boolean,
) {
  const until =
    cur.until_seq === null ? undefined : { seq: Number(cur.until_seq), pos: Number(cur.until_pos) }
  const from = cur.rebuild_from === null ? undefined : Number(cur.rebuild_from)
  const rows: LogRow[] = []
  const cuts = new Map<string, number>()
  for (const e of entries) {
    if (withheld?.(e.row)) continue
    if (until && from !== undefined && !before(until, e.at)) {
      let cut = c.replayFrom ? cuts.get(e.row.gameId) : from
      if (cut === undefined) {
        cut = await c.replayFrom!(e.row.gameId, from)
        cuts.set(e.row.gameId, cut)
      }
      const p = e.row.payment
      // A superseding payment (`LogPayment.supersedes`) whose two times lie either side of the cut:
      // the side before it was kept, so only the other side is delivered.
      if (p?.supersedes && e.row.ts >= cut !== p.supersedes.ts >= cut) {
        rows.push(partOf(e.row, e.row.ts >= cut))
        continue
      }
      if (e.row.ts < cut) continue
    }
    rows.push(e.row)
  }
  return rows
}

/**
 * A superseding payment row with only its own counting (`own`: the client's row before the cut
 * kept what it counted, and what the supersede took off it), or only the taking off of the
 * client's (its own counts, before the cut, were kept).
 */
function partOf(row: LogRow, own: boolean): LogRow {
  const { supersedes, ...p } = row.payment!
  const payment = own ? p : { ...p, supersedes, recount: false as const }
  return new Proxy(row, { get: (t, k) => (k === 'payment' ? payment : Reflect.get(t, k, t)) })
}

/** One consumer's status from its row and what lies after its cursor. */
export function statusOf(r: CursorRow, pending: Pending, now: number, parked = 0): ConsumerStatus {
  const oldest = pending.oldestReceivedAt
  return {
    name: r.name,
    cursor: cursorOf(r),
    delivered: Number(r.delivered),
    lagEvents: pending.rows,
    lagSeconds: oldest === null ? 0 : Math.max(0, (now - oldest) / 1000),
    asOf: oldest === null ? now : oldest - 1,
    leaseOwner: r.lease_until !== null && Number(r.lease_until) >= now ? r.lease_owner : null,
    lastError: r.last_error,
    rebuilding: r.until_seq !== null || r.rebuild_request !== null,
    parked,
  }
}

/**
 * Where a consumer's lag is counted from: its cursor, or the start of the log once a rebuild is
 * asked (its results are then being deleted, in slices, before the cursor goes back there).
 */
const lagFrom = (r: CursorRow): LogPosition => (r.rebuild_request !== null ? START : cursorOf(r))

/**
 * Each consumer's pending rows, by name. The most advanced cursor is counted first, and each one
 * behind counts only the rows up to the next one's cursor, adding that one's count: the log behind
 * the slowest consumer is counted once, not once per consumer (under a status read each second on
 * PostgreSQL, four full counts were most of the server's busy samples; wave 3, eighth session).
 * `counts: false`: the times alone.
 */
export async function pendingOf(
  rows: CursorRow[],
  source: LogSource | undefined,
  db: Db,
  counts: boolean,
): Promise<Map<string, Pending>> {
  const out = new Map<string, Pending>()
  let next: { at: LogPosition; p: Pending } | undefined
  for (const r of [...rows].sort((a, b) => compare(lagFrom(b), lagFrom(a)))) {
    const at = lagFrom(r)
    let p: Pending = { rows: 0, oldestReceivedAt: null }
    if (next && compare(next.at, at) === 0) p = next.p
    else if (source)
      p = await source.pending(at, db, { until: next && { at: next.at, rows: next.p.rows }, count: counts })
    out.set(r.name, p)
    next = { at, p }
  }
  return out
}

/**
 * The `consumers` check of /healthz: each consumer's cursor, lag and runner. Down (not critical)
 * while a consumer's last step failed, naming it.
 */
export function healthOf(all: ConsumerStatus[]): HealthResult {
  const consumers: Record<string, unknown> = {}
  const failing: string[] = []
  for (const s of all) {
    if (s.lastError !== null) failing.push(s.name)
    consumers[s.name] = {
      lag_events: s.lagEvents,
      lag_seconds: s.lagSeconds,
      as_of: new Date(s.asOf).toISOString(),
      delivered: s.delivered,
      running_on: s.leaseOwner,
      rebuilding: s.rebuilding,
      last_error: s.lastError,
      parked: s.parked,
    }
  }
  return failing.length
    ? { status: 'down', error: `consumer failing: ${failing.join(', ')}`, consumers }
    : { status: 'up', consumers }
}

/**
 * PostgreSQL: the seq below which no row can still appear. The source may say it more closely
 * (the transactions that can write the log, `LogSource.horizon`); else the oldest transaction
 * still running on the server (its snapshot's xmin). Elsewhere, no limit.
 */
export class Horizon {
  private last: { value: number; at: number } | undefined

  async below(db: Db, source: LogSource | undefined): Promise<number> {
    if (db.dialect !== 'postgres') return Number.MAX_SAFE_INTEGER
    // Shared by the steps of the next 100 ms: an older horizon is a lower one, never unsafe, and
    // reading pg_locks takes the server's lock-manager locks. Timed by the monotonic clock, as
    // every wait of this process (a test's frozen wall clock must not freeze them).
    const now = performance.now()
    if (this.last && now - this.last.at < 100) return this.last.value
    const own = await source?.horizon?.(db)
    const value =
      own ??
      Number((await db.get<{ x: string }>('SELECT pg_snapshot_xmin(pg_current_snapshot())::text AS x'))?.x)
    this.last = { value, at: now }
    return value
  }
}

/**
 * Every `everyMs` (a timer while the log runs) tells the source the position of this process's
 * slowest consumer, or the log's head when it has none (`LogSource.trim`): what the source keeps
 * to count the rows after a cursor (ingest's commits) need not reach further back. Never in the
 * way of a step: one at a time, beside them, and a failure is only logged.
 */
export class Trimmer {
  private timer: ReturnType<typeof setInterval> | undefined
  private running = false

  constructor(private readonly everyMs = 10_000) {}

  start(
    db: () => Db,
    source: LogSource | undefined,
    names: { has(name: string): boolean },
    log: Logger,
  ): void {
    if (!source?.trim || this.timer) return
    this.timer = setInterval(
      () => {
        if (this.running) return
        this.running = true
        this.run(db(), source, names)
          .catch((e) => log.warn('event log trim failed', { error: String(e) }))
          .finally(() => {
            this.running = false
          })
      },
      Math.max(10, this.everyMs),
    )
    this.timer.unref?.()
  }

  stop(): void {
    clearInterval(this.timer)
    this.timer = undefined
  }

  private async run(db: Db, source: LogSource, names: { has(name: string): boolean }) {
    const rows = (await db.all<CursorRow>('SELECT name, seq, pos FROM liveops_consumers')).filter((r) =>
      names.has(r.name),
    )
    const lowest = rows.length
      ? rows.map(cursorOf).reduce((a, b) => (before(b, a) ? b : a))
      : await source.head(db)
    await source.trim!(lowest, db)
  }
}

/** One step's attempt: what runs once it committed, and the rows it read from which cursor. */
export interface Attempt {
  after?: () => void
  entries?: LogEntry[]
  cursor?: CursorRow
}
