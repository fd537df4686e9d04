import { TooManyRequests } from './http'

export interface RateDecision {
  limit: number
  remaining: number
  /** Epoch seconds at which the minute window resets. */
  reset: number
}

/**
 * What the auth guard counts requests against. Core's own is the in-memory `RateLimiter` below;
 * a plugin may put another in its place (`ctx.rateLimiter.use`), for example one shared by every
 * instance through Redis. `hit` throws `TooManyRequests` past the limit.
 */
export interface Limiter {
  readonly enabled: boolean
  hit(key: string): RateDecision | Promise<RateDecision>
}

/**
 * The app's one limiter slot, read on every request: swapping what it holds changes the limit of
 * every route at once, without rebuilding the guard.
 */
export class LimiterSlot implements Limiter {
  constructor(public current: Limiter) {}

  get enabled(): boolean {
    return this.current.enabled
  }

  hit(key: string): RateDecision | Promise<RateDecision> {
    return this.current.hit(key)
  }

  /** Puts `limiter` in place of the current one. */
  use(limiter: Limiter): void {
    this.current = limiter
  }
}

/**
 * Spec 1 section 8: 1000 requests per minute per API key (or user) with bursts of at most 100
 * per second. Two fixed windows per key, kept in memory; old keys are swept once a minute.
 */
export class RateLimiter implements Limiter {
  private minute = new Map<string, { window: number; n: number }>()
  private second = new Map<string, { window: number; n: number }>()
  private lastSweep = 0

  constructor(
    readonly perMinute: number,
    readonly burst: number,
  ) {}

  get enabled(): boolean {
    return this.perMinute > 0
  }

  /** Counts one request for `key`; throws 429 with Retry-After when over either limit. */
  hit(key: string, now = Date.now()): RateDecision {
    const minuteWindow = Math.floor(now / 60_000)
    const secondWindow = Math.floor(now / 1000)
    if (minuteWindow !== this.lastSweep) this.sweep(minuteWindow)
    const m = this.bump(this.minute, key, minuteWindow)
    const reset = (minuteWindow + 1) * 60
    if (m.n > this.perMinute) {
      m.n--
      const retry = Math.max(1, reset - Math.floor(now / 1000))
      throw new TooManyRequests(
        `rate limit of ${this.perMinute} requests per minute exceeded`,
        retry,
        'rate_limit_exceeded',
        {
          limit: this.perMinute,
          retry_after: retry,
        },
      )
    }
    if (this.burst > 0) {
      const s = this.bump(this.second, key, secondWindow)
      if (s.n > this.burst) {
        s.n--
        m.n--
        throw new TooManyRequests(
          `burst limit of ${this.burst} requests per second exceeded`,
          1,
          'rate_limit_exceeded',
          {
            limit: this.burst,
            retry_after: 1,
          },
        )
      }
    }
    return { limit: this.perMinute, remaining: Math.max(0, this.perMinute - m.n), reset }
  }

  private bump(map: Map<string, { window: number; n: number }>, key: string, window: number) {
    let e = map.get(key)
    if (!e || e.window !== window) {
      e = { window, n: 0 }
      map.set(key, e)
    }
    e.n++
    return e
  }

  private sweep(minuteWindow: number) {
    this.lastSweep = minuteWindow
    for (const [k, v] of this.minute) if (v.window < minuteWindow) this.minute.delete(k)
    this.second.clear()
  }
}

export function rateHeaders(d: RateDecision): Record<string, string> {
  return {
    'x-ratelimit-limit': String(d.limit),
    'x-ratelimit-remaining': String(d.remaining),
    'x-ratelimit-reset': String(d.reset),
  }
}
