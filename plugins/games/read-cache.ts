/**
 * Ids that name no row, remembered at most this many per kind (games, environments). Anyone may
 * ask for made-up ids (the public configuration takes no credential): every miss was kept for
 * good, and `GET /api/config/<7,000 characters><n>/dev` had grown the process 150 MB a second.
 */
export const MISSES_KEPT = 1_000

/**
 * Reads by key kept `ttlMs`: the rows found (as many as the store holds) and, apart, the keys
 * that named none, at most `missesKept` of them (the oldest goes first) so a flood of made-up
 * keys costs a read each and no memory.
 */
export class ReadCache<V> {
  private hits = new Map<string, { value: V; at: number }>()
  private misses = new Map<string, number>()

  constructor(
    private readonly ttlMs: number,
    private readonly missesKept = MISSES_KEPT,
  ) {}

  private fresh(at: number): boolean {
    return Date.now() - at < this.ttlMs
  }

  /** The value, null when known to be missing, undefined when not known (read the store). */
  get(key: string): V | null | undefined {
    const hit = this.hits.get(key)
    if (hit && this.fresh(hit.at)) return hit.value
    const miss = this.misses.get(key)
    if (miss !== undefined && this.fresh(miss)) return null
    return undefined
  }

  /** Remembers a read: the row, or null when there was none. */
  set(key: string, value: V | null): void {
    this.misses.delete(key)
    if (value !== null) {
      this.hits.set(key, { value, at: Date.now() })
      return
    }
    this.hits.delete(key)
    this.misses.set(key, Date.now())
    if (this.misses.size > this.missesKept) this.misses.delete(this.misses.keys().next().value as string)
  }

  delete(key: string): void {
    this.hits.delete(key)
    this.misses.delete(key)
  }

  /** Forgets every key starting with `prefix`. */
  deletePrefixed(prefix: string): void {
    for (const map of [this.hits, this.misses])
      for (const k of map.keys()) if (k.startsWith(prefix)) map.delete(k)
  }

  /** Keys held: rows found and misses. */
  get size(): { hits: number; misses: number } {
    return { hits: this.hits.size, misses: this.misses.size }
  }
}
