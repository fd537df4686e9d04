import type { Db, Param } from '../../../core/db'
import type { Derivation, Gathered as RollupBatch } from '../../../core/derive'
import type { LogEvent as NormEvent } from '../../../core/event-log-types'
import { inOrder } from '../../../core/order'
import { GAME_EVENTS, countGame } from '../game/game-rollup'
import { HyperLogLog } from '../lib/hll'
import { DAY, HOUR, MINUTE, floorTo, histBucket } from '../lib/time'
import { type Zone, zone } from '../lib/zone'
import { mondayOf } from '../server/cohort'
import { resetAnalytics } from './reset'
import { type Early, earlyAnalytics, writeAnalytics } from './write'

/** DAU from `login` and `session_start`; online from `heartbeat` and `session_start` (upstream). */
const DAU_EVENTS = new Set(['login', 'session_start'])
const ONLINE_EVENTS = new Set(['heartbeat', 'session_start'])
/** Bounded membership caches: clearing one only costs a few redundant conflict checks. */
const CACHE_CAP = 2_000_000
const SKETCH_CAP = 4096
const sep = '\u0001'

type Sketch = { h: HyperLogLog; v: number }
type SketchTable = 'analytics_online' | 'analytics_day_sketch'

/**
 * One game and environment. What is known to be stored is cached per stream, keyed by the user
 * id alone, so a lookup hashes a short string the parser made instead of building a joined key.
 */
export class Stream {
  /** Users whose first-seen row is stored. */
  readonly seen = new Set<string>()
  /** Per day, users whose user-day row is stored. */
  readonly days = new Map<number, Set<string>>()
  /** Online sketches by minute; the rollup bounds their number across streams. */
  readonly sketches = new Map<number, Sketch>()
  /** Active-user sketches by local day (distinct users over any span of days: MAU, overview). */
  readonly daySketches = new Map<number, Sketch>()
  constructor(
    readonly gameId: string,
    readonly env: string,
    /** The game's time zone: its days. */
    public zone: Zone,
  ) {}
}

interface Slot {
  /** The minute's sketch, once known; else the visitors waiting for it to load. */
  sk: Sketch | undefined
  whos: string[]
  /**
   * Whether this commit changed a register. Once a minute's sketch fills, most visitors change
   * none; an unchanged sketch is not written again (its stored row already says the same).
   */
  changed: boolean
}

/** What one commit gathers for one stream. */
export class Part {
  /** user -> earliest ts */
  readonly firstSeen = new Map<string, number>()
  /** day -> users */
  readonly userDays = new Map<number, Set<string>>()
  /** hour -> function -> [total, failed, duration sum, duration n] */
  readonly hours = new Map<number, Map<string, [number, number, number, number]>>()
  /** hour -> bucket -> n */
  readonly hist = new Map<number, Map<number, number>>()
  /** minute -> sketch */
  readonly online = new Map<number, Slot>()
  /** local day -> sketch of its active users */
  readonly active = new Map<number, Slot>()
  /** Counters of the game analytics: `day|metric|dim` and `hour|metric|dim` -> [n, total, first ts, last ts]. */
  readonly gameDays = new Map<string, Stat>()
  readonly gameHours = new Map<string, Stat>()
  /** order \u0001 status -> [local day, kind, platform] of the commit's payments. */
  readonly payments = new Map<string, [number, string, string]>()
  /** Users who did something social (friend_add, guild_join, invite) -> earliest ts. */
  readonly social = new Map<string, number>()
  /** user -> platform named by their session_start. */
  readonly platforms = new Map<string, string>()
  constructor(readonly s: Stream) {}
}

type Stat = [n: number, total: number, first: number, last: number]

/** A commit's rows for the write half (`write.ts`), each table's values one row after another, keys in order. */
export interface AnalyticsRows {
  /** game, env, user, first ts, its local day */
  firstSeen: Param[]
  userDays: Param[]
  hours: Param[]
  hist: Param[]
  online: Param[]
  /** game, env, local day, estimate, sketch, version */
  activeDays: Param[]
  /** game, env, local day, metric, dim, n, total, first ts, last ts */
  gameDays: Param[]
  /** game, env, UTC hour, metric, dim, n, total, first ts, last ts */
  gameHours: Param[]
  /** game, env, order, status, local day, kind, platform: what the write half needs of the payments that turn out new */
  payments: Param[]
  /** game, env, user, first ts */
  social: Param[]
  /** game, env, user, platform */
  platforms: Param[]
}

/**
 * The analytics consumer of the event log (performance note 3): first sight and user-days (DAU
 * and new users per day, counted into `analytics_daily` with revenue from the payments),
 * per-minute online and per-day active HyperLogLog sketches, game counters, and invocation
 * counters and duration histograms per hour. Caches of what is stored keep most repeated keys
 * out of a batch; the keys decide.
 */
export class AnalyticsRollup implements Derivation<AnalyticsRows, Early> {
  readonly name = 'analytics'
  readonly write = writeAnalytics
  readonly early = earlyAnalytics
  private db: Db | undefined
  /** game -> env -> stream */
  private streams = new Map<string, Map<string, Stream>>()
  private seenSize = 0
  private userDaysSize = 0
  /** Every cached sketch, oldest first, for eviction: `table \u0001 game \u0001 env \u0001 key` -> owner. */
  private sketchOrder = new Map<string, { cache: Map<number, Sketch>; key: number }>()
  private loadingSketches = new Map<string, Promise<Sketch>>()

  /** Time zone by game; forgotten when the game changes. */
  private zones = new Map<string, Zone>()

  constructor(
    /** The game's time zone (the games service); undefined: UTC. */
    private timezone: (gameId: string) => Promise<string | undefined> = async () => undefined,
  ) {}

  /** Every cache of what is stored (a batch rolled back, or another instance wrote). */
  forget(): void {
    this.streams.clear()
    this.sketchOrder.clear()
    this.seenSize = 0
    this.userDaysSize = 0
  }

  /** Deletes what the consumer derived, for event times at or after `from` (all when undefined). */
  async reset(from: number | undefined, tx: Db): Promise<void> {
    await resetAnalytics(tx, from)
  }

  /** A game's time zone changed or it was deleted: its next events look it up again. */
  forgetGame(gameId: string): void {
    this.zones.delete(gameId)
    const byEnv = this.streams.get(gameId)
    if (byEnv) for (const st of byEnv.values()) st.zone = zone(undefined)
    this.streams.delete(gameId)
  }

  async init(db: Db): Promise<void> {
    this.db = db
  }

  /**
   * Per-user and per-minute detail past retention goes; day and hour counters stay. Logged
   * user-days are left to their merge, which counts them; the next purge takes them.
   */
  async purge(db: Db, s: { gameId: string; env: string }, cutoff: number): Promise<number> {
    const days = await db.run('DELETE FROM analytics_user_day WHERE game_id = ? AND env = ? AND day < ?', [
      s.gameId,
      s.env,
      floorTo(cutoff, DAY),
    ])
    const minutes = await db.run(
      'DELETE FROM analytics_online WHERE game_id = ? AND env = ? AND minute < ?',
      [s.gameId, s.env, cutoff],
    )
    // User-weeks wholly before the cutoff's week; the cohort counters stay.
    const weeks = await db.run('DELETE FROM analytics_user_week WHERE game_id = ? AND env = ? AND week < ?', [
      s.gameId,
      s.env,
      mondayOf(floorTo(cutoff, DAY)),
    ])
    return days + minutes + weeks
  }

  private stream(gameId: string, env: string): Stream {
    let byEnv = this.streams.get(gameId)
    if (!byEnv) {
      byEnv = new Map()
      this.streams.set(gameId, byEnv)
    }
    let st = byEnv.get(env)
    if (!st) {
      st = new Stream(gameId, env, this.zones.get(gameId) ?? zone(undefined))
      byEnv.set(env, st)
    }
    return st
  }

  private *allStreams(): Generator<Stream> {
    for (const byEnv of this.streams.values()) yield* byEnv.values()
  }

  gather(events: readonly NormEvent[]): RollupBatch<AnalyticsRows> | Promise<RollupBatch<AnalyticsRows>> {
    // Time zones of games not seen yet are looked up first (once per game).
    let missing: string[] | undefined
    let last = ''
    for (const e of events)
      if (e.gameId !== last) {
        last = e.gameId
        if (!this.zones.has(last) && !missing?.includes(last)) {
          missing ??= []
          missing.push(last)
        }
      }
    if (missing)
      return Promise.all(
        missing.map(async (g) => {
          this.zones.set(g, zone(await this.timezone(g)))
          this.streams.delete(g)
        }),
      ).then(() => this.gather(events))
    const parts = this.parts(events)
    const loads: Promise<void>[] = []
    const load = (p: Part, slots: Map<number, Slot>, table: SketchTable) => {
      for (const [key, slot] of slots)
        if (!slot.sk)
          loads.push(
            this.sketch(p.s, key, table).then((sk) => {
              for (const who of slot.whos) if (sk.h.add(who)) slot.changed = true
              slot.sk = sk
            }),
          )
    }
    for (const p of parts) {
      load(p, p.online, 'analytics_online')
      load(p, p.active, 'analytics_day_sketch')
    }
    const batch = () => ({ rows: rows(parts), done: () => this.remember(parts) })
    return loads.length ? Promise.all(loads).then(batch) : batch()
  }

  /** One pass over the events: each stream's keys not yet known to be stored, in stream order. */
  private parts(events: readonly NormEvent[]): Part[] {
    const parts = new Map<Stream, Part>()
    let part: Part | undefined
    let lastGame = ''
    let lastEnv = ''
    for (let i = 0; i < events.length; i++) {
      const e = events[i]
      const { gameId, env, userId, ts } = e
      // Consecutive events of one game and environment share the stream and its part.
      if (part === undefined || gameId !== lastGame || env !== lastEnv) {
        const st = this.stream(gameId, env)
        part = parts.get(st)
        if (!part) {
          part = new Part(st)
          parts.set(st, part)
        }
        lastGame = gameId
        lastEnv = env
      }
      const st = part.s
      if (e.event === 'function.invoke') countInvocation(part, e)
      else if (GAME_EVENTS.has(e.event) || e.payment) countGame(part, e)
      if (userId) {
        if (!st.seen.has(userId)) {
          const prev = part.firstSeen.get(userId)
          if (prev === undefined || ts < prev) part.firstSeen.set(userId, ts)
        }
        if (DAU_EVENTS.has(e.event)) {
          const day = st.zone.day(ts)
          let slot = part.active.get(day)
          if (!slot) {
            slot = { sk: st.daySketches.get(day), whos: [], changed: false }
            part.active.set(day, slot)
          }
          if (!slot.sk) slot.whos.push(userId)
          else if (slot.sk.h.add(userId)) slot.changed = true
          if (!st.days.get(day)?.has(userId)) {
            let users = part.userDays.get(day)
            if (!users) {
              users = new Set()
              part.userDays.set(day, users)
            }
            users.add(userId)
          }
        }
      }
      const who = userId ?? e.sessionId
      if (who && ONLINE_EVENTS.has(e.event)) {
        const minute = floorTo(ts, MINUTE)
        // Cached sketches are updated in place; missing ones are loaded once per commit, so
        // the loop never suspends per event.
        let slot = part.online.get(minute)
        if (!slot) {
          slot = { sk: st.sketches.get(minute), whos: [], changed: false }
          part.online.set(minute, slot)
        }
        if (!slot.sk) slot.whos.push(who)
        else if (slot.sk.h.add(who)) slot.changed = true
      }
    }
    const ordered = [...parts.values()]
    if (ordered.length > 1) ordered.sort((a, b) => cmp(a.s.gameId, b.s.gameId) || cmp(a.s.env, b.s.env))
    return ordered
  }

  /** The cached sketch of a minute (or a day); concurrent commits share one load and one object. */
  private sketch(st: Stream, key: number, table: SketchTable): Promise<Sketch> {
    const cache = table === 'analytics_online' ? st.sketches : st.daySketches
    const hit = cache.get(key)
    if (hit) return Promise.resolve(hit)
    const k = `${table}${sep}${st.gameId}${sep}${st.env}${sep}${key}`
    let loading = this.loadingSketches.get(k)
    if (!loading) {
      const db = this.db
      if (!db) return Promise.reject(new Error('analytics rollup used before init'))
      loading = db
        .get<{ sketch: string; version: number }>(
          `SELECT sketch, version FROM ${table} WHERE game_id = ? AND env = ? AND ${table === 'analytics_online' ? 'minute' : 'day'} = ?`,
          [st.gameId, st.env, key],
        )
        .then((row) => {
          const sk = {
            h: row ? HyperLogLog.parse(row.sketch) : new HyperLogLog(),
            v: Number(row?.version ?? 0),
          }
          // Oldest first out: sketches are persisted on every commit, so eviction loses nothing.
          if (this.sketchOrder.size >= SKETCH_CAP) {
            const [oldest, owner] = this.sketchOrder.entries().next().value!
            this.sketchOrder.delete(oldest)
            owner.cache.delete(owner.key)
          }
          this.sketchOrder.set(k, { cache, key })
          cache.set(key, sk)
          return sk
        })
        .finally(() => this.loadingSketches.delete(k))
      this.loadingSketches.set(k, loading)
    }
    return loading
  }

  /** After a successful commit: what it stored is known from now on. */
  private remember(ordered: Part[]) {
    let fresh = 0
    let active = 0
    for (const p of ordered) {
      fresh += p.firstSeen.size
      for (const users of p.userDays.values()) active += users.size
    }
    if (this.seenSize + fresh > CACHE_CAP) {
      for (const st of this.allStreams()) st.seen.clear()
      this.seenSize = 0
    }
    if (this.userDaysSize + active > CACHE_CAP) {
      for (const st of this.allStreams()) st.days.clear()
      this.userDaysSize = 0
    }
    for (const { s: st, firstSeen: users, userDays: days } of ordered) {
      const before = st.seen.size
      for (const user of users.keys()) st.seen.add(user)
      this.seenSize += st.seen.size - before
      for (const [day, users] of days) {
        let known = st.days.get(day)
        if (!known) {
          known = new Set()
          st.days.set(day, known)
        }
        const had = known.size
        for (const user of users) known.add(user)
        this.userDaysSize += known.size - had
      }
    }
  }
}

const cmp = (x: string, y: string) => (x < y ? -1 : x > y ? 1 : 0)

function countInvocation(part: Part, e: NormEvent) {
  const { functionId: fn, outcome } = e.invocation ?? { functionId: 'unknown', outcome: 'success' }
  const hour = floorTo(e.ts, HOUR)
  let fns = part.hours.get(hour)
  if (!fns) {
    fns = new Map()
    part.hours.set(hour, fns)
  }
  let h = fns.get(fn)
  if (!h) {
    h = [0, 0, 0, 0]
    fns.set(fn, h)
  }
  h[0]++
  if (outcome === 'failure') h[1]++
  const dur = e.durationMs
  if (dur !== null) {
    h[2] += dur
    h[3]++
    let buckets = part.hist.get(hour)
    if (!buckets) {
      buckets = new Map()
      part.hist.set(hour, buckets)
    }
    const b = histBucket(dur)
    buckets.set(b, (buckets.get(b) ?? 0) + 1)
  }
}

/** The rollup rows of a commit, stream by stream, keys in order. */
function rows(ordered: Part[]): AnalyticsRows {
  const out: AnalyticsRows = {
    firstSeen: [],
    userDays: [],
    hours: [],
    hist: [],
    online: [],
    activeDays: [],
    gameDays: [],
    gameHours: [],
    payments: [],
    social: [],
    platforms: [],
  }
  for (const p of ordered) {
    const { gameId: g, env } = p.s
    for (const hour of inOrder(p.hours)) {
      const fns = p.hours.get(hour)!
      for (const fn of inOrder(fns)) {
        const h = fns.get(fn)!
        out.hours.push(g, env, hour, fn, h[0], h[1], h[2], h[3])
      }
    }
    for (const hour of inOrder(p.hist)) {
      const buckets = p.hist.get(hour)!
      for (const b of inOrder(buckets)) out.hist.push(g, env, hour, b, buckets.get(b)!)
    }
    for (const user of inOrder(p.firstSeen)) {
      const ts = p.firstSeen.get(user)!
      out.firstSeen.push(g, env, user, ts, p.s.zone.day(ts))
    }
    for (const k of inOrder(p.gameDays)) {
      const [day, metric, dim] = k.split('\u0001')
      const v = p.gameDays.get(k)!
      out.gameDays.push(g, env, Number(day), metric, dim, v[0], v[1], v[2], v[3])
    }
    for (const k of inOrder(p.gameHours)) {
      const [hour, metric, dim] = k.split('\u0001')
      const v = p.gameHours.get(k)!
      out.gameHours.push(g, env, Number(hour), metric, dim, v[0], v[1], v[2], v[3])
    }
    for (const k of inOrder(p.payments)) {
      const [order, status] = k.split('\u0001')
      out.payments.push(g, env, order, status, ...p.payments.get(k)!)
    }
    for (const user of inOrder(p.social)) out.social.push(g, env, user, p.social.get(user)!)
    for (const user of inOrder(p.platforms)) out.platforms.push(g, env, user, p.platforms.get(user)!)
    for (const day of inOrder(p.userDays)) {
      const users = [...p.userDays.get(day)!]
      if (users.length > 1) users.sort()
      for (const user of users) out.userDays.push(g, env, day, user)
    }
    // Each write of a sketch carries a new version, so a slower concurrent commit holding an
    // older snapshot of the same minute cannot overwrite a newer one.
    for (const minute of inOrder(p.online)) {
      const slot = p.online.get(minute)!
      if (!slot.changed) continue
      const sk = slot.sk!
      sk.v++
      out.online.push(g, env, minute, sk.h.count(), sk.h.serialize(), sk.v)
    }
    for (const day of inOrder(p.active)) {
      const slot = p.active.get(day)!
      if (!slot.changed) continue
      const sk = slot.sk!
      sk.v++
      out.activeDays.push(g, env, day, sk.h.count(), sk.h.serialize(), sk.v)
    }
  }
  return out
}
