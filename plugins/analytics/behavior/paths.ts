import { MINUTE } from '../lib/time'
import { type TimeScope, iso, round } from './behavior'
import type { RawReads } from './raw'
import { cmpText } from './timeline'

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
  // A path is a number in base (names + 1), its first step the leading digit, while that fits
  // a double exactly (it does for up to ~1,500 names at length 5): no string per path.
  const base = names.length + 1
  const numeric = base ** q.length < Number.MAX_SAFE_INTEGER
  const counts = new Map<number | string, number>()
  let total = 0
  const codes = lines.code
  const times = lines.ts
  /** The path of events `lo` up to `hi`. */
  const take = (lo: number, hi: number) => {
    let from = lo
    if (start !== -1) {
      while (from < hi && codes[from] !== start) from++
      if (from === hi) return
    }
    let key: number | string = numeric ? 0 : ''
    let steps = 0
    let prev = -1
    for (let i = from; i < hi && steps < q.length; i++) {
      const c = codes[i]
      if (c === prev) continue
      key = numeric ? (key as number) * base + c + 1 : `${key}${steps ? ',' : ''}${c}`
      prev = c
      steps++
    }
    counts.set(key, (counts.get(key) ?? 0) + 1)
    total++
  }
  const decode = (key: number | string): string[] => {
    if (typeof key === 'string') return key.split(',').map((i) => names[Number(i)])
    const out: string[] = []
    for (let k = key; k > 0; k = Math.floor(k / base)) out.push(names[(k % base) - 1])
    return out.reverse()
  }
  for (let u = 0; u < lines.users; u++) {
    const lo = lines.start[u]
    const hi = lines.start[u + 1]
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
  // Only paths counted at least as often as the top-th one can be in the answer (there may be
  // tens of thousands of distinct paths); ties go in the order of their names' text, so an
  // answer never depends on the order events came in.
  const cut = [...counts.values()].sort((a, b) => b - a)[q.top - 1] ?? 0
  const top = [...counts.entries()]
    .filter(([, count]) => count >= cut)
    .map(([k, count]) => {
      const path = decode(k)
      return { path, count, label: path.join('\u0001') }
    })
    .sort((a, b) => b.count - a.count || cmpText(a.label, b.label))
    .slice(0, q.top)
    .map(({ path, count }) => ({ path, count }))
  return {
    startDate: iso(q.from),
    endDate: iso(q.to),
    by: q.by,
    total,
    paths: top.map((p) => ({ ...p, share: total ? round(p.count / total) : 0 })),
  }
}
