import type { Db, Param } from '../../../core/db'
import { inPartOrder } from '../../../core/ordered'
import type {
  IngestService,
  ScannedEvent,
  TimelinePage,
  TimelineQuery,
  TimelineText,
} from '../../ingest/types'
import { HyperLogLog } from '../lib/hll'
import { DAY, HOUR, MINUTE, floorTo } from '../lib/time'
import { type Dimension, sep } from './behavior-rollup'

const n = (v: unknown) => Number(v ?? 0)
export const date = (day: number) => new Date(day).toISOString().slice(0, 10)
export const iso = (ms: number) => new Date(ms).toISOString()
export const round = (x: number, digits = 4) => Math.round(x * 10 ** digits) / 10 ** digits
const money = (cents: number) => Math.round(cents) / 100
const cmpText = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0)

/** One game and environment, local days `from`..`to` (UTC midnights of the game's dates). */
export interface DayScope {
  gameId: string
  env: string
  from: number
  to: number
}
/** One game and environment, client time `[from, to)` in epoch ms. */
export interface TimeScope {
  gameId: string
  env: string
  from: number
  to: number
}

export interface FunnelStep {
  event: string
  properties?: Record<string, string | number | boolean>
}
export type FunnelOrder = 'ordered' | 'strict' | 'any'

/** Per user, events in time order: user u's are `start[u]` up to `start[u + 1]` of `ts` and `code`. */
export interface Timelines {
  users: number
  start: Int32Array
  ts: Float64Array
  code: Int32Array
}

/** A page of the raw scan: at most this many rows per query. */
const PAGE = 10_000
/** A new path session after this long without an event (or at a `session_start`). */
export const SESSION_GAP = 30 * MINUTE

/** Whether an event's attribute equals a filter value (compared as text: "3" matches 3). */
function matches(props: Record<string, unknown>, filter: Record<string, string | number | boolean>) {
  const attrs = props.attrs && typeof props.attrs === 'object' ? (props.attrs as Record<string, unknown>) : {}
  for (const [k, want] of Object.entries(filter)) {
    const v = props[k] !== undefined ? props[k] : attrs[k]
    if (v === undefined || v === null || typeof v === 'object' || String(v) !== String(want)) return false
  }
  return true
}

const median = (xs: number[]): number | null => {
  if (!xs.length) return null
  const s = [...xs].sort((a, b) => a - b)
  const m = s.length >> 1
  return s.length % 2 ? s[m] : Math.round((s[m - 1] + s[m]) / 2)
}

/** Merged HyperLogLog count of sketch rows. */
function distinct(rows: Array<{ sketch: string }>): number {
  if (!rows.length) return 0
  const h = HyperLogLog.parse(rows[0].sketch)
  for (let i = 1; i < rows.length; i++) h.merge(HyperLogLog.parse(rows[i].sketch))
  return h.count()
}

/**
 * Gathers a raw read's rows (user, time, code) in flat arrays that grow by doubling, then groups
 * them per user (user u's events end up at `start[u]` up to `start[u + 1]`) and sorts each
 * user's by time: no object per row.
 *
 * Grouping sorts the rows by a hash of the user id (a stable radix sort on 32 bits) instead of
 * looking each id up in a `Map`: a busy day holds a hundred thousand users and more, and a lookup
 * per row in a table that large is a cache miss or two per row, which measured as long as reading
 * the rows themselves (`scripts/bench/analytics-behavior.ts`). A run of equal hashes is checked
 * id by id, and split by id when two users share a hash, so the grouping is exact.
 */
export class TimelineBuilder {
  private users: string[] = []
  private hash = new Int32Array(4096)
  private when = new Float64Array(4096)
  private what = new Int32Array(4096)
  private size = 0

  add(user: string, ts: number, code: number): void {
    if (this.size === this.hash.length) {
      const grow = <A extends Int32Array | Float64Array>(a: A): A => {
        const b = new (a.constructor as new (n: number) => A)(a.length * 2)
        b.set(a)
        return b
      }
      this.hash = grow(this.hash)
      this.when = grow(this.when)
      this.what = grow(this.what)
    }
    // FNV-1a over the id's UTF-16 units.
    let h = 0x811c9dc5
    for (let i = 0; i < user.length; i++) h = Math.imul(h ^ user.charCodeAt(i), 0x01000193)
    this.users.push(user)
    this.hash[this.size] = h
    this.when[this.size] = ts
    this.what[this.size++] = code
  }

  /** Row indices in order of their user's hash, ties in row order (see `byHash`). */
  private byHash(): Int32Array {
    return byHash(this.hash, this.size)
  }

  done(): Timelines {
    const N = this.size
    const { users, hash, when, what } = this
    const order = this.byHash()
    const starts: number[] = []
    const ts = new Float64Array(N)
    const cd = new Int32Array(N)
    let p = 0
    /** One user's rows (indices in row order, so equal times stay in id order): times and codes, sorted by time. */
    const emit = (rows: ArrayLike<number>, lo: number, hi: number) => {
      starts.push(p)
      const first = p
      for (let i = lo; i < hi; i++) {
        ts[p] = when[rows[i]]
        cd[p++] = what[rows[i]]
      }
      let sorted = true
      for (let i = first + 1; i < p && sorted; i++) if (ts[i] < ts[i - 1]) sorted = false
      if (sorted) return
      const idx = Array.from({ length: p - first }, (_, i) => first + i).sort(
        (x, y) => ts[x] - ts[y] || x - y,
      )
      const t2 = idx.map((i) => ts[i])
      const c2 = idx.map((i) => cd[i])
      ts.set(t2, first)
      cd.set(c2, first)
    }
    for (let lo = 0; lo < N; ) {
      const h = hash[order[lo]]
      const id = users[order[lo]]
      let hi = lo + 1
      let same = true
      for (; hi < N && hash[order[hi]] === h; hi++) if (same && users[order[hi]] !== id) same = false
      if (same) emit(order, lo, hi)
      else {
        // Two users share a hash (rare): split the run by id, each user's rows kept in row order.
        const run = Array.from(order.subarray(lo, hi)).sort((x, y) => cmpText(users[x], users[y]) || x - y)
        for (let a = 0; a < run.length; ) {
          let b = a + 1
          while (b < run.length && users[run[b]] === users[run[a]]) b++
          emit(run, a, b)
          a = b
        }
      }
      lo = hi
    }
    starts.push(p)
    return { users: starts.length - 1, start: Int32Array.from(starts), ts, code: cd }
  }
}

/** Grows a typed array to twice its length, its content kept. */
function grow<A extends Int32Array | Float64Array>(a: A): A {
  const b = new (a.constructor as new (n: number) => A)(a.length * 2)
  b.set(a)
  return b
}

/**
 * As `TimelineBuilder`, for pages as the store's joined text (`TimelineText`, UTF-8 bytes): each page is parsed in place, one pass over its bytes, without a string per user or
 * name. A row keeps its user as a span of its page's bytes (page, first and end), the span's
 * FNV-1a hash and, for its name, the code `code` gave that name (asked once per name; names are
 * recognised by hash and then byte by byte). Grouping sorts rows by the hash as `TimelineBuilder`
 * does and compares the spans of each run of equal hashes byte by byte, so users are exact.
 * Pages as columns (a page holding U+0001) are taken too.
 */
export class TextTimelineBuilder {
  /** The bytes users are spans of: one per joined page, one per user of a page as columns. */
  private texts: Uint8Array[] = []
  private text = new Int32Array(4096)
  private first = new Int32Array(4096)
  private end = new Int32Array(4096)
  private hash = new Int32Array(4096)
  private when = new Float64Array(4096)
  private what = new Int32Array(4096)
  private size = 0
  /** Names met so far (UTF-8), their hashes and codes; `slots` an open-addressing table of (index + 1) by hash. */
  private names: Uint8Array[] = []
  private nameHash: number[] = []
  private codes: number[] = []
  private slots = new Int32Array(64)
  private readonly utf8 = new TextEncoder()
  private readonly decoder = new TextDecoder()

  constructor(private readonly code: (event: string) => number | undefined) {}

  private push(text: number, first: number, end: number, hash: number, ts: number, code: number): void {
    if (this.size === this.hash.length) {
      this.text = grow(this.text)
      this.first = grow(this.first)
      this.end = grow(this.end)
      this.hash = grow(this.hash)
      this.when = grow(this.when)
      this.what = grow(this.what)
    }
    const i = this.size++
    this.text[i] = text
    this.first[i] = first
    this.end[i] = end
    this.hash[i] = hash
    this.when[i] = ts
    this.what[i] = code
  }

  /** The code of the name `s[from, to)` whose hash is `h` (`code` asked the first time the name is met). */
  private codeOf(s: Uint8Array, from: number, to: number, h: number): number {
    const mask = this.slots.length - 1
    for (let k = h & mask; ; k = (k + 1) & mask) {
      const at = this.slots[k] - 1
      if (at < 0) break
      if (this.nameHash[at] !== h) continue
      const name = this.names[at]
      if (name.length !== to - from) continue
      let i = 0
      while (i < name.length && name[i] === s[from + i]) i++
      if (i === name.length) return this.codes[at]
    }
    const name = s.slice(from, to)
    const c = this.code(this.decoder.decode(name)) ?? -1
    this.names.push(name)
    this.nameHash.push(h)
    this.codes.push(c)
    if (this.names.length * 2 > this.slots.length) {
      this.slots = new Int32Array(this.slots.length * 2)
      for (let j = 0; j < this.names.length; j++) this.place(j)
    } else this.place(this.names.length - 1)
    return c
  }

  private place(at: number): void {
    const mask = this.slots.length - 1
    let k = this.nameHash[at] & mask
    while (this.slots[k]) k = (k + 1) & mask
    this.slots[k] = at + 1
  }

  /** A page of the walk, in id order. */
  add(page: TimelineText | TimelinePage): void {
    if (!('rows' in page)) {
      for (let r = 0; r < page.ts.length; r++) {
        const e = this.utf8.encode(page.event[r])
        const c = this.codeOf(e, 0, e.length, fnv(e, 0, e.length))
        if (c < 0) continue
        const u = this.utf8.encode(page.userId[r])
        this.texts.push(u)
        this.push(this.texts.length - 1, 0, u.length, fnv(u, 0, u.length), page.ts[r], c)
      }
      return
    }
    const { users, events, ts, since } = page
    const text = this.texts.length
    this.texts.push(users)
    const nu = users.length
    const ne = events.length
    const nt = ts.length
    let pu = 0
    let pe = 0
    let pt = 0
    for (let r = 0; r < page.rows; r++) {
      const u0 = pu
      let hu = 0x811c9dc5
      for (; pu < nu && users[pu] !== 1; pu++) hu = Math.imul(hu ^ users[pu], 0x01000193)
      const u1 = pu++
      const e0 = pe
      let he = 0x811c9dc5
      for (; pe < ne && events[pe] !== 1; pe++) he = Math.imul(he ^ events[pe], 0x01000193)
      const e1 = pe++
      // A decimal integer (bigint's text: digits, a leading minus sign).
      const negative = ts[pt] === 45
      if (negative) pt++
      let t = 0
      for (; pt < nt && ts[pt] !== 44; pt++) t = t * 10 + ts[pt] - 48
      pt++
      const c = this.codeOf(events, e0, e1, he)
      if (c >= 0) this.push(text, u0, u1, hu, since + (negative ? -t : t), c)
    }
  }

  done(): Timelines {
    const N = this.size
    const { texts } = this
    const order = byHash(this.hash, N)
    // The rows gathered in hash order, so what follows reads them in sequence.
    const hash = new Int32Array(N)
    const text = new Int32Array(N)
    const first = new Int32Array(N)
    const end = new Int32Array(N)
    const ts = new Float64Array(N)
    const cd = new Int32Array(N)
    for (let i = 0; i < N; i++) {
      const r = order[i]
      hash[i] = this.hash[r]
      text[i] = this.text[r]
      first[i] = this.first[r]
      end[i] = this.end[r]
      ts[i] = this.when[r]
      cd[i] = this.what[r]
    }
    /** Whether rows `a` and `b` (in hash order) have the same user. */
    const same = (a: number, b: number) => {
      const n = end[a] - first[a]
      if (end[b] - first[b] !== n) return false
      const x = texts[text[a]]
      const y = texts[text[b]]
      const i = first[a]
      const j = first[b]
      for (let k = 0; k < n; k++) if (x[i + k] !== y[j + k]) return false
      return true
    }
    const starts = new Int32Array(N + 1)
    let users = 0
    /** A user's rows `lo` up to `hi` (in row order, so equal times stay in id order), sorted by time if they are not. */
    const emit = (lo: number, hi: number) => {
      starts[users++] = lo
      let i = lo + 1
      while (i < hi && ts[i] >= ts[i - 1]) i++
      if (i >= hi) return
      const idx = Array.from({ length: hi - lo }, (_, j) => lo + j).sort((x, y) => ts[x] - ts[y] || x - y)
      const t2 = idx.map((j) => ts[j])
      const c2 = idx.map((j) => cd[j])
      ts.set(t2, lo)
      cd.set(c2, lo)
    }
    for (let lo = 0; lo < N; ) {
      const h = hash[lo]
      let hi = lo + 1
      let one = true
      for (; hi < N && hash[hi] === h; hi++) if (one && !same(lo, hi)) one = false
      if (one) emit(lo, hi)
      else {
        // Two users share a hash (rare): the run's rows ordered by user, each user's in row order.
        const user = (i: number) => this.decoder.decode(texts[text[i]].subarray(first[i], end[i]))
        const run = Array.from({ length: hi - lo }, (_, j) => lo + j).sort(
          (x, y) => cmpText(user(x), user(y)) || x - y,
        )
        for (const a of [text, first, end, cd])
          a.set(
            run.map((j) => a[j]),
            lo,
          )
        ts.set(
          run.map((j) => ts[j]),
          lo,
        )
        for (let a = lo; a < hi; ) {
          let b = a + 1
          while (b < hi && same(a, b)) b++
          emit(a, b)
          a = b
        }
      }
      lo = hi
    }
    starts[users] = N
    return { users, start: starts.subarray(0, users + 1), ts, code: cd }
  }
}

/** FNV-1a of the bytes `s[from, to)`. */
function fnv(s: Uint8Array, from: number, to: number): number {
  let h = 0x811c9dc5
  for (let i = from; i < to; i++) h = Math.imul(h ^ s[i], 0x01000193)
  return h
}

/** Row indices `0..N-1` in order of `hash` (low 16 bits, then high: two stable counting passes), ties in row order. */
function byHash(h: Int32Array, N: number): Int32Array {
  let from = new Int32Array(N)
  for (let i = 0; i < N; i++) from[i] = i
  let to = new Int32Array(N)
  const count = new Int32Array(65537)
  for (const shift of [0, 16]) {
    count.fill(0)
    for (let i = 0; i < N; i++) count[((h[i] >>> shift) & 0xffff) + 1]++
    for (let b = 0; b < 65536; b++) count[b + 1] += count[b]
    for (let i = 0; i < N; i++) {
      const r = from[i]
      to[count[(h[r] >>> shift) & 0xffff]++] = r
    }
    ;[from, to] = [to, from]
  }
  return from
}

/**
 * The id ranges holding the stored events of client time `[from, to)` (`analytics_event_span`,
 * per client hour and receive window), merged where they overlap or touch, in id order.
 */
export async function eventIdRanges(db: Db, q: TimeScope): Promise<Array<[number, number]>> {
  const rows = await db.all<{ first_id: number; last_id: number }>(
    `SELECT first_id, last_id FROM analytics_event_span WHERE game_id = ? AND env = ? AND hour >= ? AND hour < ?
     ORDER BY first_id`,
    [q.gameId, q.env, floorTo(q.from, HOUR), q.to],
  )
  const out: Array<[number, number]> = []
  for (const r of rows) {
    const lo = n(r.first_id)
    const hi = n(r.last_id)
    const last = out[out.length - 1]
    if (last && lo <= last[1] + 1) last[1] = Math.max(last[1], hi)
    else out.push([lo, hi])
  }
  return out
}

/**
 * Behavior analytics (spec 1 "other endpoints", issue 17): event aggregates, feature adoption and
 * product trend from the behavior rollup's day counters and sketches; funnels, paths and event
 * details from raw events, walking only the id ranges where the range's events were stored
 * (`analytics_event_span`); transactions from the rollup's payment rows, by client time.
 */
export function behaviorAnalytics(db: Db, ingest: Pick<IngestService, 'scan' | 'timeline' | 'timelineText'>) {
  const counters = (q: DayScope, kinds: string[], names?: string[]) =>
    db.all<{
      day: number
      kind: string
      name: string
      n: number
      total: number
      first_ts: number
      last_ts: number
    }>(
      `SELECT day, kind, name, n, total, first_ts, last_ts FROM analytics_behavior_day
       WHERE game_id = ? AND env = ? AND day >= ? AND day <= ? AND kind IN (${kinds.map(() => '?').join(', ')})
       ${names ? `AND name IN (${names.map(() => '?').join(', ')})` : ''}`,
      [q.gameId, q.env, q.from, q.to, ...kinds, ...(names ?? [])],
    )
  const sketches = (q: DayScope, kinds: string[], names?: string[]) =>
    db.all<{ day: number; kind: string; name: string; users: number; sketch: string }>(
      `SELECT day, kind, name, users, sketch FROM analytics_behavior_sketch
       WHERE game_id = ? AND env = ? AND day >= ? AND day <= ? AND kind IN (${kinds.map(() => '?').join(', ')})
       ${names ? `AND name IN (${names.map(() => '?').join(', ')})` : ''}`,
      [q.gameId, q.env, q.from, q.to, ...kinds, ...(names ?? [])],
    )
  const byName = <R extends { name: string }>(rows: R[]) => {
    const out = new Map<string, R[]>()
    for (const r of rows) {
      const list = out.get(r.name)
      if (list) list.push(r)
      else out.set(r.name, [r])
    }
    return out
  }

  const idRanges = (q: TimeScope) => eventIdRanges(db, q)

  /** Reads the range's id ranges page by page (`read(afterId, toId)`), in id order, handing each page to `each`. */
  async function pages<R extends { id: number }>(
    q: TimeScope,
    read: (afterId: number, toId: number) => Promise<R[]>,
    each: (page: R[]) => void,
  ): Promise<void> {
    for (const [lo, hi] of await idRanges(q)) {
      let after = lo - 1
      for (;;) {
        const page = await read(after, hi)
        each(page)
        if (page.length < PAGE) break
        after = page[page.length - 1].id
        // SQLite reads run on the event loop: let requests (ingestion) in between pages.
        await new Promise((r) => setImmediate(r))
      }
    }
  }

  /** Every stored event of the range (optionally only `events`, one user), page by page, in id order. */
  const walk = (
    q: TimeScope,
    opts: { events?: string[]; userId?: string; withProps: boolean },
    each: (page: ScannedEvent[]) => void,
  ) =>
    pages(
      q,
      (afterId, toId) =>
        ingest.scan({
          gameId: q.gameId,
          env: q.env,
          from: q.from,
          to: q.to - 1,
          afterId,
          toId,
          events: opts.events,
          userId: opts.userId,
          withProps: opts.withProps,
          limit: PAGE,
        }),
      each,
    )

  /** The range's events (optionally only `events`) as light rows (user, name, time), page by page, in id order. */
  async function walkLight<P>(
    q: TimeScope,
    events: string[] | undefined,
    each: (page: P) => void,
    walk: (q: TimelineQuery, each: (page: P) => void) => Promise<void>,
  ) {
    const ranges = (await idRanges(q)).map(
      ([lo, hi]) =>
        (emit: (page: P) => void) =>
          walk(
            {
              gameId: q.gameId,
              env: q.env,
              from: q.from,
              to: q.to,
              afterId: lo - 1,
              toId: hi,
              events,
              limit: PAGE,
            },
            emit,
          ),
    )
    // SQLite's walks queue on its reading threads (see `WalkThreads`): asked for at once, so a
    // thread goes on to the next range while the event loop works through the pages held from
    // the one before. PostgreSQL's take four connections each: one range after another.
    if (db.dialect === 'sqlite') await inPartOrder(ranges, each)
    else for (const range of ranges) await range(each)
  }

  /**
   * Per user, the events of the range sorted by time (then by id), each with the number `code`
   * gives its name (names it answers undefined for are left out). Read light: only user, name
   * and time of each row, and the code worked out once per name, since a 24-hour read of a
   * busy game is hundreds of thousands of rows and the per-row work is what its time is made of.
   */
  async function timelines(
    q: TimeScope,
    events: string[] | undefined,
    code: (event: string) => number | undefined,
  ): Promise<Timelines> {
    // The pages come as joined text: parsed in place (see `TextTimelineBuilder`).
    const t = new TextTimelineBuilder(code)
    await walkLight(q, events, (page: TimelineText | TimelinePage) => t.add(page), ingest.timelineText)
    return t.done()
  }

  /** As `timelines`, for codes that depend on an event's properties (a funnel step's filter): full rows. */
  async function timelinesWithProps(
    q: TimeScope,
    events: string[] | undefined,
    code: (e: ScannedEvent) => number | undefined,
  ): Promise<Timelines> {
    const b = new TimelineBuilder()
    await walk(q, { events, withProps: true }, (page) => {
      for (const e of page) {
        if (e.userId === null) continue
        const c = code(e)
        if (c !== undefined) b.add(e.userId, e.ts, c)
      }
    })
    return b.done()
  }

  return {
    /** Per event name of the range: count, distinct users, and both per day; the top `top` by count. */
    async aggregates(q: DayScope & { top: number; events?: string[] }) {
      const rows = await counters(q, ['event'], q.events)
      const totals = new Map<string, number>()
      let total = 0
      for (const r of rows) {
        totals.set(r.name, (totals.get(r.name) ?? 0) + n(r.n))
        total += n(r.n)
      }
      const top = [...totals.entries()].sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1)).slice(0, q.top)
      const names = top.map(([name]) => name)
      const sk = byName(names.length ? await sketches(q, ['event'], names) : [])
      const counts = byName(rows)
      return {
        startDate: date(q.from),
        endDate: date(q.to),
        totalEvents: total,
        distinctEvents: totals.size,
        events: top.map(([event, count]) => {
          const perDay = new Map((counts.get(event) ?? []).map((r) => [n(r.day), n(r.n)]))
          const usersPerDay = new Map((sk.get(event) ?? []).map((r) => [n(r.day), n(r.users)]))
          const days = []
          for (let d = q.from; d <= q.to; d += DAY)
            days.push({ date: date(d), count: perDay.get(d) ?? 0, users: usersPerDay.get(d) ?? 0 })
          return { event, count, users: distinct(sk.get(event) ?? []), days }
        }),
      }
    },

    /** Raw events of the range, newest first (client time, then id), paged; `total` counts every match. */
    async events(q: TimeScope & { event?: string; userId?: string; page: number; pageSize: number }) {
      const keep = (q.page + 1) * q.pageSize
      let best: ScannedEvent[] = []
      let total = 0
      const newer = (a: ScannedEvent, b: ScannedEvent) => b.ts - a.ts || b.id - a.id
      /** The oldest row kept once `best` was trimmed: older rows cannot be on the page. */
      let oldest: ScannedEvent | undefined
      await walk(
        q,
        { events: q.event ? [q.event] : undefined, userId: q.userId, withProps: false },
        (page) => {
          total += page.length
          for (const e of page) if (oldest === undefined || newer(e, oldest) < 0) best.push(e)
          if (best.length > 2 * keep + PAGE) {
            best = best.sort(newer).slice(0, keep)
            oldest = best[keep - 1]
          }
        },
      )
      const rows = best.sort(newer).slice(q.page * q.pageSize, keep)
      // The page's own rows again, with their properties (a point read each).
      const full = await Promise.all(
        rows.map(async (r) => {
          const [e] = await ingest.scan({
            gameId: q.gameId,
            env: q.env,
            from: r.ts,
            to: r.ts,
            afterId: r.id - 1,
            toId: r.id,
            limit: 1,
          })
          return e ?? r
        }),
      )
      return {
        items: full.map((e) => ({
          id: String(e.id),
          timestamp: iso(e.ts),
          event: e.event,
          userId: e.userId,
          sessionId: e.sessionId,
          properties: e.props,
        })),
        total,
        page: q.page,
        pageSize: q.pageSize,
      }
    },

    /**
     * Top paths: per user, events in time order are cut into sessions (a new one at each
     * `session_start` or after 30 minutes without an event; `by: 'user'`: one path per user),
     * repeats in a row collapse into one step, a path starts at its first `startEvent` (when
     * given; paths without it are left out) and keeps its first `length` steps.
     */
    async paths(
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
      const lines = await timelines(q, undefined, (event) => {
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
    },

    /**
     * A funnel over the range. Per user, each occurrence of the first step (any step for `any`)
     * starts an attempt; the user counts at the furthest step any attempt reached, and times
     * come from the earliest attempt that reached it. Every step of an attempt happens within
     * `window` ms of its first (inclusive). `ordered`: steps in order, other events between
     * allowed; `strict`: steps in order with no other event of the user between them; `any`:
     * the steps in any order (step k counts users who did any k distinct steps).
     */
    async funnel(q: TimeScope & { steps: FunnelStep[]; window: number; order: FunnelOrder }) {
      const S = q.steps.length
      const stepEvents = [...new Set(q.steps.map((s) => s.event))]
      const filtered = q.steps.some((s) => s.properties && Object.keys(s.properties).length)
      const mask = (event: string, props: Record<string, unknown> | undefined) => {
        let m = 0
        for (let k = 0; k < S; k++) {
          const s = q.steps[k]
          if (s.event === event && (!props || !s.properties || matches(props, s.properties))) m |= 1 << k
        }
        // Strict funnels keep every event: one matching no step breaks a sequence.
        return m || q.order === 'strict' ? m : undefined
      }
      const events = q.order === 'strict' ? undefined : stepEvents
      const lines = filtered
        ? await timelinesWithProps(q, events, (e) => mask(e.event, e.props))
        : await timelines(q, events, (event) => mask(event, undefined))
      const reached = new Array<number>(S).fill(0)
      const fromPrev: number[][] = Array.from({ length: S }, () => [])
      const fromFirst: number[][] = Array.from({ length: S }, () => [])
      // Only an event of the first step (any step, for any order) starts an attempt.
      const starts = q.order === 'any' ? ~0 : 1
      for (let u = 0; u < lines.users; u++) {
        const hi = lines.start[u + 1]
        let best: number[] = []
        for (let i = lines.start[u]; i < hi && best.length < S; i++) {
          if (!(lines.code[i] & starts)) continue
          const times = attempt(lines.ts, lines.code, i, hi, S, q.window, q.order)
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
    },

    /**
     * Feature adoption of the range from `feature_use`: per feature its users (distinct over
     * the range), uses, share of the range's active users, first and last use. Active users:
     * those who logged in or started a session, and every feature user (so a share is at most 1).
     */
    async adoption(q: DayScope) {
      const [rows, sk, active] = await Promise.all([
        counters(q, ['feature']),
        sketches(q, ['feature']),
        db.all<{ sketch: string }>(
          'SELECT sketch FROM analytics_day_sketch WHERE game_id = ? AND env = ? AND day >= ? AND day <= ?',
          [q.gameId, q.env, q.from, q.to],
        ),
      ])
      const activeUsers = distinct([...active, ...sk])
      const bySketch = byName(sk)
      const features = [...byName(rows).entries()].map(([feature, list]) => {
        const users = distinct(bySketch.get(feature) ?? [])
        return {
          feature,
          users,
          uses: list.reduce((s, r) => s + n(r.n), 0),
          share: activeUsers ? round(users / activeUsers) : 0,
          firstUse: iso(Math.min(...list.map((r) => n(r.first_ts)))),
          lastUse: iso(Math.max(...list.map((r) => n(r.last_ts)))),
        }
      })
      features.sort((a, b) => b.users - a.users || b.uses - a.uses || (a.feature < b.feature ? -1 : 1))
      return { startDate: date(q.from), endDate: date(q.to), activeUsers, features }
    },

    /** One feature's users and uses per value of a dimension; share: of the feature's users. */
    async adoptionBreakdown(q: DayScope & { feature: string; dimension: Dimension }) {
      const kind = `feature.${q.dimension}`
      const prefix = `${q.feature}${sep}`
      const [rows, sk, all] = await Promise.all([
        counters(q, [kind]),
        sketches(q, [kind]),
        sketches(q, ['feature'], [q.feature]),
      ])
      const users = distinct(all)
      const bySketch = byName(sk.filter((r) => r.name.startsWith(prefix)))
      const values = [...byName(rows.filter((r) => r.name.startsWith(prefix))).entries()].map(
        ([name, list]) => {
          const u = distinct(bySketch.get(name) ?? [])
          return {
            value: name.slice(prefix.length),
            users: u,
            uses: list.reduce((s, r) => s + n(r.n), 0),
            share: users ? round(u / users) : 0,
          }
        },
      )
      values.sort((a, b) => b.users - a.users || b.uses - a.uses || (a.value < b.value ? -1 : 1))
      return {
        startDate: date(q.from),
        endDate: date(q.to),
        feature: q.feature,
        dimension: q.dimension,
        users,
        values,
      }
    },

    /** Successful revenue per product per day (refunds beside it); the top `top` products by revenue. */
    async productTrend(q: DayScope & { top: number }) {
      const rows = await counters(q, ['product', 'product.refund'])
      const products = new Map<
        string,
        { revenue: number; transactions: number; refunds: number; days: Map<number, [number, number]> }
      >()
      for (const r of rows) {
        let p = products.get(r.name)
        if (!p) {
          p = { revenue: 0, transactions: 0, refunds: 0, days: new Map() }
          products.set(r.name, p)
        }
        if (r.kind === 'product.refund') {
          p.refunds += n(r.total)
          continue
        }
        p.revenue += n(r.total)
        p.transactions += n(r.n)
        const d = p.days.get(n(r.day)) ?? [0, 0]
        d[0] += n(r.total)
        d[1] += n(r.n)
        p.days.set(n(r.day), d)
      }
      const top = [...products.entries()]
        .sort((a, b) => b[1].revenue - a[1].revenue || (a[0] < b[0] ? -1 : 1))
        .slice(0, q.top)
      return {
        startDate: date(q.from),
        endDate: date(q.to),
        products: top.map(([id, p]) => {
          const days = []
          for (let d = q.from; d <= q.to; d += DAY) {
            const x = p.days.get(d) ?? [0, 0]
            days.push({ date: date(d), revenue: money(x[0]), transactions: x[1] })
          }
          return {
            productId: id === '' ? null : id,
            revenue: money(p.revenue),
            transactions: p.transactions,
            refunds: money(p.refunds),
            days,
          }
        }),
      }
    },

    /** Payments of the range (each order and status once), newest first, paged. */
    async transactions(
      q: TimeScope & { status?: string; userId?: string; productId?: string; page: number; pageSize: number },
    ) {
      let where = 'game_id = ? AND env = ? AND ts >= ? AND ts < ?'
      const params: Param[] = [q.gameId, q.env, q.from, q.to]
      for (const [col, v] of [
        ['status', q.status],
        ['user_id', q.userId],
        ['product_id', q.productId],
      ] as const)
        if (v !== undefined) {
          where += ` AND ${col} = ?`
          params.push(v)
        }
      const [count, rows] = await Promise.all([
        db.get<{ n: number }>(`SELECT COUNT(*) AS n FROM analytics_transaction WHERE ${where}`, params),
        db.all<{
          ts: number
          order_id: string
          status: string
          amount_cents: number
          currency: string | null
          user_id: string | null
          product_id: string | null
          kind: string
          platform: string | null
        }>(
          `SELECT ts, order_id, status, amount_cents, currency, user_id, product_id, kind, platform FROM analytics_transaction
           WHERE ${where} ORDER BY ts DESC, order_id DESC, status DESC LIMIT ? OFFSET ?`,
          [...params, q.pageSize, q.page * q.pageSize],
        ),
      ])
      return {
        items: rows.map((r) => ({
          timestamp: iso(n(r.ts)),
          orderId: r.order_id,
          status: r.status,
          amount: money(n(r.amount_cents)),
          amountCents: n(r.amount_cents),
          currency: r.currency,
          userId: r.user_id,
          productId: r.product_id,
          kind: r.kind,
          platform: r.platform,
        })),
        total: n(count?.n),
        page: q.page,
        pageSize: q.pageSize,
      }
    },
  }
}

/**
 * One funnel attempt starting at event `i`: the times of the steps it reached (empty when `i`
 * cannot start one). Codes are step bit masks (0: an event matching no step, strict funnels only).
 */
function attempt(
  ts: Float64Array,
  code: Int32Array,
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
    for (let j = i; j < end && ts[j] - t0 <= window && times.length < S; j++) {
      // An event counts for one step: the first it matches that is not done yet.
      const open = code[j] & ~done
      if (!open) continue
      done |= open & -open
      times.push(ts[j])
    }
    return times
  }
  if (!(code[i] & 1)) return []
  const times = [t0]
  for (let j = i + 1; j < end && times.length < S && ts[j] - t0 <= window; j++) {
    if (code[j] & (1 << times.length)) times.push(ts[j])
    else if (order === 'strict') break
  }
  return times
}
