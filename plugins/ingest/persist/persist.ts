import type { Db, Param } from '../../../core/db'
import { rollupWriters } from '../../rollups'
import type { Stored } from '../rollup'
import { insertMany } from '../store/sql'

const EVENT_COLS = [
  'id',
  'received_at',
  'game_id',
  'env',
  'event',
  'ts',
  'user_id',
  'session_id',
  'amount_cents',
  'currency',
  'duration_ms',
  'network',
  'level',
  'props',
] as const
const PAYMENT_COLS = [
  'game_id',
  'env',
  'order_id',
  'status',
  'amount_cents',
  'currency',
  'user_id',
  'ts',
  'received_at',
]
const INVOCATION_COLS = [
  'id',
  'game_id',
  'env',
  'ts',
  'received_at',
  'function_id',
  'actor',
  'outcome',
  'duration_ms',
  'trace_id',
]

/** Per raw event in `EventRows.cols`: its stream's index, then these columns of `EVENT_COLS`. */
const EVENT_WIRE_COLS = EVENT_COLS.slice(4, -1)
export const EVENT_WIRE_WIDTH = 1 + EVENT_WIRE_COLS.length

/**
 * A commit's raw events, compact: what all of them share is said once. Their ids run from
 * `firstId` up by one, they were all received at `receivedAt`, and each names its game and
 * environment by an index into `streams`. Props are JSON text, kept apart so that, crossing to
 * the persist thread, they are not escaped into another JSON text (see `encodeCommit`).
 */
export interface EventRows {
  firstId: number
  receivedAt: number
  /** game id, environment, game id, environment, ... */
  streams: string[]
  /** Per event: the stream's index, then event, ts, user_id, session_id, amount_cents, currency, duration_ms, network, level. */
  cols: Param[]
  props: string[]
}

/** The raw event rows, in `EVENT_COLS` order. */
export function eventParams(e: EventRows): Param[] {
  const { firstId, cols, props, streams, receivedAt } = e
  const out: Param[] = new Array(props.length * EVENT_COLS.length)
  for (let i = 0, k = 0, o = 0; i < props.length; i++, k += EVENT_WIRE_WIDTH) {
    const st = (cols[k] as number) * 2
    out[o++] = firstId + i
    out[o++] = receivedAt
    out[o++] = streams[st]
    out[o++] = streams[st + 1]
    for (let c = 1; c < EVENT_WIRE_WIDTH; c++) out[o++] = cols[k + c]
    out[o++] = props[i]
  }
  return out
}

/**
 * A commit as one string for the persist thread: JSON, then each event's props after a NUL.
 * Props are JSON text, in which a NUL can only appear escaped, so splitting at NULs is exact;
 * and they cross without being escaped and unescaped again, which was a third of the cost of a
 * plain `JSON.stringify` of the rows and its parse.
 */
export function encodeCommit(rows: CommitRows): string {
  const { props } = rows.events
  const head = JSON.stringify({ ...rows, events: { ...rows.events, props: [] } })
  return props.length ? `${head}\u0000${props.join('\u0000')}` : head
}

export function decodeCommit(text: string): CommitRows {
  const parts = text.split('\u0000')
  const rows = JSON.parse(parts[0]) as CommitRows
  rows.events.props = parts.slice(1)
  return rows
}

/**
 * The rows of one group commit, prepared by the writer: raw events compact (`EventRows`),
 * payments and invocations one row after another in their column order, and each registered
 * rollup's rows under its name (plain JSON values, see `Rollup`).
 */
export interface CommitRows {
  events: EventRows
  payments: Param[]
  invocations: Param[]
  rollups: Array<[name: string, rows: unknown]>
  /** `nonce, expires_at` pairs of the requests in this commit (single-instance replay window). */
  nonces?: Param[]
  /**
   * `index, event_id` pairs of the events that carry an id (index into `events`), in key order
   * (game, environment, event_id), each key once: claimed in `ingest_event_ids`.
   */
  eventIds?: Param[]
}

/**
 * The message of the error that rolls a commit back when one of its event ids was stored already
 * (by an earlier commit, or a concurrent one on a shared PostgreSQL): the writer takes those
 * events out and commits the rest again. It crosses from the persist thread as text.
 */
export const DUPLICATE_EVENTS = 'ingest: event ids stored already'

const EVENT_ID_COLS = ['stream', 'event_id', 'received_at']

/**
 * Stream numbers (`ingest_streams`) by store, `game \u0001 env` -> id: a stream's number never
 * changes once committed, so each is read once per connection's process.
 */
const knownStreams = new WeakMap<Db, Map<string, number>>()

/**
 * The numbers of a commit's streams (`EventRows.streams`), by index, inside its transaction:
 * a new stream is inserted (a concurrent commit's insert of the same one is waited for, then
 * read). `fresh` collects those first seen here, to be remembered once the commit stands.
 */
async function streamNumbers(
  tx: Db,
  streams: string[],
  known: Map<string, number>,
  fresh: Map<string, number>,
) {
  const out: number[] = new Array(streams.length / 2)
  for (let i = 0; i < streams.length; i += 2) {
    const k = `${streams[i]}\u0001${streams[i + 1]}`
    let id = known.get(k)
    if (id === undefined) {
      await tx.run(
        'INSERT INTO ingest_streams (game_id, env) VALUES (?, ?) ON CONFLICT (game_id, env) DO NOTHING',
        [streams[i], streams[i + 1]],
      )
      const row = await tx.get<{ id: number }>(
        'SELECT id FROM ingest_streams WHERE game_id = ? AND env = ?',
        [streams[i], streams[i + 1]],
      )
      id = Number(row?.id)
      fresh.set(k, id)
    }
    out[i / 2] = id
  }
  return out
}

/** The `ingest_event_ids` rows of a commit: the event's stream number, its event_id, the commit's receive time. */
function eventIdParams(rows: CommitRows, numbers: number[]): Param[] {
  const ids = rows.eventIds ?? []
  const { cols, receivedAt } = rows.events
  const out: Param[] = new Array((ids.length / 2) * 3)
  for (let k = 0, o = 0; k < ids.length; k += 2) {
    out[o++] = numbers[cols[(ids[k] as number) * EVENT_WIRE_WIDTH] as number]
    out[o++] = ids[k + 1]
    out[o++] = receivedAt
  }
  return out
}

/** A repeated (order_id, status) is stored once; the new ones come back for the rollups. */
const PAYMENTS_TAIL =
  'ON CONFLICT (game_id, env, order_id, status) DO NOTHING RETURNING game_id, env, order_id, status, amount_cents, ts, user_id'

/**
 * PostgreSQL: the advisory lock a commit holds from its first rollup statement to its end, in
 * every instance sharing the database (an arbitrary key, ASCII "lvop").
 */
export const ROLLUP_LOCK = 0x6c766f70

/** The write half of a registered rollup; a name no writer answers to fails the commit. */
function writerOf(name: string) {
  const w = rollupWriters[name]
  if (!w) throw new Error(`ingest: no rollup writer named '${name}' in plugins/rollups.ts`)
  return w
}

/**
 * Writes one group commit in one transaction: the raw rows, then every rollup's rows. On
 * PostgreSQL the statements are sent at once, pipelined on the transaction's connection; a
 * rollup that counts payments waits for their insert's answer (`Stored.payments`). Rollups
 * keep their rows in key order, so two commits lock a table's rows in one order; but different
 * rollups' statements may reach the server in another order from one commit to the next (one
 * waiting for the payments' answer, another for its own first statement's), so two commits
 * deadlocked on rows they share (seen: `analytics_behavior_day` against `analytics_minute`), and
 * PostgreSQL found each deadlock only after its `deadlock_timeout` (1 s): the p99 of signed
 * batches was that second. So the rollups' statements run under one transaction-scoped advisory
 * lock (`ROLLUP_LOCK`), taken after the raw rows and the rollups' early parts (each user's own
 * rows: first sights, user-days): commits still store those side by side, and take the rows
 * every commit shares (the minute's, the day's, the hour's counters) one commit at a time, as
 * those rows' locks made them anyway. A deadlock that still happens is
 * rolled back by PostgreSQL and run again by the writer (`GroupWriter.commit`).
 */
export async function persist(db: Db, rows: CommitRows): Promise<void> {
  const writers = rows.rollups.map(([name, r]) => [writerOf(name), r] as const)
  let known = knownStreams.get(db)
  if (!known) {
    known = new Map()
    knownStreams.set(db, known)
  }
  const fresh = new Map<string, number>()
  const pg = db.dialect === 'postgres'
  await db.tx(async (tx) => {
    // First, so that every commit takes the event-id keys (in key order) before any other lock.
    let claimed = 0
    const idParams = rows.eventIds?.length
      ? eventIdParams(rows, await streamNumbers(tx, rows.events.streams, known, fresh))
      : undefined
    // The raw rows' statements on SQLite, sent with the rest.
    const raw: Promise<unknown>[] = []
    if (tx.copy) {
      // PostgreSQL: the event ids and the raw events by COPY, each alone on the transaction's
      // connection, before the statements sent together: the server parses no JSON for them
      // (about half of the raw rows' cost on the server, docs/performance.md, session 18). An id
      // stored already is the unique violation (a retry's cost, paid by the retry): a plain
      // insert descends the B-tree once where ON CONFLICT looks first (session 17).
      if (idParams)
        claimed = await tx.copy('ingest_event_ids', EVENT_ID_COLS, idParams).catch((e) => {
          throw isStoredId(e) ? new Error(DUPLICATE_EVENTS) : e
        })
      if (rows.events.props.length) await tx.copy('ingest_events', EVENT_COLS, eventParams(rows.events))
    } else {
      if (idParams)
        raw.push(
          insertMany(
            tx,
            'ingest_event_ids',
            EVENT_ID_COLS,
            idParams,
            'ON CONFLICT (stream, event_id) DO NOTHING',
            (n) => {
              claimed = n
            },
          ),
        )
      raw.push(insertMany(tx, 'ingest_events', EVENT_COLS, eventParams(rows.events)))
    }
    const hasPayments = rows.payments.length > 0
    const payments = insertMany(tx, 'ingest_payments', PAYMENT_COLS, rows.payments, PAYMENTS_TAIL)
    const stored: Stored = { payments, hasPayments }
    const invocations = insertMany(tx, 'ingest_invocations', INVOCATION_COLS, rows.invocations)
    // Each user's own rows (first sights, user-days), before the lock: commits write them side by side.
    const early = writers.map(([write, r]) => (write.early ? write.early(tx, r) : Promise.resolve(undefined)))
    await Promise.all([
      ...raw,
      invocations,
      ...early,
      // Sent before every other rollup statement on the transaction's connection, so they all run under it.
      pg && writers.length ? tx.run(`SELECT pg_advisory_xact_lock(${ROLLUP_LOCK})`) : undefined,
      payments,
      ...writers.map(([write, r], i) => write(tx, r, stored, early[i])),
      rows.nonces?.length
        ? insertMany(
            tx,
            'ingest_nonces',
            ['nonce', 'expires_at'],
            rows.nonces,
            'ON CONFLICT (expires_at, nonce) DO NOTHING',
          )
        : undefined,
    ])
    if (idParams && claimed * 2 < rows.eventIds!.length) throw new Error(DUPLICATE_EVENTS)
  })
  for (const [k, id] of fresh) known.set(k, id)
}

/** PostgreSQL's unique violation (SQLSTATE 23505) on `ingest_event_ids`: an id stored already. */
function isStoredId(e: unknown): boolean {
  const err = e as { code?: string; table_name?: string } | undefined
  return err?.code === '23505' && err.table_name === 'ingest_event_ids'
}
