import type { Principal } from './auth/principal'
import { type HttpError, TooManyRequests } from './http'

/**
 * What one caller holds at once in this process, counted per principal against a cap, refused
 * past it: a process-wide bound alone let one viewer take all of it. The admin token is not
 * counted (the rate limit exempts it too): it is the operator's.
 */
export class CallerSlots {
  private readonly held = new Map<string, number>()

  /** `cap` is read at each taking: a setting changed at runtime applies to the next one. */
  constructor(
    private readonly cap: () => number,
    private readonly refusal: (cap: number) => HttpError,
  ) {}

  /**
   * Takes a slot for `who`, or throws the refusal; answers the release, which may be called any
   * number of times (every way a holder ends calls it) and frees the slot once.
   */
  take(who: Principal): () => void {
    if (who.kind === 'admin') return () => undefined
    const key = `${who.kind}:${who.id}`
    const n = this.held.get(key) ?? 0
    const cap = this.cap()
    if (n >= cap) throw this.refusal(cap)
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

  /** What `who` holds now (tests, metrics). */
  of(who: Principal): number {
    return this.held.get(`${who.kind}:${who.id}`) ?? 0
  }
}

/**
 * The event streams a caller holds open (the realtime dashboard, the in-app messages): one
 * viewer's 10,000 had taken every slot of the process, and the admin's dashboard got 503.
 */
export class StreamSlots extends CallerSlots {
  constructor(cap: () => number, what: string) {
    super(
      cap,
      (n) =>
        new TooManyRequests(
          `at most ${n} ${what} streams open at once per caller; close one first`,
          5,
          'too_many_streams',
          { max_streams: n, retry_after: 5 },
        ),
    )
  }
}
