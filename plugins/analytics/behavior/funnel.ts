import { turn } from '../../../core/turn'
import { type TimeScope, iso, round } from './behavior'
import type { RawReads } from './raw'
import { walkSlice } from './timeline'

export interface FunnelStep {
  event: string
  properties?: Record<string, string | number | boolean>
}
export type FunnelOrder = 'ordered' | 'strict' | 'any'

/** Whether an event's attributes equal a step's filter, `[name, value as text]` pairs ("3" matches 3). */
function matches(props: Record<string, unknown>, filter: ReadonlyArray<readonly [string, string]>) {
  const attrs = props.attrs && typeof props.attrs === 'object' ? (props.attrs as Record<string, unknown>) : {}
  for (const [k, want] of filter) {
    const v = props[k] !== undefined ? props[k] : attrs[k]
    if (v === undefined || v === null || typeof v === 'object' || String(v) !== want) return false
  }
  return true
}

const median = (xs: number[]): number | null => {
  if (!xs.length) return null
  const s = [...xs].sort((a, b) => a - b)
  const m = s.length >> 1
  return s.length % 2 ? s[m] : Math.round((s[m - 1] + s[m]) / 2)
}

/**
 * A funnel over the range. Per user, each occurrence of the first step (any step for `any`)
 * starts an attempt; the user counts at the furthest step any attempt reached, and times
 * come from the earliest attempt that reached it. Every step of an attempt happens within
 * `window` ms of its first (inclusive). `ordered`: steps in order, other events between
 * allowed; `strict`: steps in order with no other event of the user between them; `any`:
 * the steps in any order (step k counts users who did any k distinct steps).
 */
export async function funnel(
  raw: RawReads,
  q: TimeScope & { steps: FunnelStep[]; window: number; order: FunnelOrder },
) {
  const S = q.steps.length
  const stepEvents = [...new Set(q.steps.map((s) => s.event))]
  // Each step's filter as pairs once, not once per event read.
  const filters = q.steps.map((s) =>
    Object.entries(s.properties ?? {}).map(([k, v]) => [k, String(v)] as const),
  )
  const filtered = filters.some((f) => f.length)
  const mask = (event: string, props: Record<string, unknown> | undefined) => {
    let m = 0
    for (let k = 0; k < S; k++) {
      if (q.steps[k].event === event && (!props || matches(props, filters[k]))) m |= 1 << k
    }
    // Strict funnels keep every event: one matching no step breaks a sequence.
    return m || q.order === 'strict' ? m : undefined
  }
  const events = q.order === 'strict' ? undefined : stepEvents
  const lines = filtered
    ? await raw.timelinesWithProps(q, events, (e) => mask(e.event, e.props))
    : await raw.timelines(q, events, (event) => mask(event, undefined))
  const reached = new Array<number>(S).fill(0)
  const fromPrev: number[][] = Array.from({ length: S }, () => [])
  const fromFirst: number[][] = Array.from({ length: S }, () => [])
  // Only an event of the first step (any step, for any order) starts an attempt.
  const starts = q.order === 'any' ? ~0 : 1
  const next = new NextStep(S)
  let pause = walkSlice.rows
  for (let u = 0; u < lines.users; u++) {
    const lo = lines.start[u]
    const hi = lines.start[u + 1]
    // A turn of the event loop every slice of rows, as the walk's grouping takes (`walkSlice`).
    if (hi >= pause) {
      await turn()
      pause = hi + walkSlice.rows
    }
    next.index(lines.code, lo, hi)
    let best: number[] = []
    for (let i = lo; i < hi && best.length < S; i++) {
      if (!(lines.code[i] & starts)) continue
      const times = attempt(lines.ts, lines.code, next, i, hi, S, q.window, q.order)
      if (times.length > best.length) best = times
    }
    for (let k = 0; k < best.length; k++) {
      reached[k]++
      if (k > 0) {
        fromPrev[k].push(best[k] - best[k - 1])
        fromFirst[k].push(best[k] - best[0])
      }
    }
  }
  const first = reached[0]
  return {
    startDate: iso(q.from),
    endDate: iso(q.to),
    order: q.order,
    windowMs: q.window,
    users: first,
    converted: reached[S - 1],
    conversionRate: first ? round(reached[S - 1] / first) : 0,
    medianTimeToConvertMs: median(fromFirst[S - 1]),
    steps: q.steps.map((s, k) => ({
      step: k + 1,
      event: s.event,
      ...(s.properties ? { properties: s.properties } : {}),
      users: reached[k],
      conversionFromFirst: first ? round(reached[k] / first) : 0,
      conversionFromPrevious:
        k === 0 ? (first ? 1 : 0) : reached[k - 1] ? round(reached[k] / reached[k - 1]) : 0,
      dropOff: k === 0 ? 0 : reached[k - 1] - reached[k],
      medianTimeFromPreviousMs: k === 0 ? null : median(fromPrev[k]),
      medianTimeFromFirstMs: k === 0 ? null : median(fromFirst[k]),
    })),
  }
}

/**
 * Where each step next occurs in one user's line: `at(k, j)` is the first index at or after `j`
 * whose code has step k's bit, or the line's end. Built once per user (S passes backwards), so an
 * attempt finds each of its steps at once instead of reading every event of its window: a user
 * with 80,000 events of the first step and none of the second made the funnel quadratic (4 s of
 * the event loop for one viewer's question over events any SDK key can send).
 */
export class NextStep {
  private buf = new Int32Array(0)
  private lo = 0
  private width = 0

  constructor(private readonly S: number) {}

  index(code: Int32Array, lo: number, hi: number): void {
    const width = hi - lo + 1
    if (this.buf.length < this.S * width)
      this.buf = new Int32Array(Math.max(this.S * width, this.buf.length * 2))
    this.lo = lo
    this.width = width
    for (let k = 0; k < this.S; k++) {
      const row = k * width
      let at = hi
      this.buf[row + width - 1] = hi
      for (let j = hi - 1; j >= lo; j--) {
        if (code[j] & (1 << k)) at = j
        this.buf[row + j - lo] = at
      }
    }
  }

  at(k: number, j: number): number {
    return this.buf[k * this.width + j - this.lo]
  }
}

/**
 * One funnel attempt starting at event `i`: the times of the steps it reached (empty when `i`
 * cannot start one). Codes are step bit masks (0: an event matching no step, strict funnels only).
 * Times are sorted within a user's line, so the first event past the window ends the attempt.
 */
export function attempt(
  ts: Float64Array,
  code: Int32Array,
  next: NextStep,
  i: number,
  end: number,
  S: number,
  window: number,
  order: FunnelOrder,
): number[] {
  const t0 = ts[i]
  if (order === 'any') {
    if (!code[i]) return []
    let done = 0
    const times: number[] = []
    for (let p = i; times.length < S; ) {
      // The next event matching a step not done yet; it counts for one step, the first it matches.
      let j = end
      for (let k = 0; k < S; k++) if (!(done & (1 << k))) j = Math.min(j, next.at(k, p))
      if (j >= end || ts[j] - t0 > window) break
      const open = code[j] & ~done
      done |= open & -open
      times.push(ts[j])
      p = j + 1
    }
    return times
  }
  if (!(code[i] & 1)) return []
  const times = [t0]
  if (order === 'strict') {
    // Each next event must be the next step: at most S events read.
    for (let j = i + 1; j < end && times.length < S && ts[j] - t0 <= window; j++) {
      if (code[j] & (1 << times.length)) times.push(ts[j])
      else break
    }
    return times
  }
  for (let p = i + 1; times.length < S; ) {
    const j = next.at(times.length, p)
    if (j >= end || ts[j] - t0 > window) break
    times.push(ts[j])
    p = j + 1
  }
  return times
}
