import type { Db } from '../../../core/db'
import type {
  LogEntry,
  LogEvent,
  LogPayment,
  LogPosition,
  LogSource,
  PendingOptions,
} from '../../../core/event-log-types'
import type { EventRows } from '../persist/persist'
import { SUPERSEDING, invocationOf } from '../rows'
import { PAYMENT_STATUSES, type PaymentStatus, clean, str } from '../signed/validate'
import { EVENT_WIRE_COLS, EVENT_WIRE_WIDTH, LOG_COLS } from './event-cols'
import { readIds, readLogPg, readPositions, readSplit } from './log-pg'
import type { RecentRows } from './recent'

const COLS = LOG_COLS.join(', ')

interface EventRow {
  id: number | string
  seq: number | string
  received_at: number | string
  game_id: string
  env: string
  event: string
  ts: number | string
  user_id: string | null
  session_id: string | null
  amount_cents: number | string | null
  currency: string | null
  duration_ms: number | string | null
  network: string | null
  level: string | null
  payment_status: string | null
  props: string
}

/**
 * Where `pending` counts the rows themselves (a cursor before the commits `ingest_log_commits`
 * keeps), it counts no further: a larger backlog shows as this many rows.
 */
export const PENDING_CAP = 100_000

const n = (v: number | string | null) => (v === null ? null : Number(v))

/**
 * A stored row as consumers see it: its props parsed on first use (most consumers read them of
 * few events), a payment's and a call's facts said.
 */
class StoredEvent implements LogEvent {
  readonly id: number
  readonly receivedAt: number
  readonly gameId: string
  readonly env: string
  readonly event: string
  readonly ts: number
  readonly userId: string | null
  readonly sessionId: string | null
  readonly amountCents: number | null
  readonly currency: string | null
  readonly durationMs: number | null
  readonly network: string | null
  readonly level: string | null
  readonly payment?: LogEvent['payment']
  private parsed: Record<string, unknown> | undefined
  private invoked: LogEvent['invocation'] | null = null

  constructor(
    r: EventRow,
    private readonly raw: string,
  ) {
    this.id = Number(r.id)
    this.receivedAt = Number(r.received_at)
    this.gameId = r.game_id
    this.env = r.env
    this.event = r.event
    this.ts = Number(r.ts)
    this.userId = r.user_id
    this.sessionId = r.session_id
    this.amountCents = n(r.amount_cents)
    this.currency = r.currency
    this.durationMs = n(r.duration_ms)
    this.network = r.network
    this.level = r.level
    let status = r.payment_status
    if (status === null) return
    // The server's row that supersedes a client's (persist/supersede.ts): only it is so marked.
    const marked = status.endsWith(SUPERSEDING)
    if (marked) status = status.slice(0, -SUPERSEDING.length)
    if (!PAYMENT_STATUSES.includes(status as PaymentStatus)) return
    const payment: LogPayment = {
      orderId: clean(String(this.props.order_id ?? '')),
      status: status as PaymentStatus,
      amountCents: Number(r.amount_cents ?? 0),
    }
    if (marked) {
      const s = supersededEvent(this, payment, this.props.superseded)
      if (s) payment.supersedes = s
    }
    this.payment = payment
  }

  get props(): Record<string, unknown> {
    if (this.parsed === undefined) {
      try {
        this.parsed = JSON.parse(this.raw) as Record<string, unknown>
      } catch {
        this.parsed = {}
      }
    }
    return this.parsed
  }

  get eventId(): string | null {
    return str(this.props.event_id)
  }

  get invocation(): LogEvent['invocation'] {
    if (this.event !== 'function.invoke') return undefined
    this.invoked ??= invocationOf(this)
    return this.invoked
  }
}

const isObj = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v)

/**
 * The client's payment a superseding row replaces, as consumers see it: what its props'
 * `superseded` says (persist/supersede.ts), with the superseding row's game, environment, name,
 * order and status. Its id is the client's raw row's, or, where that was not found, the
 * superseding row's negated (unique all the same, so consumers can key by it).
 */
export function supersededEvent(row: LogEvent, p: LogPayment, v: unknown): LogEvent | undefined {
  if (!isObj(v)) return undefined
  const amountCents = Number(v.amount_cents)
  return {
    id: typeof v.id === 'number' ? v.id : -row.id,
    receivedAt: Number(v.received_at),
    gameId: row.gameId,
    env: row.env,
    event: row.event,
    ts: Number(v.ts),
    userId: str(v.user_id),
    sessionId: null,
    amountCents,
    currency: str(v.currency),
    durationMs: null,
    network: null,
    level: null,
    eventId: null,
    props: isObj(v.props) ? v.props : {},
    payment: { orderId: p.orderId, status: p.status, amountCents },
  }
}

/** A stored row as consumers see it. */
export const logEvent = (r: EventRow): LogEvent => new StoredEvent(r, r.props)

/**
 * Row `i` of a commit's raw events as the log's readers would read it back: built from the very
 * values the commit bound to its statement (`eventParams`) and the same `StoredEvent`.
 */
export function committedRow(e: EventRows, i: number): LogEvent {
  const { firstId, cols, props, streams, receivedAt } = e
  const k = i * EVENT_WIRE_WIDTH
  const st = (cols[k] as number) * 2
  const r: Record<string, unknown> = {
    id: firstId + i,
    received_at: receivedAt,
    game_id: streams[st],
    env: streams[st + 1],
    props: props[i],
  }
  for (let c = 0; c < EVENT_WIRE_COLS.length; c++) r[EVENT_WIRE_COLS[c]] = cols[k + 1 + c] ?? null
  return logEvent(r as unknown as EventRow)
}

/**
 * A commit's raw events as the log's readers would read them back, with the seq it took
 * (`EventLogService.notify` hands them to the consumers).
 */
export function committedEntries(e: EventRows, seq: number): LogEntry[] {
  const n = e.props.length
  const out: LogEntry[] = new Array(n)
  for (let i = 0; i < n; i++) out[i] = { at: { seq, pos: e.firstId + i }, row: committedRow(e, i) }
  return out
}

const END = Number.MAX_SAFE_INTEGER

/** See `pending` of `eventLog`. */
async function countAfter(db: Db, after: LogPosition, until: PendingOptions['until']): Promise<number> {
  const to = until?.at ?? { seq: END, pos: END }
  const behind = until?.rows ?? 0
  const r = await db.get<Record<'low' | 'later' | 'own' | 'last', number | string | null>>(
    `SELECT (SELECT MIN(seq) FROM ingest_log_commits) AS low,
       (SELECT SUM(events) FROM ingest_log_commits WHERE seq > ? AND seq < ?) AS later,
       (SELECT COUNT(*) FROM ingest_events WHERE seq = ? AND id > ? AND id <= ?) AS own,
       (SELECT COUNT(*) FROM ingest_events WHERE seq = ? AND seq > ? AND id <= ?) AS last`,
    [after.seq, to.seq, after.seq, after.pos, to.seq === after.seq ? to.pos : END, to.seq, after.seq, to.pos],
  )
  // The rows of the cursor's own commit after it, and of `until`'s before it: exact either way.
  const edges = Number(r?.own ?? 0) + Number(r?.last ?? 0)
  if (r && r.low !== null && after.seq >= Number(r.low)) return Number(r.later ?? 0) + edges + behind
  // The commits between, row by row (a range of seq: a cursor among the rows stored before the
  // log, all of seq 0, does not step over them, see `readSplit`).
  const n = await db.get<{ n: number | string }>(
    `SELECT COUNT(*) AS n FROM (SELECT 1 AS x FROM ingest_events WHERE seq > ? AND seq < ? LIMIT ${PENDING_CAP}) t`,
    [after.seq, to.seq],
  )
  // Never fewer than the consumer ahead of it, whose count may be exact past the cap.
  return Math.max(behind, Math.min(PENDING_CAP, Number(n?.n ?? 0) + edges + behind))
}

/**
 * The event log over `ingest_events` (issue 35): rows in (seq, id) order, each once by the
 * ingest rules (event_id; a payment's order and status). Rows with seq 0 were stored before the
 * log existed; consumers start past them (core/event-log.ts) and read them on a rebuild.
 */
export function eventLog(store: () => Db, recent?: RecentRows): LogSource {
  const readRows = async (after: LogPosition, below: number, limit: number, db: Db) => {
    const rows =
      db.dialect === 'postgres'
        ? ((await readLogPg(db, after, below, limit)) as EventRow[])
        : await readSplit<EventRow>(db, COLS, after, below, limit)
    return rows.map((r) => ({ at: { seq: Number(r.seq), pos: Number(r.id) }, row: logEvent(r) }))
  }
  return {
    get db() {
      return store()
    },
    async read(after: LogPosition, below: number, limit: number, db: Db): Promise<LogEntry[]> {
      // (SQLite's writer hands its rows over instead: nothing is kept there, `holds` is false.)
      if (!recent?.holds(after.pos)) return readRows(after, below, limit, db)
      // The positions from the store, the rows from this process's own commits (store/recent.ts).
      const at = await readPositions(db, after, below, limit)
      const out: LogEntry[] = new Array(at.length / 2)
      const missing: number[] = []
      for (let i = 0; i < at.length; i += 2) {
        const row = recent.row(at[i + 1], committedRow)
        out[i / 2] = { at: { seq: at[i], pos: at[i + 1] }, row: row as LogEvent }
        if (!row) missing.push(i / 2)
      }
      if (!missing.length) return out
      // Mostly rows this process did not keep (another instance's; a consumer behind the kept
      // ones): the same rows read whole, as one range (all below the horizon are committed).
      if (missing.length * 2 > out.length) return readRows(after, below, limit, db)
      // A few (another instance's commit among this one's; a slow commit's older ids, dropped
      // from the kept rows already): those rows by id. A whole read of the range each time made
      // a PostgreSQL run's consumers read 557,000 rows back from the store (docs/performance.md).
      const found = new Map<number, LogEvent>()
      for (const r of (await readIds(
        db,
        missing.map((j) => out[j].at.pos),
      )) as EventRow[])
        found.set(Number(r.id), logEvent(r))
      for (const j of missing) {
        const row = found.get(out[j].at.pos)
        // Gone since its position was read (retention): the range whole, as the store has it now.
        if (!row) return readRows(after, below, limit, db)
        out[j].row = row
      }
      return out
    },
    /**
     * By commit where `ingest_log_commits` holds every commit after the cursor's (its seq is at or
     * past the oldest kept there): the events of the later commits summed, and the rows of the
     * cursor's own commit after it counted (one index range, at most one commit's rows); with
     * `until`, up to it (and the rows of its commit before it), plus its rows. Exact, and cheap at
     * any backlog. Else (a cursor back at the start: a rebuild, a new consumer) the
     * rows themselves, counted up to `PENDING_CAP`: an exact count over a rebuild's backlog read
     * every row after the cursor, four consumers at each status (`/consumers`, the metrics), and
     * during a 1 M-row rebuild on PostgreSQL that query was the server's busiest. `until` bounds
     * that count at the next consumer's cursor (core's `status` counts the log behind them once).
     * The oldest is taken as the next row in log order (one index probe).
     */
    async pending(after: LogPosition, db: Db, o: PendingOptions = {}) {
      const { until, count = true } = o
      const [rows, first] = await Promise.all([
        count ? countAfter(db, after, until) : 0,
        // The next row of the cursor's commit, else of the later ones (two index probes, as `readSplit`).
        db.get<{ t: number | string }>(
          `SELECT COALESCE(
             (SELECT received_at FROM ingest_events WHERE seq = ? AND id > ? ORDER BY id LIMIT 1),
             (SELECT received_at FROM ingest_events WHERE seq > ? ORDER BY seq, id LIMIT 1)) AS t`,
          [after.seq, after.pos, after.seq],
        ),
      ])
      return { rows, oldestReceivedAt: first?.t == null ? null : Number(first.t) }
    },
    /** Forgets the commits before the one every consumer is in or past (their counts are not needed). */
    async trim(lowest: LogPosition, db: Db) {
      await db.run('DELETE FROM ingest_log_commits WHERE seq < ?', [lowest.seq])
    },
    /**
     * PostgreSQL: only a transaction holding a lock on `ingest_events` can add rows to it, and
     * ingest's commits take that lock before their first write, so before they have an xid: the
     * oldest xid among the lock's holders (and waiters), else the next xid to be assigned. A
     * transaction that takes the lock later gets an xid at or above that. Another schema's or
     * database's long transaction does not hold the consumers back.
     */
    async horizon(db: Db): Promise<number> {
      const r = await db.get<{ xmax: string; xids: string | null }>(
        `SELECT pg_snapshot_xmax(pg_current_snapshot())::text AS xmax,
           (SELECT string_agg(t.transactionid::text, ',') FROM pg_locks r
             JOIN pg_locks t ON t.pid = r.pid AND t.locktype = 'transactionid' AND t.mode = 'ExclusiveLock'
             WHERE r.locktype = 'relation' AND r.relation = 'ingest_events'::regclass AND r.pid <> pg_backend_pid()) AS xids`,
      )
      const xmax = BigInt(r?.xmax ?? 0)
      let low = xmax
      for (const x of r?.xids ? r.xids.split(',') : []) {
        // 32-bit xids, made 64-bit against xmax (none is older than 2^31 transactions).
        let full = (xmax & ~0xffffffffn) | BigInt(x)
        if (full > xmax) full -= 0x100000000n
        if (full < low) low = full
      }
      return Number(low)
    },
    async head(db: Db): Promise<LogPosition> {
      const r = await db.get<{ seq: number | string; id: number | string }>(
        'SELECT seq, id FROM ingest_events ORDER BY seq DESC, id DESC LIMIT 1',
      )
      return r ? { seq: Number(r.seq), pos: Number(r.id) } : { seq: 0, pos: 0 }
    },
  }
}
