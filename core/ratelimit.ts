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
    private clock: () => number = Date.now,
  ) {}

  get enabled(): boolean {
    return this.perMinute > 0
  }

  /** Counts one request for `key`; throws 429 with Retry-After when over either limit. */
  hit(key: string, now = this.clock()): RateDecision {
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

/** What `SharedRateLimiter` counts on: core's shared state (core/shared.ts). */
interface Counters {
  addAll(counts: Array<{ key: string; windowMs: number; by?: number }>): number[] | Promise<number[]>
}

/**
 * The same two fixed windows as `RateLimiter`, counted in the state every instance shares (Redis,
 * else the database): N instances give one budget, and a restart forgets nothing. One round trip
 * per request increments both windows; a refused request gives its counts back. Should the shared
 * state fail (the database away; Redis failures are already answered from memory by the state
 * itself), this instance counts alone until it answers again, never refusing for that reason.
 */
export class SharedRateLimiter implements Limiter {
  private local: RateLimiter
  private failing = false
  private retryAt = 0

  constructor(
    readonly perMinute: number,
    readonly burst: number,
    private counters: Counters,
    private log: { warn(msg: string, fields?: Record<string, unknown>): void },
    private clock: () => number = Date.now,
  ) {
    this.local = new RateLimiter(perMinute, burst, clock)
  }

  get enabled(): boolean {
    return this.perMinute > 0
  }

  async hit(key: string): Promise<RateDecision> {
    const now = this.clock()
    const minute = Math.floor(now / 60_000)
    const second = Math.floor(now / 1000)
    const reset = (minute + 1) * 60
    // The window's index is in its key; the expiry only clears it away a second after it ends.
    const counts = [{ key: `rl:m:${key}:${minute}`, windowMs: reset * 1000 - now + 1000 }]
    if (this.burst > 0) counts.push({ key: `rl:s:${key}:${second}`, windowMs: 2000 })
    // While the shared counters fail, requests count here without waiting on them again for a second.
    if (now < this.retryAt) return this.local.hit(key, now)
    let totals: number[]
    try {
      totals = await this.counters.addAll(counts)
      this.failing = false
    } catch (e) {
      if (!this.failing)
        this.log.warn('rate limit: the shared counters do not answer; counting in this instance alone', {
          error: String(e),
        })
      this.failing = true
      this.retryAt = this.clock() + 1000
      return this.local.hit(key, now)
    }
    const [m, s = 0] = totals
    const over = m > this.perMinute ? 'minute' : this.burst > 0 && s > this.burst ? 'second' : undefined
    if (over) {
      void Promise.resolve()
        .then(() => this.counters.addAll(counts.map((c) => ({ ...c, by: -1 }))))
        .catch(() => undefined)
      const retry = over === 'minute' ? Math.max(1, reset - Math.floor(now / 1000)) : 1
      const limit = over === 'minute' ? this.perMinute : this.burst
      throw new TooManyRequests(
        over === 'minute'
          ? `rate limit of ${this.perMinute} requests per minute exceeded`
          : `burst limit of ${this.burst} requests per second exceeded`,
        retry,
        'rate_limit_exceeded',
        { limit, retry_after: retry },
      )
    }
    return { limit: this.perMinute, remaining: Math.max(0, this.perMinute - m), reset }
  }
}

export function rateHeaders(d: RateDecision): Record<string, string> {
  return {
    'x-ratelimit-limit': String(d.limit),
    'x-ratelimit-remaining': String(d.remaining),
    'x-ratelimit-reset': String(d.reset),
  }
}

// --- token buckets (the rate-limits plugin's gateway limiter; core/shared.ts `take`) ---------

export interface BucketSettings {
  /** Refill: this many tokens per minute. 0 disables limiting. */
  requestsPerMinute: number
  /** Capacity: the most requests at once after a quiet spell. */
  burstSize: number
}

/** The answer of one bucket: whether a token was taken and how many are left. */
export interface Take {
  allowed: boolean
  tokens: number
}

export function bucketDecision(s: BucketSettings, take: Take, nowMs: number): RateDecision {
  const perMs = s.requestsPerMinute / 60_000
  if (!take.allowed) {
    const retry = Math.max(1, Math.ceil((1 - take.tokens) / perMs / 1000))
    throw new TooManyRequests(
      `rate limit of ${s.requestsPerMinute} requests per minute (bursts of ${s.burstSize}) exceeded`,
      retry,
      'rate_limit_exceeded',
      { limit: s.requestsPerMinute, burst: s.burstSize, retry_after: retry },
    )
  }
  const toFull = (s.burstSize - take.tokens) / perMs
  return {
    limit: s.requestsPerMinute,
    remaining: Math.max(0, Math.floor(take.tokens)),
    reset: Math.ceil((nowMs + toFull) / 1000),
  }
}

/**
 * A token bucket per key in this process: `burstSize` tokens, refilled at `requestsPerMinute`
 * per minute. Keys idle long enough to be full again are forgotten.
 */
export class LocalBuckets {
  private buckets = new Map<string, { tokens: number; at: number }>()
  private swept = 0

  constructor(private s: BucketSettings) {}

  take(key: string, now = Date.now()): Take {
    const perMs = this.s.requestsPerMinute / 60_000
    if (now - this.swept > 60_000) this.sweep(now, perMs)
    const b = this.buckets.get(key) ?? { tokens: this.s.burstSize, at: now }
    b.tokens = Math.min(this.s.burstSize, b.tokens + Math.max(0, now - b.at) * perMs)
    b.at = now
    const allowed = b.tokens >= 1
    if (allowed) b.tokens -= 1
    this.buckets.set(key, b)
    return { allowed, tokens: b.tokens }
  }

  private sweep(now: number, perMs: number) {
    this.swept = now
    for (const [k, b] of this.buckets)
      if (b.tokens + (now - b.at) * perMs >= this.s.burstSize) this.buckets.delete(k)
  }
}

/**
 * The bucket in Redis, refilled and taken in one atomic script with Redis's own clock, so every
 * instance shares one budget per key and clock skew between instances does not matter. Tokens
 * come back as a string: Redis truncates Lua numbers to integers.
 */
export const BUCKET_SCRIPT = `
local rate = tonumber(ARGV[1])
local cap = tonumber(ARGV[2])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local b = redis.call('HMGET', KEYS[1], 'tk', 'ts')
local tokens = tonumber(b[1])
local ts = tonumber(b[2])
if tokens == nil then tokens = cap; ts = now end
tokens = math.min(cap, tokens + math.max(0, now - ts) * rate)
local allowed = 0
if tokens >= 1 then tokens = tokens - 1; allowed = 1 end
redis.call('HSET', KEYS[1], 'tk', tostring(tokens), 'ts', now)
redis.call('PEXPIRE', KEYS[1], math.ceil(cap / rate) + 1000)
return {allowed, tostring(tokens)}
`
