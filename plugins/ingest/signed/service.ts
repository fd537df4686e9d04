import type { Db } from '../../../core/db'
import { HttpError, readBounded } from '../../../core/http'
import type { Logger } from '../../../core/log'
import { type RateDecision, RateLimiter } from '../../../core/ratelimit'
import type { SharedState } from '../../../core/shared'
import { TOO_DEEP, exceedsJsonDepth } from '../../../core/strict'
import type { Environment, GamesService } from '../../games/types'
import type { GroupWriter } from '../persist/writer'
import type { IngestConfig } from '../schema'
import type { IngestFilter } from '../types'
import { NonceCache, replayError, signatureError, signatureHeadersError } from './signature'
import { type NormEvent, sameStreamAsPrevious, streamKey } from './validate'

const signatureHeaders = (headers: Record<string, string | undefined>) => ({
  timestamp: headers['x-timestamp'],
  nonce: headers['x-nonce'],
  signature: headers['x-signature'],
})

const tooLarge = (what: string, limit: number) =>
  new HttpError(413, 'body_too_large', `${what} is larger than ${limit} bytes`, { limit })

/**
 * Reads the raw body, refusing it by Content-Length before reading and, for a body without one,
 * as soon as it passes the limit (these native routes are not behind `listen`'s bound).
 */
export async function readBody(request: Request, limit: number): Promise<Uint8Array> {
  const declared = request.headers.get('content-length')
  if (declared !== null) {
    if (Number(declared) > limit) throw tooLarge('request body', limit)
    return request.bytes()
  }
  const body = await readBounded(request, limit)
  if (body.byteLength > limit) throw tooLarge('request body', limit)
  return body
}

/** gzip decoding with the limit applied to the decoded size, so a small bomb cannot expand without bound. */
export async function gunzip(body: Uint8Array, limit: number): Promise<Uint8Array> {
  const reader = new Blob([body as Uint8Array<ArrayBuffer>])
    .stream()
    .pipeThrough(new DecompressionStream('gzip'))
    .getReader()
  const parts: Uint8Array[] = []
  let total = 0
  try {
    for (;;) {
      const { done, value } = await reader.read()
      if (done) break
      total += value.byteLength
      if (total > limit) throw tooLarge('decoded request body', limit)
      parts.push(value)
    }
  } catch (e) {
    if (e instanceof HttpError) throw e
    throw new HttpError(400, 'invalid_payload', 'body: Content-Encoding gzip but the body is not valid gzip')
  }
  return Buffer.concat(parts)
}

/** Stateless without `stream`, so one serves every request. */
const utf8 = new TextDecoder()

/**
 * A parsed body (or NDJSON line) as it came, or 400 invalid_payload past the depth every JSON
 * route keeps (docs/security.md, "Input bounds"). These routes read their own bytes, so core's
 * check never sees them; JSON.parse does not overflow, but what recurses after it does (the
 * 64 KB event check's JSON.stringify answered 500 to 100,000 nested arrays).
 */
export function boundedDepth<T>(value: T): T {
  if (exceedsJsonDepth(value)) throw new HttpError(400, 'invalid_payload', `body: ${TOO_DEEP}`)
  return value
}

export function parseJson(body: Uint8Array): unknown {
  let value: unknown
  try {
    value = JSON.parse(utf8.decode(body))
  } catch {
    throw new HttpError(400, 'invalid_payload', 'body: malformed JSON')
  }
  return boundedDepth(value)
}

/**
 * What the ingestion routes share: signature checks, environment lookup, per-environment
 * sampling and rate limits, and the hand-over to the group-commit writer.
 */
export class Ingestor {
  readonly nonces: NonceCache
  /** See `keepNoncesIn`. */
  private noncesInStore = false
  private limiters = new Map<string, RateLimiter>()

  constructor(
    readonly config: IngestConfig,
    private sharedSecret: string,
    private games: GamesService,
    readonly writer: GroupWriter,
    readonly log: Logger,
    /** Where the replay window is shared with other instances and kept across restarts. */
    private shared?: SharedState,
  ) {
    this.nonces = new NonceCache(config.nonce_window_s * 1000)
  }

  /**
   * Why a raw body's signature is refused, or undefined when it is authentic; `gameId`
   * (X-Game-Id) picks a per-game secret.
   */
  signatureError(headers: Record<string, string | undefined>, body: Uint8Array): HttpError | undefined {
    return signatureError(
      signatureHeaders(headers),
      body,
      this.secretFor(headers),
      this.nonces,
      this.config.max_skew_s,
    )
  }

  /** `signatureError`'s checks that need no body (OTLP/gRPC asks before it reads a message). */
  signatureHeadersError(headers: Record<string, string | undefined>): HttpError | undefined {
    return signatureHeadersError(signatureHeaders(headers), this.secretFor(headers), this.config.max_skew_s)
  }

  private secretFor(headers: Record<string, string | undefined>): string | undefined {
    const gameId = headers['x-game-id']
    // The configured games' own keys only: `constructor` or `__proto__` is no game (a 500 before).
    const secrets = this.config.game_secrets
    return (gameId && Object.hasOwn(secrets, gameId) && secrets[gameId]) || this.sharedSecret
  }

  /**
   * Why a signed request may not write events of `gameId`, or undefined when it may. A game with a
   * secret of its own is written only under that secret (X-Game-Id naming it); the shared secret,
   * which ships in every game client that uses it, reaches the other games alone (it had written
   * events and refunds into a game its operator had given a secret of its own).
   */
  signedReach(headerGame: string | undefined, gameId: string): string | undefined {
    const secrets = this.config.game_secrets
    if (headerGame && Object.hasOwn(secrets, headerGame))
      return gameId === headerGame ? undefined : `must match X-Game-Id '${headerGame}'`
    if (Object.hasOwn(secrets, gameId))
      return `game '${gameId}' has a signing secret of its own: sign with it and name the game in X-Game-Id`
    return undefined
  }

  /**
   * The replay check every instance shares (and a restart keeps): run after `signatureError`
   * passed, so only authentic requests reach the shared store. This process's own window
   * (in memory) already refused replays sent to it, at no cost.
   */
  async replayAcrossInstances(headers: Record<string, string | undefined>): Promise<HttpError | undefined> {
    const nonce = headers['x-nonce']
    if (!this.shared || !nonce || this.noncesInStore) return undefined
    const ttl = this.config.nonce_window_s * 1000
    return (await this.shared.claimOnce(`ingest-nonce:${nonce}`, ttl)) ? undefined : replayError(nonce)
  }

  /** `signatureError` and `replayAcrossInstances`, thrown. */
  async verify(headers: Record<string, string | undefined>, body: Uint8Array): Promise<void> {
    const e = this.signatureError(headers, body) ?? (await this.replayAcrossInstances(headers))
    if (e) throw e
  }

  /** Environments of every (game, env) pair named; 400 naming the first unknown one with where it was named. */
  async environments(
    pairs: Array<{ gameId: string; env: string; field: string }>,
  ): Promise<Map<string, Environment>> {
    const out = new Map<string, Environment>()
    for (const p of pairs) {
      const k = streamKey(p.gameId, p.env)
      if (out.has(k)) continue
      const env = await this.games.environment(p.gameId, p.env)
      if (!env) {
        if (!(await this.games.gameExists(p.gameId)))
          throw new HttpError(400, 'unknown_game', `${p.field}.game_id: game '${p.gameId}' does not exist`, {
            field: `${p.field}.game_id`,
            gameId: p.gameId,
          })
        throw new HttpError(
          400,
          'unknown_environment',
          `${p.field}.env: game '${p.gameId}' has no environment '${p.env}'`,
          {
            field: `${p.field}.env`,
            gameId: p.gameId,
            env: p.env,
          },
        )
      }
      out.set(k, env)
    }
    return out
  }

  /**
   * Counts one request against a per-minute limit of the environment (0: unlimited) and, when
   * `burst` is set, a per-second one; 429 rate_limit_exceeded past either.
   */
  limit(perMinute: number, key: () => string, burst = 0): RateDecision | undefined {
    if (perMinute <= 0) return undefined
    const id = `${perMinute}/${burst}`
    let l = this.limiters.get(id)
    if (!l) {
      l = new RateLimiter(perMinute, burst)
      this.limiters.set(id, l)
    }
    return l.hit(key())
  }

  /**
   * Keeps each environment's sampling share. A user is kept or dropped as a whole (by a hash of
   * the user id), so DAU and funnels stay consistent; payments are never sampled.
   */
  sample(events: NormEvent[], envs: Map<string, Environment>): NormEvent[] {
    let rate = 1
    let drop: ReadonlySet<string> | undefined
    return events.filter((e, i) => {
      // A run of events of one game and environment shares its rate.
      if (!sameStreamAsPrevious(events, i)) {
        const k = streamKey(e.gameId, e.env)
        const f = this.filters.size ? this.filters.get(k) : undefined
        rate = (envs.get(k)?.settings.samplingRate ?? 1) * (f?.samplingRate ?? 1)
        drop = f?.dropEvents.size ? f.dropEvents : undefined
      }
      if (e.payment) return true
      if (drop?.has(e.event)) return false
      if (rate >= 1) return true
      if (rate <= 0) return false
      const h = e.userId ? (Bun.hash.murmur32v3(e.userId) >>> 0) / 2 ** 32 : Math.random()
      return h < rate
    })
  }

  /** Sampling filters by stream (`setFilter`): read by `sample` on every request. */
  private filters = new Map<string, IngestFilter>()

  /**
   * Sets (or, with undefined, removes) the sampling filter of one game and environment; the
   * next request already follows it.
   */
  setFilter(gameId: string, env: string, filter: IngestFilter | undefined): void {
    if (filter) this.filters.set(streamKey(gameId, env), filter)
    else this.filters.delete(streamKey(gameId, env))
  }

  /**
   * Resolves once the events are committed (the `{ok: true}` promise of the spec). With the
   * replay window kept in the event store, a signed request's nonce is committed with its events.
   */
  store(events: NormEvent[], nonce?: string): Promise<void> {
    if (!nonce || !this.noncesInStore) return this.writer.write(events)
    return this.writer.write(events, [nonce, Date.now() + this.config.nonce_window_s * 1000])
  }

  /**
   * Where the replay window outlives this process. One instance on SQLite without Redis: each
   * nonce is committed with its request's events (no extra write) and the unexpired ones are
   * loaded back here at start. Otherwise (PostgreSQL, Redis: several instances may share the
   * store) every authentic request claims its nonce in the shared state first
   * (`replayAcrossInstances`): a claim per request costs SQLite's single writer about a quarter
   * of its batch throughput (measured), so it is kept for the stores where instances share.
   */
  async keepNoncesIn(db: Db, inStore: boolean): Promise<void> {
    this.noncesInStore = inStore
    if (!inStore) return
    const now = Date.now()
    const rows = await db.all<{ nonce: string }>('SELECT nonce FROM ingest_nonces WHERE expires_at > ?', [
      now,
    ])
    for (const r of rows) this.nonces.claim(r.nonce, now)
  }
}
