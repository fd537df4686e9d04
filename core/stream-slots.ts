import type { Principal } from './auth/principal'
import { TooManyRequests } from './http'

/**
 * The event streams a caller holds open at once in this process (the realtime dashboard, the
 * in-app messages), counted per principal: a process-wide cap alone let one viewer open every
 * slot of it, and the admin's own dashboard then got 503. The admin token is not counted (the
 * rate limit exempts it too): it is the operator's.
 */
export class StreamSlots {
  private readonly held = new Map<string, number>()

  /** `cap` is read at each opening: a setting changed at runtime applies to the next one. */
  constructor(
    private readonly cap: () => number,
    private readonly what: string,
  ) {}

  /**
   * Takes a slot for `who`, or throws 429 naming the cap; answers the release, which may be
   * called any number of times (every way a stream ends calls it) and frees the slot once.
   */
  take(who: Principal): () => void {
    if (who.kind === 'admin') return () => undefined
    const key = `${who.kind}:${who.id}`
    const n = this.held.get(key) ?? 0
    const cap = this.cap()
    if (n >= cap)
      throw new TooManyRequests(
        `at most ${cap} ${this.what} streams open at once per caller; close one first`,
        5,
        'too_many_streams',
        { max_streams: cap, retry_after: 5 },
      )
    this.held.set(key, n + 1)
    let released = false
    return () => {
      if (released) return
      released = true
      const left = (this.held.get(key) ?? 1) - 1
      if (left > 0) this.held.set(key, left)
      else this.held.delete(key)
    }
  }

  /** Streams `who` holds open now (tests, metrics). */
  of(who: Principal): number {
    return this.held.get(`${who.kind}:${who.id}`) ?? 0
  }
}
