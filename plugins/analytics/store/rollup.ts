import type { Db } from '../../../core/db'
import type { Derivation, Gathered as RollupBatch } from '../../../core/derive'
import type { LogEvent as NormEvent, Pause } from '../../../core/event-log-types'
import { turn } from '../../../core/turn'
import { GAME_EVENTS, countGame } from '../game/game-rollup'
import { GameZones } from '../lib/game-zones'
import { HyperLogLog } from '../lib/hll'
import { MINUTE, floorTo } from '../lib/time'
import { zone } from '../lib/zone'
import { RebuildCuts, purgeAnalytics, resetAnalytics } from './reset'
import {
  type AnalyticsRows,
  type FirstDayCache,
  Part,
  type Sketch,
  type Slot,
  Stream,
  countInvocation,
  ordered,
  rows,
} from './rollup-parts'
import { type StoredSketch, loadSketchesPg } from './sketch-loads-pg'
import { type Early, earlyAnalytics, writeAnalytics } from './write'

/** DAU from `login` and `session_start`; online from `heartbeat` and `session_start` (upstream). */
const DAU_EVENTS = new Set(['login', 'session_start'])
const ONLINE_EVENTS = new Set(['heartbeat', 'session_start'])
/** Bounded membership caches: clearing one only costs a few redundant conflict checks. */
const CACHE_CAP = 2_000_000
const SKETCH_CAP = 4096
const sep = '\u0001'
/**
 * Events per part of a batch's pass between turns of the event loop (`partsInTurns`): 1,000
 * parts hold the loop 2-3 ms. With 5,000 (8-16 ms) ingestion's p99 was 54-57 ms against 47-51 at
 * 1,000, at the same rate (alternated runs, docs/performance.md); 500 measured the same as 1,000.
 */
const TURN_ROWS = 1000

type SketchTable = 'analytics_online' | 'analytics_day_sketch'
const SKETCH_TABLES = {
  analytics_online: { name: 'analytics_online', key: ['game_id', 'env', 'minute'], bigint: ['minute'] },
  analytics_day_sketch: { name: 'analytics_day_sketch', key: ['game_id', 'env', 'day'], bigint: ['day'] },
} as const
/** A sketch a batch needs that its stream has not cached. */
type Wanted = { st: Stream; key: number; table: SketchTable; slot: Slot }

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
  private firstDaysSize = 0
  private userDaysSize = 0
  /** Every cached sketch, oldest first, for eviction: `table \u0001 game \u0001 env \u0001 key` -> owner. */
  private sketchOrder = new Map<string, { cache: Map<number, Sketch>; key: number }>()
  private loadingSketches = new Map<string, Promise<Sketch>>()

  /** Moves on when streams are forgotten: a pass over a batch in turns then starts again. */
  private generation = 0

  /** Time zone by game; forgotten when the game changes. */
  private readonly zones: GameZones

  constructor(
    /** The game's time zone (the games service); undefined: UTC. */
    private timezone: (gameId: string) => Promise<string | undefined> = async () => undefined,
  ) {
    this.cuts = new RebuildCuts(timezone)
    this.zones = new GameZones(timezone)
  }

  /** Every cache of what is stored (a batch rolled back, or another instance wrote). */
  forget(): void {
    this.generation++
    this.streams.clear()
    this.sketchOrder.clear()
    this.seenSize = 0
    this.userDaysSize = 0
    this.firstDaysSize = 0
  }

  /** Stored first days by stream, bounded as the other caches (a miss costs a lookup in the store). */
  private readonly firstDays: FirstDayCache = {
    get: (gameId, env, user) => this.streams.get(gameId)?.get(env)?.firstDays.get(user),
    set: (gameId, env, user, day) => {
      if (++this.firstDaysSize > CACHE_CAP) {
        for (const st of this.allStreams()) st.firstDays.clear()
        this.firstDaysSize = 1
      }
      this.stream(gameId, env).firstDays.set(user, day)
    },
  }

  /** Rebuilds from a date: each game from the start of that date in its zone (`reset.ts`). */
  readonly rebuildsFrom = true
  private readonly cuts: RebuildCuts

  /** Deletes what the consumer derived from each game's rows that a rebuild from `from` delivers again (all when undefined). */
  async reset(from: number | undefined, db: Db, pause: Pause): Promise<void> {
    await resetAnalytics(this.cuts, db, from, pause)
  }

  replayFrom(gameId: string, from: number): Promise<number> {
    return this.cuts.replayFrom(gameId, from)
  }

  /** A game's time zone changed or it was deleted: its next events look it up again. */
  forgetGame(gameId: string): void {
    this.generation++
    this.cuts.forget()
    this.zones.forget(gameId)
    const byEnv = this.streams.get(gameId)
    if (byEnv) for (const st of byEnv.values()) st.zone = zone(undefined)
    this.streams.delete(gameId)
  }

  /** Forgets the games whose time zone changed without this instance hearing of it. */
  async recheckZones(): Promise<void> {
    for (const g of await this.zones.changed()) this.forgetGame(g)
  }

  async init(db: Db): Promise<void> {
    this.db = db
  }

  /** Per-user and per-minute detail past retention goes (`purgeAnalytics`). */
  readonly purge = purgeAnalytics

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
    if (missing) {
      const found = missing
      return this.zones.load(found).then(() => {
        for (const g of found) this.streams.delete(g)
        return this.gather(events)
      })
    }
    if (events.length > TURN_ROWS)
      return this.partsInTurns(events).then((parts) => (parts ? this.load(parts) : this.gather(events)))
    return this.load(this.parts(events))
  }

  /**
   * `parts` of a large batch, `TURN_ROWS` events at a time with a turn of the event loop between
   * (on SQLite the whole pass held the thread for ~40 ms per 20,000 events). Undefined when the
   * streams were forgotten meanwhile (a game's time zone changed): `gather` starts again, so one
   * batch's parts never mix two streams, or two zones, of one game.
   */
  private async partsInTurns(events: readonly NormEvent[]): Promise<Part[] | undefined> {
    const generation = this.generation
    const acc = new Map<Stream, Part>()
    for (let i = 0; i < events.length; i += TURN_ROWS) {
      if (i) await turn()
      if (generation !== this.generation) return undefined
      this.partsInto(acc, events, i, Math.min(events.length, i + TURN_ROWS))
    }
    return ordered(acc)
  }

  /** The batch's sketches not cached yet loaded, then its rows. */
  private load(parts: Part[]): RollupBatch<AnalyticsRows> | Promise<RollupBatch<AnalyticsRows>> {
    const loads: Promise<void>[] = []
    const wanted: Wanted[] = []
    const load = (p: Part, slots: Map<number, Slot>, table: SketchTable) => {
      for (const [key, slot] of slots) if (!slot.sk) wanted.push({ st: p.s, key, table, slot })
    }
    for (const p of parts) {
      load(p, p.online, 'analytics_online')
      load(p, p.active, 'analytics_day_sketch')
    }
    const fill = (slot: Slot) => (sk: Sketch) => {
      for (const who of slot.whos) if (sk.h.add(who)) slot.changed = true
      slot.sk = sk
    }
    // PostgreSQL: the batch's missing sketches in one query per table (`sketch-loads-pg.ts`).
    if (this.db?.dialect === 'postgres' && wanted.length > 1)
      for (const [w, sk] of this.sketchesPg(wanted)) loads.push(sk.then(fill(w.slot)))
    else for (const w of wanted) loads.push(this.sketch(w.st, w.key, w.table).then(fill(w.slot)))
    const batch = () => ({ rows: rows(parts, this.firstDays), done: () => this.remember(parts) })
    return loads.length ? Promise.all(loads).then(batch) : batch()
  }

  /** One pass over the events: each stream's keys not yet known to be stored, in stream order. */
  private parts(events: readonly NormEvent[]): Part[] {
    return ordered(this.partsInto(new Map(), events, 0, events.length))
  }

  /** The pass of `parts` over `events[from, to)`, into `parts`. */
  private partsInto(parts: Map<Stream, Part>, events: readonly NormEvent[], from: number, to: number) {
    let part: Part | undefined
    let lastGame = ''
    let lastEnv = ''
    for (let i = from; i < to; i++) {
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
    return parts
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
        .then((row) => this.keep(k, cache, key, row ?? undefined))
        .finally(() => this.loadingSketches.delete(k))
      this.loadingSketches.set(k, loading)
    }
    return loading
  }

  /** A loaded sketch, cached (an empty one when none is stored). */
  private keep(k: string, cache: Map<number, Sketch>, key: number, row: StoredSketch | undefined): Sketch {
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
  }

  /**
   * PostgreSQL: the sketches of many keys, those neither cached nor loading in one query per
   * table; concurrent commits still share one load and one object per key.
   */
  private sketchesPg(wanted: Wanted[]): Array<[Wanted, Promise<Sketch>]> {
    const db = this.db!
    const out: Array<[Wanted, Promise<Sketch>]> = []
    const byTable = new Map<SketchTable, Array<[Wanted, string]>>()
    for (const w of wanted) {
      const k = `${w.table}${sep}${w.st.gameId}${sep}${w.st.env}${sep}${w.key}`
      const hit = (w.table === 'analytics_online' ? w.st.sketches : w.st.daySketches).get(w.key)
      const loading = hit ? Promise.resolve(hit) : this.loadingSketches.get(k)
      if (loading) out.push([w, loading])
      else {
        let list = byTable.get(w.table)
        if (!list) {
          list = []
          byTable.set(w.table, list)
        }
        list.push([w, k])
      }
    }
    for (const [table, list] of byTable) {
      const keys = list.map(([w]) => [w.st.gameId, w.st.env, w.key])
      const stored = loadSketchesPg(db, SKETCH_TABLES[table], keys)
      list.forEach(([w, k], i) => {
        const cache = table === 'analytics_online' ? w.st.sketches : w.st.daySketches
        const loading = stored
          .then((rows) => this.keep(k, cache, w.key, rows[i]))
          .finally(() => this.loadingSketches.delete(k))
        this.loadingSketches.set(k, loading)
        out.push([w, loading])
      })
    }
    return out
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
