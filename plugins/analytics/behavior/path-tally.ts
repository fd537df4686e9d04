import { turn } from '../../../core/turn'
import { cmpText, walkSlice } from './timeline'

/**
 * The distinct paths of a paths read and how often each was met, without a string or an object
 * per path. Each distinct path is kept once, as its steps (name codes) in one flat array, and
 * found again by a 32-bit hash of its steps in an open-addressing table, then compared step by
 * step: two paths whose hashes agree are never merged, so the counts are exact.
 *
 * Before, a path was a number in base (names + 1) while that fitted a double, and past it (2,000
 * names at length 5, any length 20) a string of its codes: a string per path and a map of strings
 * held the event loop seconds over a day of a busy game (the security audit's paths read).
 */
export class PathTally {
  /** The steps of each distinct path: path e's begin at `e * length`, `size[e]` of them. */
  private steps: Int32Array
  private size: Int32Array = new Int32Array(1024)
  private hits: Int32Array = new Int32Array(1024)
  private hashes: Int32Array = new Int32Array(1024)
  /** Open addressing by hash: (path + 1), 0 for a free slot; at most half full. */
  private slots = new Int32Array(2048)
  private n = 0
  private readonly cur: Int32Array

  constructor(private readonly length: number) {
    this.steps = new Int32Array(length * 1024)
    this.cur = new Int32Array(length)
  }

  /** Counts the path of `codes[from, hi)`: repeats in a row are one step, at most `length` steps. */
  count(codes: Int32Array, from: number, hi: number): void {
    const { cur, length } = this
    let k = 0
    let prev = -1
    let h = 0x811c9dc5
    for (let i = from; i < hi && k < length; i++) {
      const c = codes[i]
      if (c === prev) continue
      cur[k++] = c
      h = Math.imul(h ^ c, 0x01000193)
      prev = c
    }
    h = mix(h)
    const mask = this.slots.length - 1
    let s = h & mask
    for (; ; s = (s + 1) & mask) {
      const e = this.slots[s] - 1
      if (e < 0) break
      if (this.hashes[e] !== h || this.size[e] !== k) continue
      const at = e * length
      let j = 0
      while (j < k && this.steps[at + j] === cur[j]) j++
      if (j === k) {
        this.hits[e]++
        return
      }
    }
    const e = this.n++
    if (e === this.size.length) {
      this.steps = grown(this.steps, this.steps.length * 2)
      this.size = grown(this.size, e * 2)
      this.hits = grown(this.hits, e * 2)
      this.hashes = grown(this.hashes, e * 2)
    }
    this.steps.set(cur.subarray(0, k), e * length)
    this.size[e] = k
    this.hits[e] = 1
    this.hashes[e] = h
    if (this.n * 2 <= this.slots.length) this.slots[s] = e + 1
    else {
      this.slots = new Int32Array(this.slots.length * 2)
      const m = this.slots.length - 1
      for (let p = 0; p < this.n; p++) {
        let t = this.hashes[p] & m
        while (this.slots[t]) t = (t + 1) & m
        this.slots[t] = p + 1
      }
    }
  }

  /**
   * The `top` most frequent paths, ties in the text order of their names joined by U+0001 (so an
   * answer never depends on the order events came in), by a heap of `top` paths instead of a sort
   * of every path: a day holds hundreds of thousands of distinct paths.
   */
  async top(top: number, names: string[]): Promise<Array<{ path: string[]; count: number }>> {
    const { hits } = this
    /** Whether path `a` ranks after path `b` (the first met first among equal labels). */
    const after = (a: number, b: number) =>
      hits[a] !== hits[b] ? hits[a] < hits[b] : (this.cmp(a, b, names) || a - b) > 0
    // The worst kept path at the root.
    const heap: number[] = []
    const swap = (i: number, j: number) => {
      const t = heap[i]
      heap[i] = heap[j]
      heap[j] = t
    }
    for (let e = 0; e < this.n; e++) {
      if (e && e % walkSlice.rows === 0) await turn()
      if (heap.length < top) {
        heap.push(e)
        for (let i = heap.length - 1; i > 0 && after(heap[i], heap[(i - 1) >> 1]); i = (i - 1) >> 1)
          swap(i, (i - 1) >> 1)
        continue
      }
      if (!after(heap[0], e)) continue
      heap[0] = e
      for (let i = 0; ; ) {
        let w = i
        for (const c of [2 * i + 1, 2 * i + 2]) if (c < heap.length && after(heap[c], heap[w])) w = c
        if (w === i) break
        swap(i, w)
        i = w
      }
    }
    return heap
      .sort((a, b) => (after(a, b) ? 1 : -1))
      .map((e) => ({ path: this.names(e, 0, names), count: hits[e] }))
  }

  /** The names of path `e`'s steps from step `i` on. */
  private names(e: number, i: number, names: string[]): string[] {
    const at = e * this.length
    return Array.from({ length: this.size[e] - i }, (_, j) => names[this.steps[at + i + j]])
  }

  /** Paths `a` and `b` in the text order of their names joined by U+0001 (0 for equal labels). */
  private cmp(a: number, b: number, names: string[]): number {
    const la = this.size[a]
    const lb = this.size[b]
    const pa = a * this.length
    const pb = b * this.length
    let i = 0
    while (i < la && i < lb && this.steps[pa + i] === this.steps[pb + i]) i++
    // One path begins the other: its label begins the other's.
    if (i === la || i === lb) return la - lb
    const x = names[this.steps[pa + i]]
    const y = names[this.steps[pb + i]]
    if (!x.startsWith(y) && !y.startsWith(x)) return cmpText(x, y)
    // One name begins the other: the rest of the labels decides (U+0001 against a name's next unit).
    return cmpText(this.names(a, i, names).join('\u0001'), this.names(b, i, names).join('\u0001'))
  }
}

/** murmur3's finaliser: every bit of the hash moves its low bits, which pick the slot. */
function mix(h: number): number {
  const a = Math.imul(h ^ (h >>> 16), 0x85ebca6b)
  const b = Math.imul(a ^ (a >>> 13), 0xc2b2ae35)
  return b ^ (b >>> 16)
}

function grown(a: Int32Array, n: number): Int32Array {
  const b = new Int32Array(n)
  b.set(a)
  return b
}
