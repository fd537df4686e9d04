import type { Param } from '../../../core/db'
import { addCapped } from '../../../core/event-bounds'
import type { LogEvent as NormEvent } from '../../../core/event-log-types'
import { inOrder } from '../../../core/order'
import type { HyperLogLog } from '../lib/hll'
import { HOUR, floorTo, histBucket } from '../lib/time'
import type { Zone } from '../lib/zone'

/**
 * What the analytics consumer (`rollup.ts`) keeps per game and environment, what one batch
 * gathers for each, and the rows it turns them into for the write half (`write.ts`).
 */

export type Sketch = { h: HyperLogLog; v: number }

/**
 * One game and environment. What is known to be stored is cached per stream, keyed by the user
 * id alone, so a lookup hashes a short string the parser made instead of building a joined key.
 */
export class Stream {
  /** Users whose first-seen row is stored. */
  readonly seen = new Set<string>()
  /** The stored first day of users (`analytics_first_seen.first_day`, fixed once stored), where known. */
  readonly firstDays = new Map<string, number>()
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

export interface Slot {
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
  /** `local day \u0001 platform` -> users whose session_start named it that day. */
  readonly platforms = new Map<string, Set<string>>()
  constructor(readonly s: Stream) {}
}

export type Stat = [n: number, total: number, first: number, last: number]

/**
 * Stored first days the consumer knows (cached per stream): the write half looks a user's up
 * here before asking the store, and notes the ones it learns.
 */
export interface FirstDayCache {
  get(gameId: string, env: string, user: string): number | undefined
  set(gameId: string, env: string, user: string, day: number): void
}

/** A commit's rows for the write half (`write.ts`), each table's values one row after another, keys in order. */
export interface AnalyticsRows {
  /** The consumer's cache of stored first days (none: every one is looked up). */
  firstDays?: FirstDayCache
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
  /** game, env, local day, platform, 0, user: the users active on a platform that day (1: payers, added by the write half) */
  platforms: Param[]
}

/** Counts an invocation event into its hour's counters and duration histogram. */
export function countInvocation(part: Part, e: NormEvent) {
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
    // Any duration the SDK sends (up to 2^53 - 1): the sum saturates rather than fail the commit.
    h[2] = addCapped(h[2], dur)
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
export function rows(ordered: Part[], firstDays?: FirstDayCache): AnalyticsRows {
  const out: AnalyticsRows = {
    firstDays,
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
      // The status keeps a superseding payment's suffix (game/game-rollup.ts `TAKEN_OFF`).
      const cut = k.indexOf('\u0001')
      out.payments.push(g, env, k.slice(0, cut), k.slice(cut + 1), ...p.payments.get(k)!)
    }
    for (const user of inOrder(p.social)) out.social.push(g, env, user, p.social.get(user)!)
    for (const k of inOrder(p.platforms)) {
      const [day, platform] = k.split('\u0001')
      const users = [...p.platforms.get(k)!]
      if (users.length > 1) users.sort()
      for (const user of users) out.platforms.push(g, env, Number(day), platform, 0, user)
    }
    for (const day of inOrder(p.userDays)) {
      const users = [...p.userDays.get(day)!]
      if (users.length > 1) users.sort()
      for (const user of users) out.userDays.push(g, env, day, user)
    }
    // Each write of a sketch carries a new version, so a slower concurrent commit holding an
    // older snapshot of the same minute cannot overwrite a newer one.
    changedSketches(p.online, out.online, g, env)
    changedSketches(p.active, out.activeDays, g, env)
  }
  return out
}

/** The changed sketches of `slots` in key order, each as its row with its next version. */
function changedSketches(slots: Map<number, Slot>, out: Param[], g: string, env: string): void {
  for (const key of inOrder(slots)) {
    const slot = slots.get(key)!
    if (!slot.changed) continue
    const sk = slot.sk!
    sk.v++
    out.push(g, env, key, sk.h.count(), sk.h.serialize(), sk.v)
  }
}

const cmp = (x: string, y: string) => (x < y ? -1 : x > y ? 1 : 0)

/** A batch's parts in stream order (game, then environment). */
export function ordered(parts: Map<Stream, Part>): Part[] {
  const out = [...parts.values()]
  if (out.length > 1) out.sort((a, b) => cmp(a.s.gameId, b.s.gameId) || cmp(a.s.env, b.s.env))
  return out
}
