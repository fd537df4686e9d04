import { t } from 'elysia'
import { REVOKED_END } from '../../../core/auth/while-trusted'
import type { Db } from '../../../core/db'
import { HttpError } from '../../../core/http'
import type { Logger } from '../../../core/log'
import { StreamSlots } from '../../../core/stream-slots'
import { HyperLogLog } from '../lib/hll'
import { MINUTE, floorTo } from '../lib/time'
import { zone } from '../lib/zone'

declare module '../../../core/plugin' {
  interface Services {
    /** The realtime stream hub of the analytics plugin (subscriber count, a tick on demand). */
    realtime: RealtimeHub
  }
}

/** `plugins.analytics.realtime` of the YAML. */
export const RealtimeConfig = t.Object(
  {
    /** Milliseconds between snapshots of each (game, environment) stream. */
    interval_ms: t.Integer({ minimum: 10, maximum: 60_000, default: 5000 }),
    /**
     * Milliseconds between `: ping` comments. Bun closes a connection idle for 10 s, and proxies
     * do the same after their own timeout, so the default keeps well below both.
     */
    heartbeat_ms: t.Integer({ minimum: 10, maximum: 8000, default: 2500 }),
    /** The `retry:` advice: how long a disconnected EventSource waits before reconnecting. */
    retry_ms: t.Integer({ minimum: 100, maximum: 600_000, default: 3000 }),
    /** Snapshots kept per stream for `Last-Event-ID` resumes (120 x 5 s: the last 10 minutes). */
    history: t.Integer({ minimum: 1, maximum: 10_000, default: 120 }),
    /** Connected clients this process holds at most; beyond: 503 with Retry-After. */
    max_clients: t.Integer({ minimum: 1, maximum: 1_000_000, default: 10_000 }),
    /**
     * Streams one caller (a user, a key) holds open at once in this process; beyond: 429 naming
     * it. Without it one viewer's streams took every one of `max_clients`.
     */
    max_clients_per_principal: t.Integer({ minimum: 1, maximum: 1_000_000, default: 16 }),
  },
  { additionalProperties: false, default: {} },
)
export type RealtimeConfig = typeof RealtimeConfig.static

export const Snapshot = t.Object({
  gameId: t.String(),
  env: t.String(),
  /** When the snapshot was computed (ISO 8601). */
  ts: t.String(),
  /** The game's today (its time zone), which `revenueToday` and `activeToday` count. */
  day: t.String(),
  onlineNow: t.Integer(),
  eventsPerMinute: t.Integer(),
  eventsThisMinute: t.Integer(),
  revenueToday: t.Number(),
  activeToday: t.Integer(),
})
export type Snapshot = typeof Snapshot.static

export const SeriesOut = t.Object({
  minutes: t.Integer(),
  points: t.Array(
    t.Object({ minute: t.String(), online: t.Integer(), events: t.Integer(), revenue: t.Number() }),
  ),
})

const num = (v: unknown) => Number(v ?? 0)

/**
 * The numbers of the realtime stream, read from rollups kept at ingest (a handful of keyed rows
 * per read, never raw events): online users from the per-minute sketches (`analytics_online`),
 * events from `analytics_minute`, revenue from the day counters (`analytics_daily`), active
 * users from the day sketch. Read from the store, so every instance sharing it shows the same.
 */
export function realtimeStore(db: Db) {
  const rows = (table: string, cols: string, s: Scope, from: number, to: number) =>
    db.all(
      `SELECT minute, ${cols} FROM ${table} WHERE game_id = ? AND env = ? AND minute >= ? AND minute <= ? ORDER BY minute`,
      [s.gameId, s.env, from, to],
    )
  return {
    /**
     * onlineNow: distinct users (heartbeat, session_start) of this minute and the one before,
     * a window a heartbeat a minute always falls in; eventsPerMinute: events of the last whole
     * minute (event time); eventsThisMinute: of this minute so far; revenueToday: successful
     * payments of the game's today (main currency unit); activeToday: distinct users who logged
     * in or started a session today.
     */
    async snapshot(s: Scope, timezone: string | undefined, now: number): Promise<Snapshot> {
      const minute = floorTo(now, MINUTE)
      const today = zone(timezone).today(now)
      const [online, events, daily, active] = await Promise.all([
        rows('analytics_online', 'sketch', s, minute - MINUTE, minute),
        rows('analytics_minute', 'events', s, minute - MINUTE, minute),
        db.get('SELECT revenue_cents FROM analytics_daily WHERE game_id = ? AND env = ? AND day = ?', [
          s.gameId,
          s.env,
          today,
        ]),
        db.get('SELECT active FROM analytics_day_sketch WHERE game_id = ? AND env = ? AND day = ?', [
          s.gameId,
          s.env,
          today,
        ]),
      ])
      const h = new HyperLogLog()
      for (const r of online) h.merge(HyperLogLog.parse(String(r.sketch)))
      const at = (m: number) => num(events.find((r) => num(r.minute) === m)?.events)
      return {
        gameId: s.gameId,
        env: s.env,
        ts: new Date(now).toISOString(),
        day: new Date(today).toISOString().slice(0, 10),
        onlineNow: online.length ? h.count() : 0,
        eventsPerMinute: at(minute - MINUTE),
        eventsThisMinute: at(minute),
        revenueToday: num(daily?.revenue_cents) / 100,
        activeToday: num(active?.active),
      }
    },

    /** The last `minutes` minutes, this one included, oldest first; a minute without rows is zeros. */
    async series(s: Scope, minutes: number, now: number) {
      const last = floorTo(now, MINUTE)
      const first = last - (minutes - 1) * MINUTE
      const [online, counts] = await Promise.all([
        rows('analytics_online', 'online', s, first, last),
        rows('analytics_minute', 'events, revenue_cents', s, first, last),
      ])
      const byMinute = new Map<number, { online: number; events: number; revenue: number }>()
      const point = (m: number) => {
        let p = byMinute.get(m)
        if (!p) {
          p = { online: 0, events: 0, revenue: 0 }
          byMinute.set(m, p)
        }
        return p
      }
      for (const r of online) point(num(r.minute)).online = num(r.online)
      for (const r of counts) {
        const p = point(num(r.minute))
        p.events = num(r.events)
        p.revenue = num(r.revenue_cents) / 100
      }
      const points = []
      for (let m = first; m <= last; m += MINUTE)
        points.push({ minute: new Date(m).toISOString(), ...(byMinute.get(m) ?? point(m)) })
      return { minutes, points }
    },
  }
}

export interface Scope {
  gameId: string
  env: string
}

const encoder = new TextEncoder()
const PING = encoder.encode(': ping\n\n')
/** Chunks a client may leave unread before it is dropped (a minute of snapshots and pings at the defaults). */
const MAX_QUEUED = 64

interface Client {
  c: ReadableStreamDefaultController<Uint8Array>
  ch: Channel
  /** Frees what the stream holds beyond the hub (its caller's slot, `StreamSlots`). */
  release?: () => void
}

interface Entry {
  id: number
  at: number
  bytes: Uint8Array
}

/** One (game, environment) stream: its subscribers and the snapshots they were sent. */
class Channel {
  readonly subscribers = new Set<Client>()
  readonly history: Entry[] = []
  pending: Promise<void> | undefined
  idleSince = 0
  constructor(readonly scope: Scope) {}
  get latest(): Entry | undefined {
    return this.history[this.history.length - 1]
  }
}

/** What the hub needs to compute a snapshot; undefined when the game no longer exists. */
export type Compute = (s: Scope, now: number) => Promise<Snapshot | undefined>

/**
 * The realtime fan-out. Per (game, environment) one channel: every tick computes its snapshot
 * once (when it has subscribers), encodes the SSE frame once, keeps it in a bounded history and
 * enqueues the same bytes to every subscriber. Ids are the tick time in ms, bumped to stay
 * strictly increasing, so they stay monotonic across restarts and mean the same on every
 * instance: a `Last-Event-ID` inside the history replays what the client missed, anything else
 * (older, unknown, from another instance's future) gets a fresh snapshot instead.
 */
export class RealtimeHub {
  /** The hub's clock: snapshot times, ids and the minute a snapshot reads. Tests set it. */
  clock: () => number = Date.now
  private channels = new Map<string, Channel>()
  private count = 0
  private timers: Timer[] = []
  /** The streams each caller holds open (`max_clients_per_principal`); the route takes a slot before `open`. */
  readonly slots = new StreamSlots(() => this.settings.max_clients_per_principal, 'realtime')

  constructor(
    private settings: RealtimeConfig,
    private compute: Compute,
    private log: Logger,
  ) {}

  start(): void {
    this.timers.push(
      setInterval(() => void this.tick(), this.settings.interval_ms),
      setInterval(() => this.heartbeat(), this.settings.heartbeat_ms),
    )
  }

  /** Stops the timers and ends every stream. */
  stop(): void {
    for (const timer of this.timers.splice(0)) clearInterval(timer)
    for (const ch of this.channels.values()) for (const client of ch.subscribers) this.drop(client, 'close')
    this.channels.clear()
  }

  /** Connected clients in this process. */
  clients(): number {
    return this.count
  }

  /** One snapshot per channel with subscribers; channels idle past their history are forgotten. */
  async tick(): Promise<void> {
    const now = this.clock()
    const keep = Math.max(60_000, this.settings.history * this.settings.interval_ms)
    const work: Promise<void>[] = []
    for (const [k, ch] of this.channels) {
      if (ch.subscribers.size) work.push(this.refresh(ch))
      else if (now - ch.idleSince > keep) this.channels.delete(k)
    }
    await Promise.all(work)
  }

  /** `: ping` to every client, the same bytes for all. */
  heartbeat(): void {
    for (const ch of this.channels.values()) for (const client of ch.subscribers) this.write(client, PING)
  }

  /**
   * A new subscriber's stream: `retry:` advice, then what it missed (a `Last-Event-ID` inside
   * the history) or the latest snapshot (computed now when none is fresh). Throws 503 with
   * Retry-After once the process holds `max_clients`.
   */
  open(
    scope: Scope,
    lastEventId: string | undefined,
    signal?: AbortSignal,
    /** Fires when the caller's credential no longer holds: the stream ends (`event: end`). */
    revoked?: AbortSignal,
    /** Called once when the stream ends, however it ends. */
    release?: () => void,
  ): ReadableStream<Uint8Array> {
    if (this.count >= this.settings.max_clients) {
      const retry = Math.ceil(this.settings.retry_ms / 1000)
      throw new HttpError(
        503,
        'service_unavailable',
        `this server holds its maximum of ${this.settings.max_clients} realtime clients; retry later`,
        { retry_after: retry, max_clients: this.settings.max_clients },
        { 'retry-after': String(retry) },
      )
    }
    let client: Client | undefined
    const stream = new ReadableStream<Uint8Array>(
      {
        start: (c) => {
          client = this.subscribe(scope, c, lastEventId)
          client.release = release
          signal?.addEventListener('abort', () => client && this.drop(client, 'gone'), { once: true })
          revoked?.addEventListener(
            'abort',
            () => {
              if (!client) return
              this.write(client, encoder.encode(REVOKED_END))
              this.drop(client, 'close')
            },
            { once: true },
          )
        },
        cancel: () => {
          if (client) this.drop(client, 'gone')
        },
      },
      { highWaterMark: 1 },
    )
    return stream
  }

  private subscribe(scope: Scope, c: Client['c'], lastEventId: string | undefined): Client {
    const k = `${scope.gameId}\u0001${scope.env}`
    let ch = this.channels.get(k)
    if (!ch) {
      ch = new Channel(scope)
      this.channels.set(k, ch)
    }
    const client: Client = { c, ch }
    ch.subscribers.add(client)
    this.count++
    this.write(client, encoder.encode(`retry: ${this.settings.retry_ms}\n\n`))
    const latest = ch.latest
    const fresh = latest !== undefined && this.clock() - latest.at < this.settings.interval_ms
    if (lastEventId !== undefined) {
      const from = /^[0-9]{1,16}$/.test(lastEventId) ? Number(lastEventId) : Number.NaN
      const oldest = ch.history[0]
      if (latest && oldest && from >= oldest.id && from <= latest.id) {
        const missed = ch.history.filter((e) => e.id > from)
        this.write(client, encoder.encode(`: resumed after ${from}: ${missed.length} missed snapshot(s)\n\n`))
        for (const e of missed) this.write(client, e.bytes)
        if (!fresh) void this.refresh(ch)
        return client
      }
      const kept = oldest ? `the history holds ids ${oldest.id} to ${latest?.id}` : 'no history yet'
      // Only an id is echoed: the value comes from the query too, and a line break in it would
      // end the comment and write events of the caller's making into the stream.
      const asked = Number.isNaN(from) ? 'that is not a snapshot id' : from
      this.write(
        client,
        encoder.encode(`: Last-Event-ID ${asked} not resumable (${kept}): fresh snapshot\n\n`),
      )
    }
    if (fresh) this.write(client, latest.bytes)
    else void this.refresh(ch)
    return client
  }

  /** Computes and sends one snapshot of a channel; concurrent callers share the computation. */
  private refresh(ch: Channel): Promise<void> {
    ch.pending ??= (async () => {
      try {
        const now = this.clock()
        const snap = await this.compute(ch.scope, now)
        if (!snap) return this.end(ch)
        const id = Math.max(now, (ch.latest?.id ?? 0) + 1)
        const bytes = encoder.encode(`id: ${id}\nevent: snapshot\ndata: ${JSON.stringify(snap)}\n\n`)
        ch.history.push({ id, at: now, bytes })
        if (ch.history.length > this.settings.history) ch.history.shift()
        for (const client of ch.subscribers) this.write(client, bytes)
      } catch (e) {
        // The next tick tries again; the clients keep their pings meanwhile.
        this.log.error('realtime snapshot failed', { ...ch.scope, error: String(e) })
      } finally {
        ch.pending = undefined
      }
    })()
    return ch.pending
  }

  /** The game is gone: its clients get `event: end` and are closed; a reconnect meets the 404. */
  private end(ch: Channel) {
    const bytes = encoder.encode(
      `event: end\ndata: ${JSON.stringify({ error: 'not_found', message: `game '${ch.scope.gameId}' not found` })}\n\n`,
    )
    for (const client of ch.subscribers) {
      this.write(client, bytes)
      this.drop(client, 'close')
    }
    this.channels.delete(`${ch.scope.gameId}\u0001${ch.scope.env}`)
  }

  private write(client: Client, bytes: Uint8Array) {
    // A client that reads nothing for a minute is dropped rather than buffered without bound.
    if ((client.c.desiredSize ?? 0) < -MAX_QUEUED) return this.drop(client, 'error')
    try {
      client.c.enqueue(bytes)
    } catch {
      this.drop(client, 'gone')
    }
  }

  /** Unsubscribes once; `close` ends the stream after what is queued, `error` at once. */
  private drop(client: Client, how: 'close' | 'error' | 'gone') {
    const { ch } = client
    if (!ch.subscribers.delete(client)) return
    this.count--
    client.release?.()
    if (!ch.subscribers.size) ch.idleSince = this.clock()
    try {
      if (how === 'close') client.c.close()
      else if (how === 'error') client.c.error(new Error('realtime client too slow'))
    } catch {
      // Already closed by the other side.
    }
  }
}
