/**
 * The rules the reference applies (spec 1, docs/analytics.md), shared by `oracle.ts`: what the
 * store holds after the month (the dedup rule and first sights), attribute lookup, funnels.
 * Nothing here imports from plugins/.
 */
import { type Simulation, addDays, localDate, localMidnight } from './simulate'

export type Compare = 'exact' | 'ratio' | 'milli' | 'avg' | 'hll' | 'hll-ratio'
export interface Expected {
  name: string
  value: number | null
  compare: Compare
}

export type Ev = Record<string, unknown> & { event: string; ts: string; event_id: string; uid?: string }

/** Top level first, then `attrs` (spec 1: business fields may sit at either). */
export function attr(e: Ev, k: string): unknown {
  if (e[k] !== undefined) return e[k]
  const a = e.attrs as Record<string, unknown> | undefined
  return a?.[k]
}

export const ACTIVE = new Set(['login', 'session_start'])
export const ONLINE = new Set(['heartbeat', 'session_start'])

/** What the store holds after the month: each item kept once by the one dedup rule, in arrival order. */
export interface Stored {
  events: (Ev & { batch: number; ms: number; day: string })[]
  /** The payments among them (each order and status once). */
  payments: (Ev & { batch: number; ms: number; day: string })[]
  /** user -> local day of their first stored sight. */
  firstDay: Map<string, string>
}

/**
 * The dedup rule (docs/analytics.md, "Deduplication"; issue 35 point 1: one rule every consumer
 * sees): an item is kept once per `event_id`; a payment also once per (`order_id`, `status`),
 * so a payment re-sent under a new event_id is neither a second payment nor a second event.
 * All sends happen within minutes here, inside the 7-day window.
 *
 * First sights (docs/analytics.md, "Retention cohorts"): a user's cohort is the local day of
 * their first *stored* sight; within one commit (one request here, the test sends one at a
 * time) the earliest `ts` wins; a later request with an earlier `ts` does not move it.
 */
export function store(sim: Simulation): Stored {
  const ids = new Set<string>()
  const orders = new Set<string>()
  const events: Stored['events'] = []
  const firstDay = new Map<string, string>()
  sim.batches.forEach((b, batch) => {
    const seenHere = new Map<string, number>()
    for (const raw of b.items) {
      const e = raw as Ev
      if (ids.has(e.event_id)) continue
      ids.add(e.event_id)
      if (b.route === 'payments') {
        const key = `${attr(e, 'order_id')}|${attr(e, 'status')}`
        if (orders.has(key)) continue
        orders.add(key)
      }
      const ms = Number(e.ts)
      events.push({ ...e, batch, ms, day: localDate(ms) })
      if (e.uid && !firstDay.has(e.uid)) seenHere.set(e.uid, Math.min(seenHere.get(e.uid) ?? ms, ms))
    }
    for (const [u, ms] of seenHere) firstDay.set(u, localDate(ms))
  })
  // The month is made so that no cohort depends on how requests group into commits (a user's
  // first event is never late, see simulate.ts): the first stored sight is the earliest ts.
  const earliest = new Map<string, number>()
  for (const e of events) if (e.uid) earliest.set(e.uid, Math.min(earliest.get(e.uid) ?? e.ms, e.ms))
  for (const [u, ms] of earliest)
    if (firstDay.get(u) !== localDate(ms)) throw new Error(`${u}'s cohort depends on how requests group`)
  return { events, payments: events.filter((e) => e.event === 'payment'), firstDay }
}

/**
 * Money: a payment's amount_cents as sent, whatever its currency. Spec 1 has no conversion (a
 * game has a defaultCurrency; amounts are "in the currency's main unit", docs/analytics.md), so
 * the month's EUR payments add to the USD ones unconverted; a conversion added later changes
 * the revenue numbers here on purpose.
 */
export const cents = (e: Ev) => Number(attr(e, 'amount_cents'))
export const money = (c: number) => Math.round(c) / 100
export const div = (a: number, b: number) => (b ? a / b : 0)

/** The minutes (epoch ms) `/realtime/series` and `/warehouse/online` answered for ("the last 60" depends on when they were read). */
export interface Minutes {
  series: number[]
  online: number[]
}

/** The performance range: from the first local midnight to the hour after the one of now. */
export function performanceRange(sim: Simulation): { from: number; to: number } {
  return { from: localMidnight(sim.days[0]), to: Math.ceil(sim.now / 3_600_000) * 3_600_000 + 3_600_000 }
}

export function sum(xs: number[]): number {
  let t = 0
  for (const x of xs) t += x
  return t
}

export function dayList(from: string, to: string): string[] {
  const out: string[] = []
  for (let d = from; d <= to; d = addDays(d, 1)) out.push(d)
  return out
}

/**
 * Users per funnel step (docs/analytics.md, "Funnel", as PostHog): per user, each occurrence of
 * the first step starts an attempt; the user counts at the furthest step any attempt reached;
 * every step within `windowMs` of the first step's time (inclusive) and inside the range.
 * `ordered`: steps in order, other events between allowed, the earliest match of each next step
 * taken. `strict`: in order with no other event of the user between two steps. Events without a
 * user are left out; a user's events in client-time order, equal times in arrival order.
 */
export function funnel(
  events: (Ev & { ms: number })[],
  steps: string[],
  windowMs: number,
  order: 'ordered' | 'strict',
  rangeEnd: number,
): number[] {
  const byUser = new Map<string, (Ev & { ms: number })[]>()
  for (const e of events) {
    if (!e.uid || e.ms >= rangeEnd) continue
    const xs = byUser.get(e.uid) ?? []
    xs.push(e)
    byUser.set(e.uid, xs)
  }
  const reached = steps.map(() => 0)
  for (const xs of byUser.values()) {
    xs.sort((a, b) => a.ms - b.ms) // stable: equal times keep arrival order
    let best = 0
    for (let i = 0; i < xs.length; i++) {
      if (xs[i].event !== steps[0]) continue
      let k = 1
      const t0 = xs[i].ms
      for (let j = i + 1; j < xs.length && k < steps.length; j++) {
        if (xs[j].ms - t0 > windowMs) break
        if (xs[j].event === steps[k]) k++
        else if (order === 'strict') break
      }
      best = Math.max(best, k)
    }
    for (let k = 0; k < best; k++) reached[k]++
  }
  return reached
}

/**
 * Top paths (docs/analytics.md, "Paths", by session): per user, events in client-time order
 * (equal times in arrival order), cut at each session_start and after 30 minutes without an
 * event; repeats in a row count as one step; a path keeps its first `length` steps. Returns
 * every path's count, ordered by count, then by the names' text; and how many paths there were.
 */
export function paths(
  events: (Ev & { ms: number })[],
  length: number,
  rangeEnd: number,
): { total: number; counts: [string[], number][] } {
  const byUser = new Map<string, (Ev & { ms: number })[]>()
  for (const e of events) {
    if (!e.uid || e.ms >= rangeEnd) continue
    const xs = byUser.get(e.uid) ?? []
    xs.push(e)
    byUser.set(e.uid, xs)
  }
  const counts = new Map<string, { path: string[]; n: number }>()
  let total = 0
  const end = (path: string[]) => {
    if (!path.length) return
    total++
    const key = path.join('\u0001')
    const x = counts.get(key) ?? { path, n: 0 }
    x.n++
    counts.set(key, x)
  }
  for (const xs of byUser.values()) {
    xs.sort((a, b) => a.ms - b.ms)
    let path: string[] = []
    let last = Number.NEGATIVE_INFINITY
    for (const e of xs) {
      if (e.event === 'session_start' || e.ms - last > 30 * 60_000) {
        end(path)
        path = []
      }
      last = e.ms
      if (path.length < length && path[path.length - 1] !== e.event) path.push(e.event)
    }
    end(path)
  }
  const list = [...counts.values()].sort(
    (a, b) => b.n - a.n || (a.path.join(',') < b.path.join(',') ? -1 : 1),
  )
  return { total, counts: list.map((x) => [x.path, x.n]) }
}
