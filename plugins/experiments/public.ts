import { NotFound } from '../../core/http'
import type { PublicExperiment } from './schema'

export interface Entry {
  bytes: Uint8Array<ArrayBuffer>
  etag: string
  // Built once: a Response made from a Headers instance costs about half of one made from a plain object.
  headers: Headers
  notModified: Headers
}

export interface PublicConfigSource {
  /** The running experiments of one environment. */
  running(gameId: string, environment: string): Promise<PublicExperiment[]>
  /** Whether the game and environment exist. */
  exists(gameId: string, environment: string): Promise<boolean>
}

const key = (gameId: string, environment: string) => `${gameId}\n${environment}`

/**
 * `GET /api/config/{gameId}/{environment}`, the hottest public read: every game client polls it.
 * Each environment's answer is encoded once into bytes with an ETag whenever its experiments
 * change, so a request costs a map lookup and a Response around shared bytes, and a client
 * holding the current ETag gets an empty 304.
 *
 * Rebuilds of one environment run one after another: a rebuild starts after the write that
 * asked for it committed, so the last one to finish has read the newest state.
 */
export class PublicConfig {
  private entries = new Map<string, Entry>()
  private chains = new Map<string, Promise<unknown>>()

  /**
   * `publish` hears every change of an environment's answer (undefined: gone), so it can be
   * served without running JavaScript (ctx.staticRoute).
   */
  constructor(
    private readonly source: PublicConfigSource,
    private readonly cacheControl: string,
    private readonly publish: (
      gameId: string,
      environment: string,
      entry: Entry | undefined,
    ) => void = () => {},
  ) {}

  private set(gameId: string, environment: string, entry: Entry | undefined) {
    const k = key(gameId, environment)
    if (entry) this.entries.set(k, entry)
    else this.entries.delete(k)
    this.publish(gameId, environment, entry)
  }

  /** Queues `task` behind the other rebuilds of the same environment. */
  private serial(k: string, task: () => Promise<void>): Promise<void> {
    const next = (this.chains.get(k) ?? Promise.resolve()).then(task)
    const tail = next.catch(() => undefined)
    this.chains.set(k, tail)
    void tail.then(() => {
      if (this.chains.get(k) === tail) this.chains.delete(k)
    })
    return next
  }

  private encode(list: PublicExperiment[]): Entry {
    const bytes = new TextEncoder().encode(JSON.stringify(list))
    const etag = `"${new Bun.CryptoHasher('sha256').update(bytes).digest('base64url').slice(0, 27)}"`
    return {
      bytes,
      etag,
      headers: new Headers({ 'content-type': 'application/json', etag, 'cache-control': this.cacheControl }),
      notModified: new Headers({ etag, 'cache-control': this.cacheControl }),
    }
  }

  /**
   * Re-encodes one environment from the store; call after every committed write touching it.
   * An environment that no longer exists is forgotten (404), whatever experiments it left running.
   */
  refresh(gameId: string, environment: string): Promise<void> {
    const k = key(gameId, environment)
    return this.serial(k, async () => {
      if (!(await this.source.exists(gameId, environment))) return this.set(gameId, environment, undefined)
      this.set(gameId, environment, this.encode(await this.source.running(gameId, environment)))
    })
  }

  /** Forgets environments that were deleted (all of a game's when `environment` is absent). */
  drop(gameId: string, environment?: string): void {
    const keys =
      environment !== undefined
        ? [key(gameId, environment)]
        : [...this.entries.keys()].filter((k) => k.startsWith(`${gameId}\n`))
    for (const k of keys)
      void this.serial(k, async () => {
        const [g, e] = k.split('\n') as [string, string]
        this.set(g, e, undefined)
      })
  }

  /** Environments currently held, as [gameId, environment]. */
  cached(): Array<[string, string]> {
    return [...this.entries.keys()].map((k) => k.split('\n') as [string, string])
  }

  /** Loads every environment that has running experiments (at start). */
  async preload(pairs: Iterable<[string, string]>): Promise<void> {
    await Promise.all([...pairs].map(([g, e]) => this.refresh(g, e)))
  }

  private answer(entry: Entry, ifNoneMatch: string | null): Response {
    if (ifNoneMatch !== null && matches(ifNoneMatch, entry.etag))
      return new Response(null, { status: 304, headers: entry.notModified })
    return new Response(entry.bytes, { headers: entry.headers })
  }

  /** The answer for one environment; 404 when the game or environment does not exist. */
  serve(gameId: string, environment: string, ifNoneMatch: string | null): Response | Promise<Response> {
    const entry = this.entries.get(key(gameId, environment))
    if (entry) return this.answer(entry, ifNoneMatch)
    return this.load(gameId, environment).then((e) => this.answer(e, ifNoneMatch))
  }

  /** First read of an environment without running experiments, or after a drop. */
  private async load(gameId: string, environment: string): Promise<Entry> {
    const k = key(gameId, environment)
    await this.serial(k, async () => {
      if (this.entries.has(k)) return
      if (!(await this.source.exists(gameId, environment))) return
      this.set(gameId, environment, this.encode(await this.source.running(gameId, environment)))
    })
    const entry = this.entries.get(k)
    if (!entry) throw new NotFound(`environment '${environment}' of game '${gameId}' not found`)
    return entry
  }
}

/** RFC 9110 If-None-Match: `*`, or a list of entity tags compared weakly. */
export function matches(header: string, etag: string): boolean {
  if (header === etag) return true
  const h = header.trim()
  if (h === '*') return true
  for (const part of h.split(',')) {
    const tag = part.trim()
    if (tag === etag || (tag.startsWith('W/') && tag.slice(2) === etag)) return true
  }
  return false
}
