import { signRequest } from './sign'
import { uuidv7 } from './uuid'

/**
 * The liveops client SDK: queues events, sends them in batches (signed with the shared secret or
 * the game's own secret, or with an API key to `/v1/batch`), retries failures with exponential
 * backoff and jitter, and flushes when the page is hidden or the process ends. No server imports:
 * browsers and Bun.
 */
export interface ClientOptions {
  /** Base address, for example `https://liveops.example.com`. */
  endpoint: string
  gameId: string
  env: string
  /** Signing secret (server-to-server or trusted clients): events go to `/api/ingest/events`. */
  secret?: string
  /**
   * `secret` is this game's own secret (the server's per-game `game_secrets`), not the shared one:
   * every signed request carries `X-Game-Id: <gameId>`, by which the server picks the secret and
   * holds every event to that game (default false).
   */
  perGameSecret?: boolean
  /** API key bound to the game and environment: events go to `/v1/batch`. */
  apiKey?: string
  /** Events per request (default 100; `/v1/batch` takes at most 500). */
  batchSize?: number
  /** Flush at least this often while events wait (default 1000 ms; 0: only on size or flush()). */
  flushIntervalMs?: number
  /** Attempts after the first for a retryable failure (network, 5xx, 429); default 5. */
  maxRetries?: number
  /**
   * First backoff delay, doubled per attempt and capped at 30 s (default 200 ms); each wait is
   * drawn between half of it and all of it (see `retryDelay`), or is the server's Retry-After if longer.
   */
  backoffMs?: number
  /** Oldest events are dropped past this many queued (default 10,000). */
  maxQueue?: number
  /** For tests and custom transports. */
  fetch?: (input: string, init: RequestInit) => Promise<Response>
  /** For tests: waits between attempts (default a timer). */
  sleep?: (ms: number) => Promise<void>
  /** Called with each batch that was given up on. */
  onError?: (error: Error, events: number) => void
  /**
   * Flush on page hide, or in Bun and Node when the process runs out of work (`beforeExit`; not on
   * `process.exit()` or a signal); default true.
   */
  flushOnExit?: boolean
}

export type Attrs = Record<string, unknown>

interface Queued {
  kind: 'event' | 'payment'
  body: Attrs
}

export class ClientError extends Error {
  constructor(
    message: string,
    readonly status: number,
    readonly retryable: boolean,
    readonly retryAfterMs?: number,
  ) {
    super(message)
  }
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms))

/** Longest backoff between two attempts. */
export const MAX_BACKOFF_MS = 30_000

/**
 * The wait after failed attempt `attempt` (0 for the first) with no Retry-After: exponential,
 * `backoffMs * 2^attempt` capped at `MAX_BACKOFF_MS`, with jitter drawn by `random` (in [0, 1))
 * over its upper half.
 */
export function retryDelay(attempt: number, backoffMs: number, random: () => number = Math.random): number {
  const backoff = Math.min(MAX_BACKOFF_MS, backoffMs * 2 ** attempt)
  return backoff / 2 + random() * (backoff / 2)
}

export class LiveopsClient {
  private queue: Queued[] = []
  private timer: ReturnType<typeof setTimeout> | undefined
  private inflight: Promise<void> = Promise.resolve()
  private userId: string | undefined
  private readonly opts: Required<Omit<ClientOptions, 'secret' | 'apiKey' | 'fetch' | 'onError'>> &
    ClientOptions
  private sent = 0

  constructor(options: ClientOptions) {
    if (!options.secret && !options.apiKey) throw new Error('LiveopsClient needs a secret or an apiKey')
    if (options.perGameSecret && !options.secret) throw new Error('perGameSecret needs the secret')
    this.opts = {
      batchSize: 100,
      flushIntervalMs: 1000,
      maxRetries: 5,
      backoffMs: 200,
      maxQueue: 10_000,
      flushOnExit: true,
      perGameSecret: false,
      sleep,
      ...options,
    }
    if (this.opts.flushOnExit) this.hookExit()
  }

  /** Events acknowledged by the server so far. */
  get acknowledged(): number {
    return this.sent
  }

  identify(userId: string): void {
    this.userId = userId
  }

  /**
   * Queues one event; `ts` is now unless given (epoch ms). Each event gets an `event_id` (a
   * UUIDv7) unless `attrs` carries one: a retried batch sends the same ids, and the server stores
   * each once within its dedup window.
   */
  track(event: string, attrs: Attrs = {}, ts = Date.now()): void {
    const body: Attrs = this.opts.apiKey
      ? {
          event_id: uuidv7(),
          event_name: event,
          ts_client: ts,
          ...(this.userId ? { user_id: this.userId } : {}),
          ...attrs,
        }
      : {
          event_id: attrs.event_id ?? uuidv7(),
          event,
          ts: String(ts),
          game_id: this.opts.gameId,
          env: this.opts.env,
          ...(this.userId ? { uid: this.userId } : {}),
          attrs,
        }
    this.push({ kind: 'event', body })
  }

  /** Queues a payment event (signed mode only): status success, refunded or failed; amount in cents. */
  payment(
    p: {
      orderId: string
      status: 'success' | 'refunded' | 'failed'
      amountCents: number
      currency?: string
      attrs?: Attrs
    },
    ts = Date.now(),
  ): void {
    if (!this.opts.secret) throw new Error('payments need the signing secret')
    this.push({
      kind: 'payment',
      body: {
        event: 'payment',
        ts: String(ts),
        game_id: this.opts.gameId,
        env: this.opts.env,
        ...(this.userId ? { uid: this.userId } : {}),
        order_id: p.orderId,
        status: p.status,
        amount_cents: p.amountCents,
        ...(p.currency ? { currency: p.currency } : {}),
        attrs: p.attrs ?? {},
      },
    })
  }

  /** Sends everything queued; resolves when every batch was acknowledged or given up. */
  flush(): Promise<void> {
    if (this.timer) clearTimeout(this.timer)
    this.timer = undefined
    const items = this.queue.splice(0)
    const batches: Queued[][] = []
    for (const kind of ['event', 'payment'] as const) {
      const of = items.filter((q) => q.kind === kind)
      for (let i = 0; i < of.length; i += this.opts.batchSize)
        batches.push(of.slice(i, i + this.opts.batchSize))
    }
    const run = this.inflight.then(() =>
      Promise.all(batches.map((b) => this.sendWithRetry(b))).then(() => undefined),
    )
    this.inflight = run
    return run
  }

  /** Flushes and stops the timer. */
  close(): Promise<void> {
    this.opts.flushOnExit = false
    return this.flush()
  }

  private push(q: Queued) {
    this.queue.push(q)
    if (this.queue.length > this.opts.maxQueue) this.queue.splice(0, this.queue.length - this.opts.maxQueue)
    if (this.queue.length >= this.opts.batchSize) void this.flush()
    else if (!this.timer && this.opts.flushIntervalMs > 0)
      this.timer = setTimeout(() => void this.flush(), this.opts.flushIntervalMs)
  }

  private async sendWithRetry(batch: Queued[]): Promise<void> {
    for (let attempt = 0; ; attempt++) {
      try {
        await this.send(batch)
        this.sent += batch.length
        return
      } catch (e) {
        const err = e instanceof ClientError ? e : new ClientError(String(e), 0, true)
        if (!err.retryable || attempt >= this.opts.maxRetries) {
          this.opts.onError?.(err, batch.length)
          return
        }
        await this.opts.sleep(Math.max(err.retryAfterMs ?? 0, retryDelay(attempt, this.opts.backoffMs)))
      }
    }
  }

  /** One attempt; a fresh timestamp and nonce each time, so a retry is never a replay. */
  private async send(batch: Queued[]): Promise<void> {
    const f = this.opts.fetch ?? ((input: string, init: RequestInit) => fetch(input, init))
    const base = this.opts.endpoint.replace(/\/$/, '')
    const body = JSON.stringify(batch.map((q) => q.body))
    const headers: Record<string, string> = { 'content-type': 'application/json' }
    let path: string
    // Payments are signed whenever there is a secret: `/v1/batch` has no payment semantics.
    if (this.opts.apiKey && batch[0].kind !== 'payment') {
      path = '/v1/batch'
      headers['x-api-key'] = this.opts.apiKey
    } else {
      path = batch[0].kind === 'payment' ? '/api/ingest/payments' : '/api/ingest/events'
      Object.assign(headers, await signRequest(this.opts.secret!, body))
      if (this.opts.perGameSecret) headers['X-Game-Id'] = this.opts.gameId
    }
    const res = await f(`${base}${path}`, { method: 'POST', headers, body, keepalive: body.length < 60_000 })
    if (res.ok) return
    const text = await res.text().catch(() => '')
    const retryAfter = Number(res.headers.get('retry-after'))
    const retryable =
      res.status >= 500 || (res.status === 429 && !text.includes('duplicate_nonce')) || res.status === 408
    throw new ClientError(
      `${path} answered ${res.status}: ${text.slice(0, 300)}`,
      res.status,
      retryable,
      retryAfter > 0 ? retryAfter * 1000 : undefined,
    )
  }

  private hookExit() {
    const g = globalThis as {
      addEventListener?: (t: string, fn: () => void) => void
      process?: { once?: (t: string, fn: () => void) => void }
    }
    if (g.process?.once) g.process.once('beforeExit', () => void this.flush())
    else g.addEventListener?.('pagehide', () => void this.flush())
  }
}
