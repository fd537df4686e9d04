import { turn } from '../../../core/turn'
import { MINUTE } from '../lib/time'
import { type TimeScope, iso, round } from './behavior'
import { PathTally } from './path-tally'
import type { RawReads } from './raw'
import { walkSlice } from './timeline'

/** A new path session after this long without an event (or at a `session_start`). */
export const SESSION_GAP = 30 * MINUTE

/**
 * Top paths: per user, events in time order are cut into sessions (a new one at each
 * `session_start` or after 30 minutes without an event; `by: 'user'`: one path per user),
 * repeats in a row collapse into one step, a path starts at its first `startEvent` (when
 * given; paths without it are left out) and keeps its first `length` steps.
 */
export async function paths(
  raw: RawReads,
  q: TimeScope & {
    top: number
    length: number
    by: 'session' | 'user'
    startEvent?: string
    exclude: string[]
  },
) {
  const names: string[] = []
  const index = new Map<string, number>()
  const skip = new Set(q.exclude)
  // Called once per name: names get their numbers in the order they are first met.
  const lines = await raw.timelines(q, undefined, (event) => {
    if (skip.has(event)) return undefined
    index.set(event, names.length)
    names.push(event)
    return names.length - 1
  })
  const start = q.startEvent === undefined ? -1 : (index.get(q.startEvent) ?? -2)
  const sessionStart = index.get('session_start') ?? -2
  const tally = new PathTally(q.length)
  let total = 0
  const codes = lines.code
  const times = lines.ts
  /** Counts the path of events `lo` up to `hi`. */
  const take = (lo: number, hi: number) => {
    let from = lo
    if (start !== -1) {
      while (from < hi && codes[from] !== start) from++
      if (from === hi) return
    }
    tally.count(codes, from, hi)
    total++
  }
  let pause = walkSlice.rows
  for (let u = 0; u < lines.users; u++) {
    const lo = lines.start[u]
    const hi = lines.start[u + 1]
    // A turn of the event loop every slice of rows: a day's walk is a million rows and more.
    if (hi >= pause) {
      await turn()
      pause = hi + walkSlice.rows
    }
    if (q.by === 'user') {
      take(lo, hi)
      continue
    }
    let begin = lo
    for (let i = lo + 1; i <= hi; i++)
      if (i === hi || codes[i] === sessionStart || times[i] - times[i - 1] > SESSION_GAP) {
        take(begin, i)
        begin = i
      }
  }
  const top = await tally.top(q.top, names)
  return {
    startDate: iso(q.from),
    endDate: iso(q.to),
    by: q.by,
    total,
    paths: top.map((p) => ({ ...p, share: total ? round(p.count / total) : 0 })),
  }
}
