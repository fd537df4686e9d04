import { turn } from '../../../core/turn'
import type { TimelinePage, TimelineText } from '../../ingest/types'

/**
 * Rows (or paths) worked through between two turns of the event loop in the grouping of a walk
 * and in what paths and funnels do with it. A day of a busy game is a million rows and more; in
 * one pass the grouping alone held the loop 1.5-2.3 s and every request (`/healthz` too) waited
 * (the security audit's paths read). A slice is a few milliseconds; tests make it small.
 */
export const walkSlice = { rows: 16_384 }

/** Text order by UTF-16 code units (no locale). */
export const cmpText = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0)

/**
 * Sorts rows `lo` up to `hi` of `ts` and `code` together by time, equal times kept in their order.
 * A user's run is mostly a handful of rows: sorted in place by insertion, with no array per user
 * (a day's walk has a hundred thousand users and more); a long run by an index sort.
 */
export function sortRun(ts: Float64Array, code: Int32Array, lo: number, hi: number): void {
  if (hi - lo <= 32) {
    for (let i = lo + 1; i < hi; i++) {
      const t = ts[i]
      const c = code[i]
      let j = i - 1
      for (; j >= lo && ts[j] > t; j--) {
        ts[j + 1] = ts[j]
        code[j + 1] = code[j]
      }
      ts[j + 1] = t
      code[j + 1] = c
    }
    return
  }
  const idx = Array.from({ length: hi - lo }, (_, j) => lo + j).sort((x, y) => ts[x] - ts[y] || x - y)
  const t2 = idx.map((j) => ts[j])
  const c2 = idx.map((j) => code[j])
  ts.set(t2, lo)
  code.set(c2, lo)
}

/** Per user, events in time order: user u's are `start[u]` up to `start[u + 1]` of `ts` and `code`. */
export interface Timelines {
  users: number
  start: Int32Array
  ts: Float64Array
  code: Int32Array
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

  /** The rows grouped per user, each user's sorted by time; takes a turn of the event loop every `walkSlice.rows` rows. */
  async done(): Promise<Timelines> {
    const N = this.size
    const { users, hash, when, what } = this
    const order = await byHash(this.hash, N)
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
      let i = first + 1
      while (i < p && ts[i] >= ts[i - 1]) i++
      if (i < p) sortRun(ts, cd, first, p)
    }
    let pause = walkSlice.rows
    for (let lo = 0; lo < N; ) {
      if (lo >= pause) {
        await turn()
        pause = lo + walkSlice.rows
      }
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

  /** As `TimelineBuilder.done`, a turn of the event loop every `walkSlice.rows` rows. */
  async done(): Promise<Timelines> {
    const N = this.size
    const { texts } = this
    const order = await byHash(this.hash, N)
    // The rows gathered in hash order, so what follows reads them in sequence.
    const hash = new Int32Array(N)
    const text = new Int32Array(N)
    const first = new Int32Array(N)
    const end = new Int32Array(N)
    const ts = new Float64Array(N)
    const cd = new Int32Array(N)
    for (let i = 0; i < N; i++) {
      if (i % walkSlice.rows === 0 && i) await turn()
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
      if (i < hi) sortRun(ts, cd, lo, hi)
    }
    let pause = walkSlice.rows
    for (let lo = 0; lo < N; ) {
      if (lo >= pause) {
        await turn()
        pause = lo + walkSlice.rows
      }
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

/**
 * Row indices `0..N-1` in order of `hash` (low 16 bits, then high: two stable counting passes),
 * ties in row order; a turn of the event loop after each pass.
 */
async function byHash(h: Int32Array, N: number): Promise<Int32Array> {
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
    await turn()
  }
  return from
}
