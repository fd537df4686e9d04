import { RedisClient } from 'bun'
import type { Logger } from '../../core/log'
import {
  BUCKET_SCRIPT,
  type BucketSettings,
  type Limiter,
  LocalBuckets,
  type RateDecision,
  type Take,
  bucketDecision,
} from '../../core/ratelimit'
import { SilenceWatch } from '../../core/silence'

export { LocalBuckets, type BucketSettings }

export interface SharedOptions {
  url: string
  prefix: string
  /**
   * A window of this length in which Redis answered nothing while requests waited is one timeout;
   * `downAfter` of them in a row are an outage. A slow answer is waited for: under a burst, Redis
   * (or this event loop) answering late is not an outage, and counting locally then would admit
   * every instance's whole local bucket on top of the shared one.
   */
  timeoutMs: number
  /** Consecutive timeouts that make an outage (default 3). A refused or closed connection is one at once. */
  downAfter?: number
  /** After a failure, how long requests use the local bucket before Redis is tried again. */
  retryMs: number
}

/** Where a bucket shared without Redis is taken: core's shared state on the database. */
export interface BucketStore {
  take(key: string, s: BucketSettings): Promise<Take>
}

/**
 * The gateway limiter (spec 3 "rateLimit.requestsPerMinute, rateLimit.burstSize"): the shared
 * Redis bucket when Redis is configured, else the same bucket in the database every instance
 * shares (one upsert per request, core/shared.ts), else (`redis.url: ''`) a local one. An outage of
 * the shared store degrades to the local bucket (one warning per outage, a failing
 * `rate_limit_redis` check with Redis) and never refuses a request because the store is away.
 */
export class GatewayLimiter implements Limiter {
  private local: LocalBuckets
  private redis?: RedisClient
  private sha?: string
  private downUntil = 0
  private loading?: Promise<string>
  /** Whether Redis went silent, as opposed to answering late (core/silence.ts). */
  private watch?: SilenceWatch
  /** The last failure of the shared store, while degraded. */
  lastError?: string

  constructor(
    private s: BucketSettings,
    private log: Logger,
    private shared?: SharedOptions,
    private database?: BucketStore & { prefix: string },
  ) {
    this.local = new LocalBuckets(s)
    if (shared) this.watch = new SilenceWatch(shared.timeoutMs, shared.downAfter ?? 3)
    if (shared)
      // No reconnecting of its own (`connected` connects again when the last connection is gone):
      // a refused Redis then fails at once, where the client's own retries held a request's retry
      // of Redis, and every health read, for the whole bound (timeout_ms x 3).
      this.redis = new RedisClient(shared.url, {
        connectionTimeout: Math.max(200, shared.timeoutMs * 4),
        autoReconnect: false,
        maxRetries: 0,
        enableOfflineQueue: false,
      })
  }

  get enabled(): boolean {
    return this.s.requestsPerMinute > 0 && this.s.burstSize > 0
  }

  /** `shared` while Redis (or the database) answers, `local` when there is neither or it is down. */
  get mode(): 'shared' | 'local' {
    return (this.redis || this.database) && !this.lastError ? 'shared' : 'local'
  }

  async hit(key: string): Promise<RateDecision> {
    const now = Date.now()
    const take = (await this.sharedTake(key, now)) ?? this.local.take(key, now)
    return bucketDecision(this.s, take, now)
  }

  /** The shared bucket's answer; undefined while the shared store is down (or there is none). */
  private async sharedTake(key: string, now: number): Promise<Take | undefined> {
    if ((!this.redis && !this.database) || now < this.downUntil) return undefined
    try {
      const take = this.redis
        ? await this.redisTake(key)
        : await this.database!.take(`${this.database!.prefix}${key}`, this.s)
      if (!take) return undefined
      if (this.lastError) {
        this.log.warn('rate limiter: the shared store answers again; the bucket is shared again')
        this.lastError = undefined
      }
      return take
    } catch (e) {
      this.degrade(e, now)
      return undefined
    }
  }

  /** Redis's answer, however late, unless Redis went silent (an outage) or another request found it so. */
  private async redisTake(key: string): Promise<Take | undefined> {
    try {
      return await this.watch!.wait(this.remote(key), () => Date.now() < this.downUntil)
    } catch (e) {
      throw new Error(`Redis: ${(e as Error).message}`)
    }
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
      this.log.warn(
        `rate limiter: ${this.redis ? 'Redis' : 'the database'} unavailable, limiting per instance until it answers`,
        {
          error: message,
        },
      )
    this.lastError = message
    this.downUntil = now + (this.shared?.retryMs ?? 1000)
  }

  private async connected(): Promise<RedisClient> {
    const r = this.redis!
    if (!r.connected) await r.connect()
    return r
  }

  private async remote(key: string): Promise<Take> {
    // Each step's reply counts as Redis answering: a take is three round trips on a new connection.
    const r = await this.watch!.heard(this.connected())
    const perMs = String(this.s.requestsPerMinute / 60_000)
    const args = ['1', `${this.shared!.prefix}${key}`, perMs, String(this.s.burstSize)]
    // One SCRIPT LOAD for requests arriving together: 150 of them at a cold start went out one
    // after another (a second through a 5 ms link), each request waiting for its own.
    if (!this.sha) {
      this.loading ??= this.watch!.heard(r.send('SCRIPT', ['LOAD', BUCKET_SCRIPT]))
        .then(String)
        .finally(() => {
          this.loading = undefined
        })
      this.sha = await this.loading
    }
    let out: unknown
    try {
      out = await this.watch!.heard(r.send('EVALSHA', [this.sha, ...args]))
    } catch (e) {
      // A restarted Redis has forgotten the script.
      if (!String((e as Error).message).includes('NOSCRIPT')) throw e
      out = await r.send('EVAL', [BUCKET_SCRIPT, ...args])
    }
    const [allowed, tokens] = out as [number, string]
    return { allowed: Number(allowed) === 1, tokens: Number(tokens) }
  }

  /** The health check's bound: as long as an outage takes to be declared. */
  private withTimeout<T>(p: Promise<T>): Promise<T> {
    const ms = (this.shared?.timeoutMs ?? 100) * (this.shared?.downAfter ?? 3)
    let timer: Timer | undefined
    return Promise.race([
      p,
      new Promise<T>((_, rej) => {
        timer = setTimeout(() => rej(new Error(`Redis did not answer within ${ms} ms`)), ms)
      }),
    ]).finally(() => clearTimeout(timer))
  }
}
