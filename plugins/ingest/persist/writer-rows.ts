import type { Param } from '../../../core/db'
import { inOrder, invocationOf, superseding } from '../rows'
import type { NormEvent } from '../signed/validate'
import { EVENT_WIRE_WIDTH } from '../store/event-cols'
import { type CommitRows, type EventRows, PAYMENT_WIDTH } from './persist'

/**
 * The rows of one commit of the group writer (`writer.ts`): raw events, payments, invocations
 * and event ids numbered and ordered, and the rules that keep a payment or an event id once.
 */

/**
 * Top-level fields whose columns hold them exactly (event, ts, game_id, env) are left out of
 * `props` (a smaller row is a smaller WAL); everything else, including what was promoted from
 * `attrs`, stays.
 */
function propsJson(raw: Record<string, unknown>): string {
  const out: Record<string, unknown> = {}
  for (const k in raw) if (k !== 'event' && k !== 'ts' && k !== 'game_id' && k !== 'env') out[k] = raw[k]
  return JSON.stringify(out)
}

/**
 * One pass over the events: raw event, payment and invocation rows. `ids.last` is the last raw
 * row id handed out; the commit's rows are numbered past it, and it moves to the commit's last.
 */
export function gatherRows(events: NormEvent[], now: number, ids: { last: number }) {
  // Time-ordered integer ids: receive time in ms x 1024 plus a counter (exact in a double until
  // the year 2248). Starts past the largest stored id, so a restart with a clock step back
  // never collides. The loop below never suspends, so it numbers its rows alone. An
  // invocation row has the id of the event it came from.
  const firstId = Math.max(ids.last, now * 1024 - 1) + 1
  const cols: Param[] = new Array(events.length * EVENT_WIRE_WIDTH)
  const props: string[] = new Array(events.length)
  const streams: string[] = []
  const ev: EventRows = { firstId, receivedAt: now, streams, cols, props }
  const invocations: Param[] = []
  /** Indexes of the events that carry an id. */
  const withId: number[] = []
  /** stream index -> order -> status -> row: a payment repeated within the commit is sent once. */
  const paid = new Map<number, Map<string, Map<string, Param[]>>>()
  const index = new Map<string, number>()
  /** The server's payments that replace a client's (`UPDATE` parameters, see persist.ts). */
  const supersede: Param[] = []
  let stream = -1
  let lastGame = ''
  let lastEnv = ''

  for (let i = 0; i < events.length; i++) {
    const e = events[i]
    const { gameId, env, userId, ts } = e
    // Consecutive events of one game and environment share the stream.
    if (stream < 0 || gameId !== lastGame || env !== lastEnv) {
      const k = `${gameId}\u0001${env}`
      const known = index.get(k)
      if (known === undefined) {
        stream = streams.length / 2
        index.set(k, stream)
        streams.push(gameId, env)
      } else stream = known
      lastGame = gameId
      lastEnv = env
    }
    let k = i * EVENT_WIRE_WIDTH
    cols[k++] = stream
    cols[k++] = e.event
    cols[k++] = ts
    cols[k++] = userId
    cols[k++] = e.sessionId
    cols[k++] = e.amountCents
    cols[k++] = e.currency
    cols[k++] = e.durationMs
    cols[k++] = e.network
    cols[k++] = e.level
    cols[k] = e.payment ? (e.payment.supersedes ? superseding(e.payment.status) : e.payment.status) : null
    props[i] = propsJson(e.props)
    if (e.eventId !== null) withId.push(i)
    // One test for an event without a payment, as before superseding rows existed.
    if (e.payment) {
      const { orderId, status, supersedes } = e.payment
      if (supersedes)
        supersede.push(e.payment.amountCents, e.currency, userId, ts, now, gameId, env, orderId, status)
      else {
        let orders = paid.get(stream)
        if (!orders) {
          orders = new Map()
          paid.set(stream, orders)
        }
        let byStatus = orders.get(orderId)
        if (!byStatus) {
          byStatus = new Map()
          orders.set(orderId, byStatus)
        }
        if (!byStatus.has(status)) {
          const row: Param[] = [
            gameId,
            env,
            orderId,
            status,
            e.payment.amountCents,
            e.currency,
            userId,
            ts,
            now,
          ]
          // The server route's rows say so (`ingest_payments.source`); a client's take the default.
          if (e.server) row.push('server')
          byStatus.set(status, row)
        }
      }
    }
    if (e.event === 'function.invoke') {
      const f = invocationOf(e)
      invocations.push(
        firstId + i,
        gameId,
        env,
        ts,
        now,
        f.functionId,
        f.actor,
        f.outcome,
        e.durationMs,
        f.traceId,
      )
    }
  }
  ids.last = firstId + events.length - 1
  // Payments in key order: game, environment, order, status.
  const payments: Param[] = []
  const serverPayments: Param[] = []
  const order = [...index.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
  for (const [, st] of order) {
    const orders = paid.get(st)
    if (!orders) continue
    for (const o of inOrder(orders)) {
      const byStatus = orders.get(o)!
      for (const status of inOrder(byStatus)) {
        const row = byStatus.get(status)!
        if (row.length > PAYMENT_WIDTH) serverPayments.push(...row)
        else payments.push(...row)
      }
    }
  }
  return {
    ev,
    payments,
    serverPayments: serverPayments.length ? serverPayments : undefined,
    supersede: supersede.length ? supersede : undefined,
    invocations,
    eventIds: eventIdsInKeyOrder(events, withId),
  }
}

/** A commit of nonces alone. */
export function nonceRows(nonces: Param[]): CommitRows {
  return {
    events: { firstId: 0, receivedAt: Date.now(), streams: [], cols: [], props: [] },
    payments: [],
    invocations: [],
    nonces,
  }
}

export const paymentKey = (e: NormEvent) =>
  `${e.gameId}\u0001${e.env}\u0001${e.payment!.orderId}\u0001${e.payment!.status}`

/**
 * The events with each payment (game, environment, order, status) once, the first kept (the
 * server route's before any client's): the log holds a re-sent payment once, whatever its event_id.
 */
export function firstOfEachPayment(events: NormEvent[]): NormEvent[] {
  let seen: Set<string> | undefined
  let dropped = false
  for (const e of events) {
    if (!e.payment) continue
    seen ??= new Set()
    const k = paymentKey(e)
    if (seen.has(k)) {
      dropped = true
      break
    }
    seen.add(k)
  }
  if (!dropped) return events
  // The first of each, but the server's where one is among them: a client's write before it in
  // the same commit is then not stored at all, as if the server's had superseded it.
  const chosen = new Map<string, NormEvent>()
  for (const e of events) {
    if (!e.payment) continue
    const k = paymentKey(e)
    const c = chosen.get(k)
    if (!c || (e.server && !c.server)) chosen.set(k, e)
  }
  return events.filter((e) => !e.payment || chosen.get(paymentKey(e)) === e)
}

/** Thrown by `gatherRows` when an (game, environment, event_id) repeats within the commit. */
export const REPEATED_IDS = new Error('ingest: an event id repeats within the commit')

/**
 * The events with each (game, environment, event_id) once, the first of each kept: for the rare
 * commit that holds a retry of one of its own events (`REPEATED_IDS`).
 */
export function firstOfEachId(events: NormEvent[]): NormEvent[] {
  const seen = new Set<string>()
  return events.filter((e) => {
    if (e.eventId === null) return true
    const k = `${e.gameId}\u0001${e.env}\u0001${e.eventId}`
    if (seen.has(k)) return false
    seen.add(k)
    return true
  })
}

/**
 * `index, event_id` pairs in key order (game, environment, event_id): concurrent commits on
 * PostgreSQL then claim shared keys in one order and cannot deadlock. A key that repeats is
 * then next to itself: `REPEATED_IDS` is thrown (checking there costs nothing more than the sort).
 */
function eventIdsInKeyOrder(events: NormEvent[], withId: number[]): Param[] {
  if (!withId.length) return []
  const key = (i: number) => events[i]
  withId.sort((a, b) => {
    const x = key(a)
    const y = key(b)
    return x.gameId !== y.gameId
      ? x.gameId < y.gameId
        ? -1
        : 1
      : x.env !== y.env
        ? x.env < y.env
          ? -1
          : 1
        : x.eventId! < y.eventId!
          ? -1
          : x.eventId! > y.eventId!
            ? 1
            : 0
  })
  const out: Param[] = new Array(withId.length * 2)
  for (let k = 0; k < withId.length; k++) {
    const e = events[withId[k]]
    if (k > 0) {
      const p = events[withId[k - 1]]
      if (p.eventId === e.eventId && p.gameId === e.gameId && p.env === e.env) throw REPEATED_IDS
    }
    out[2 * k] = withId[k]
    out[2 * k + 1] = e.eventId
  }
  return out
}
