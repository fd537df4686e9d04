import { RedisClient } from 'bun'
import { TooManyRequests } from '../../core/http'
import type { Logger } from '../../core/log'
import type { Limiter, RateDecision } from '../../core/ratelimit'

export interface BucketSettings {
  /** Refill: this many tokens per minute. 0 disables limiting. */
  requestsPerMinute: number
  /** Capacity: the most requests at once after a quiet spell. */
  burstSize: number
}

/** The answer of one bucket: whether a token was taken and how many are left. */
interface Take {
  allowed: boolean
  tokens: number
}

function decide(s: BucketSettings, take: Take, nowMs: number): RateDecision {
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

export interface SharedOptions {
  url: string
  prefix: string
  /** A Redis answer slower than this counts as an outage for this request. */
  timeoutMs: number
  /** After a failure, how long requests use the local bucket before Redis is tried again. */
  retryMs: number
}

/**
 * The gateway limiter (spec 3 "rateLimit.requestsPerMinute, rateLimit.burstSize"): the shared
 * Redis bucket when Redis is configured, else the local one. A Redis outage degrades to the local
 * bucket (one warning per outage, a failing `rate_limit_redis` check) and never refuses a request
 * because Redis is away.
 */
export class GatewayLimiter implements Limiter {
  private local: LocalBuckets
  private redis?: RedisClient
  private sha?: string
  private downUntil = 0
  /** The last Redis failure, while degraded. */
  lastError?: string

  constructor(
    private s: BucketSettings,
    private log: Logger,
    private shared?: SharedOptions,
  ) {
    this.local = new LocalBuckets(s)
    if (shared)
      this.redis = new RedisClient(shared.url, {
        connectionTimeout: Math.max(200, shared.timeoutMs * 4),
        autoReconnect: true,
        enableOfflineQueue: false,
      })
  }

  get enabled(): boolean {
    return this.s.requestsPerMinute > 0 && this.s.burstSize > 0
  }

  /** `shared` while Redis answers, `local` when there is no Redis or it is down. */
  get mode(): 'shared' | 'local' {
    return this.redis && !this.lastError ? 'shared' : 'local'
  }

  async hit(key: string): Promise<RateDecision> {
    const now = Date.now()
    if (this.redis && now >= this.downUntil) {
      try {
        const take = await this.remote(key)
        if (this.lastError) {
          this.log.warn('rate limiter: Redis answers again; the bucket is shared again')
          this.lastError = undefined
        }
        return decide(this.s, take, now)
      } catch (e) {
        if (e instanceof TooManyRequests) throw e
        this.degrade(e, now)
      }
    }
    return decide(this.s, this.local.take(key, now), now)
  }

  /** Pings Redis for the health check (and recovers from an outage early when it answers). */
  async check(): Promise<{ ok: boolean; error?: string }> {
    if (!this.redis) return { ok: true }
    try {
      await this.withTimeout(this.connected().then((r) => r.send('PING', [])))
      return this.lastError ? { ok: false, error: this.lastError } : { ok: true }
    } catch (e) {
      this.degrade(e, Date.now())
      return { ok: false, error: this.lastError }
    }
  }

  close(): void {
    this.redis?.close()
  }

  private degrade(e: unknown, now: number) {
    const message = (e as Error)?.message ?? String(e)
    if (!this.lastError)
      this.log.warn('rate limiter: Redis unavailable, limiting per instance until it answers', {
        error: message,
      })
    this.lastError = message
    this.downUntil = now + (this.shared?.retryMs ?? 1000)
  }

  private async connected(): Promise<RedisClient> {
    const r = this.redis!
    if (!r.connected) await r.connect()
    return r
  }

  private async remote(key: string): Promise<Take> {
    const r = await this.withTimeout(this.connected())
    const perMs = String(this.s.requestsPerMinute / 60_000)
    const args = ['1', `${this.shared!.prefix}${key}`, perMs, String(this.s.burstSize)]
    this.sha ??= String(await this.withTimeout(r.send('SCRIPT', ['LOAD', BUCKET_SCRIPT])))
    let out: unknown
    try {
      out = await this.withTimeout(r.send('EVALSHA', [this.sha, ...args]))
    } catch (e) {
      // A restarted Redis has forgotten the script.
      if (!String((e as Error).message).includes('NOSCRIPT')) throw e
      out = await this.withTimeout(r.send('EVAL', [BUCKET_SCRIPT, ...args]))
    }
    const [allowed, tokens] = out as [number, string]
    return { allowed: Number(allowed) === 1, tokens: Number(tokens) }
  }

  private withTimeout<T>(p: Promise<T>): Promise<T> {
    const ms = this.shared?.timeoutMs ?? 50
    let timer: Timer | undefined
    return Promise.race([
      p,
      new Promise<T>((_, rej) => {
        timer = setTimeout(() => rej(new Error(`Redis did not answer within ${ms} ms`)), ms)
      }),
    ]).finally(() => clearTimeout(timer))
  }
}
