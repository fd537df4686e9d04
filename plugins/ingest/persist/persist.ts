import type { Db, Param } from '../../../core/db'
import { PG_SEQ_SQL } from '../../../core/event-log-types'
import { EVENT_COLS, EVENT_WIRE_WIDTH } from '../store/event-cols'
import { insertMany } from '../store/sql'

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
/** Values of a client's payment row (`PAYMENT_COLS`); a server's adds its `source`. */
export const PAYMENT_WIDTH = PAYMENT_COLS.length
const SERVER_PAYMENT_COLS = [...PAYMENT_COLS, 'source']
/**
 * The server's payment that replaces a client's stored first (docs/security.md): only a client's
 * row is replaced, so a second server write, or a concurrent one, changes nothing (0 rows: the
 * commit rolls back as for a duplicate, and the writer sorts it out).
 */
const SUPERSEDE_SQL = `UPDATE ingest_payments SET amount_cents = ?, currency = ?, user_id = ?, ts = ?, received_at = ?,
  source = 'server' WHERE game_id = ? AND env = ? AND order_id = ? AND status = ? AND source = 'client'`
const SUPERSEDE_WIDTH = 9

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

/**
 * A commit's raw events, compact: what all of them share is said once. Their ids run from
 * `firstId` up by one, they were all received at `receivedAt`, and each names its game and
 * environment by an index into `streams`. Props are JSON text.
 */
export interface EventRows {
  firstId: number
  receivedAt: number
  /** game id, environment, game id, environment, ... */
  streams: string[]
  /** Per event: the stream's index, then event, ts, user_id, session_id, amount_cents, currency, duration_ms, network, level, payment_status. */
  cols: Param[]
  props: string[]
}

/** The raw event rows, in `EVENT_COLS` order, then `seq` when one is given. */
export function eventParams(e: EventRows, seq?: number): Param[] {
  const { firstId, cols, props, streams, receivedAt } = e
  const out: Param[] = new Array(props.length * (EVENT_COLS.length + (seq === undefined ? 0 : 1)))
  for (let i = 0, k = 0, o = 0; i < props.length; i++, k += EVENT_WIRE_WIDTH) {
    const st = (cols[k] as number) * 2
    out[o++] = firstId + i
    out[o++] = receivedAt
    out[o++] = streams[st]
    out[o++] = streams[st + 1]
    for (let c = 1; c < EVENT_WIRE_WIDTH; c++) out[o++] = cols[k + c]
    out[o++] = props[i]
    if (seq !== undefined) out[o++] = seq
  }
  return out
}

const EVENT_COLS_SEQ = [...EVENT_COLS, 'seq']

/**
 * The rows of one group commit, prepared by the writer: raw events compact (`EventRows`),
 * payments and invocations one row after another in their column order.
 */
export interface CommitRows {
  events: EventRows
  payments: Param[]
  /** The server route's new payments: `PAYMENT_COLS` and `source` (rare; absent when none). */
  serverPayments?: Param[]
  /** The server route's payments that replace a client's: `SUPERSEDE_SQL`'s parameters, row after row. */
  supersede?: Param[]
  invocations: Param[]
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

/**
 * The same for a payment whose order and status were stored already (a client's retry under a
 * new event_id): the writer takes those payment events out, so the log holds each once.
 */
export const DUPLICATE_PAYMENTS = 'ingest: payments stored already'

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

/** A repeated (order_id, status) is stored once; the rows that were new come back. */
const PAYMENTS_TAIL = 'ON CONFLICT (game_id, env, order_id, status) DO NOTHING RETURNING order_id'

/**
 * Writes one group commit in one transaction: the event ids (the dedup rule), the raw events,
 * payments, invocations and the requests' nonces. Nothing else: what is derived from events
 * follows the log (`ctx.events`). On PostgreSQL each row's `seq` is its transaction's id (the
 * column's default); elsewhere the commit takes the next number from `ingest_log_head`, whose
 * row lock (SQLite: the write lock) is held to the commit, so numbers follow commit order. The
 * commit's seq and number of events go to `ingest_log_commits` (the consumers' lag).
 */
export async function persist(db: Db, rows: CommitRows): Promise<number | undefined> {
  let known = knownStreams.get(db)
  if (!known) {
    known = new Map()
    knownStreams.set(db, known)
  }
  const fresh = new Map<string, number>()
  const seq = await db.tx(async (tx) => {
    // PostgreSQL: the log's lock before the first write (so before this transaction has an xid):
    // the consumers' horizon is the oldest xid among its holders (store/log.ts). It conflicts with
    // no other commit's. Sent without waiting for its answer: the statements after it on the
    // connection run after it, so the lock is held before the first write all the same, and the
    // commit saves a round trip. Should it fail, its error is the one the commit reports.
    const locked =
      tx.dialect === 'postgres' ? tx.run('LOCK TABLE ingest_events IN ROW EXCLUSIVE MODE') : undefined
    locked?.catch(() => undefined)
    try {
      return await writeRows(tx, rows, known, fresh)
    } finally {
      await locked
    }
  })
  for (const [k, id] of fresh) known.set(k, id)
  return seq
}

/**
 * The statements of `persist`'s transaction after the log's lock; answers the seq its events
 * took where the commit numbers them (not PostgreSQL, where it is the transaction's id).
 */
async function writeRows(
  tx: Db,
  rows: CommitRows,
  known: Map<string, number>,
  fresh: Map<string, number>,
): Promise<number | undefined> {
  let seq: number | undefined
  // First, so that every commit takes the event-id keys (in key order) before any other lock.
  let claimed = 0
  const idParams = rows.eventIds?.length
    ? eventIdParams(rows, await streamNumbers(tx, rows.events.streams, known, fresh))
    : undefined
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
    if (rows.events.props.length) {
      await tx.copy('ingest_events', EVENT_COLS, eventParams(rows.events))
      raw.push(counted(tx, undefined, rows.events.props.length))
    }
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
    if (rows.events.props.length) {
      await tx.run('UPDATE ingest_log_head SET seq = seq + 1 WHERE id = 1')
      const head = await tx.get<{ seq: number }>('SELECT seq FROM ingest_log_head WHERE id = 1')
      seq = Number(head?.seq)
      raw.push(insertMany(tx, 'ingest_events', EVENT_COLS_SEQ, eventParams(rows.events, seq)))
      raw.push(counted(tx, seq, rows.events.props.length))
    }
  }
  const payments = insertMany(tx, 'ingest_payments', PAYMENT_COLS, rows.payments, PAYMENTS_TAIL)
  const server = rows.serverPayments?.length
    ? insertMany(tx, 'ingest_payments', SERVER_PAYMENT_COLS, rows.serverPayments, PAYMENTS_TAIL)
    : undefined
  const replaced = rows.supersede?.length ? supersede(tx, rows.supersede) : undefined
  const [, , paid, , serverPaid, replacedAll] = await Promise.all([
    Promise.all(raw),
    insertMany(tx, 'ingest_invocations', INVOCATION_COLS, rows.invocations),
    payments,
    rows.nonces?.length
      ? insertMany(
          tx,
          'ingest_nonces',
          ['nonce', 'expires_at'],
          rows.nonces,
          'ON CONFLICT (expires_at, nonce) DO NOTHING',
        )
      : undefined,
    server,
    replaced,
  ])
  if (idParams && claimed * 2 < rows.eventIds!.length) throw new Error(DUPLICATE_EVENTS)
  if (paid.length * PAYMENT_COLS.length < rows.payments.length) throw new Error(DUPLICATE_PAYMENTS)
  if (serverPaid && serverPaid.length * SERVER_PAYMENT_COLS.length < rows.serverPayments!.length)
    throw new Error(DUPLICATE_PAYMENTS)
  if (replacedAll === false) throw new Error(DUPLICATE_PAYMENTS)
  return seq
}

/** Replaces the clients' rows (`SUPERSEDE_SQL`), one statement each; false when one was not a client's. */
async function supersede(tx: Db, params: Param[]): Promise<boolean> {
  let all = true
  for (let i = 0; i < params.length; i += SUPERSEDE_WIDTH)
    if ((await tx.run(SUPERSEDE_SQL, params.slice(i, i + SUPERSEDE_WIDTH))) !== 1) all = false
  return all
}

/**
 * The commit's row in `ingest_log_commits` (the consumers' lag counts by it): its seq (on
 * PostgreSQL the transaction's id, as its rows'), how many events it stored.
 */
const counted = (tx: Db, seq: number | undefined, events: number) =>
  seq === undefined
    ? tx.run(`INSERT INTO ingest_log_commits (seq, events) VALUES (${PG_SEQ_SQL}, ?)`, [events])
    : tx.run('INSERT INTO ingest_log_commits (seq, events) VALUES (?, ?)', [seq, events])

/** PostgreSQL's unique violation (SQLSTATE 23505) on `ingest_event_ids`: an id stored already. */
function isStoredId(e: unknown): boolean {
  const err = e as { code?: string; table_name?: string } | undefined
  return err?.code === '23505' && err.table_name === 'ingest_event_ids'
}
