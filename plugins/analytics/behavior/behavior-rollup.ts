import type { Db, Param } from '../../../core/db'
import { type Derivation, type Gathered as RollupBatch, label, pick } from '../../../core/derive'
import { KEY_COLUMN_MAX, cut } from '../../../core/event-bounds'
import type { LogEvent as NormEvent, Pause } from '../../../core/event-log-types'
import { EVENTS } from '../../../sdk/events'
import { REPLACING, TAKEN_OFF } from '../game/game-rollup'
import { GameZones } from '../lib/game-zones'
import { HyperLogLog } from '../lib/hll'
import { HOUR, MINUTE, floorTo } from '../lib/time'
import { zone } from '../lib/zone'
import { RebuildCuts, resetBehavior } from '../store/reset'
import { type StoredSketch, loadSketchesPg } from '../store/sketch-loads-pg'
import { writeBehavior } from './behavior-write'

/**
 * Dimensions a feature's adoption breaks down by: attributes of the `feature_use` event (top
 * level or in `attrs`), as the game sends them. Platform and country are upper-cased.
 */
export const DIMENSIONS = {
  platform: ['platform'],
  app_version: ['app_version', 'appVersion'],
  country: ['country'],
} as const
export type Dimension = keyof typeof DIMENSIONS
const DIMENSION_NAMES = Object.keys(DIMENSIONS) as Dimension[]

/** Raw ids are receive time in ms x 1024; spans group them per client hour and 10-minute receive window. */
export const SPAN_WINDOW = 10 * MINUTE
const LEVEL_KINDS: Record<string, string> = {
  [EVENTS.levelStart]: 'level.start',
  [EVENTS.levelComplete]: 'level.complete',
  [EVENTS.levelFail]: 'level.fail',
}
const SKETCH_CAP = 20_000
const SKETCH_TABLE = {
  name: 'analytics_behavior_sketch',
  key: ['game_id', 'env', 'day', 'kind', 'name'],
  bigint: ['day'],
}
export const sep = '\u0001'

/** A commit's rows for the write half (`behavior-write.ts`), each table's values one row after another, keys in order. */
export interface BehaviorRows {
  /** game, env, local day, kind, name, n, total, first ts, last ts */
  counters: Param[]
  /** game, env, local day, kind, name, estimate, sketch, version */
  sketches: Param[]
  /** game, env, client hour, receive window, first id, last id, n */
  spans: Param[]
  /** game, env, map, ts, id, x, y (thousandths), level, user */
  deaths: Param[]
  /** game, env, order, status, local day, product, kind, platform, currency: matched with the payments that turn out new */
  payments: Param[]
}

/** A cached sketch and its version. */
type Sketch = { h: HyperLogLog; v: number }
type Stat = [n: number, total: number, first: number, last: number]

const num = (v: unknown): number | undefined => {
  const n = typeof v === 'number' ? v : typeof v === 'string' && v.trim() !== '' ? Number(v) : Number.NaN
  return Number.isFinite(n) ? n : undefined
}
const pad = (n: number) => String(n).padStart(16, '0')

/** A dimension's value of an event, or undefined when it names none. */
export function dimensionOf(e: Record<string, unknown>, d: Dimension): string | undefined {
  for (const key of DIMENSIONS[d]) {
    const v = label(pick(e, key))
    if (v) return d === 'app_version' ? v : v.toUpperCase()
  }
  return undefined
}

/** What one commit gathers, across its streams; keys start with game and environment, so sorted keys are the lock order. */
class Gathered {
  readonly counters = new Map<string, Stat>()
  /** sketch key -> users to add once the sketch is loaded (or added already: the sketch itself) */
  readonly sketches = new Map<string, { sk: Sketch | undefined; whos: string[]; changed: boolean }>()
  readonly spans = new Map<string, [number, number, number]>()
  readonly deaths: Param[] = []
  readonly payments: Param[] = []
}

/**
 * The behavior consumer of the event log (issue 17 point 5): per local day, counts and
 * distinct-user sketches of every event name, of each feature used (and by dimension), of each
 * level's starts, completes, fails and durations; death points per map; each payment with its
 * product; and where the raw events of each client hour are stored (`analytics_event_span`),
 * which bounds the raw reads (funnels, paths, event lists) to the ids of their range. Every
 * sketch a batch changed is written in that batch's transaction.
 */
export class BehaviorRollup implements Derivation<BehaviorRows> {
  readonly name = 'behavior'
  readonly write = writeBehavior
  private db: Db | undefined
  private readonly zones: GameZones
  /** Cached sketches by key, oldest first (persisted on every commit, so eviction loses nothing). */
  private cache = new Map<string, Sketch>()
  private loading = new Map<string, Promise<Sketch>>()

  /** Rebuilds from a date: each game from the start of that date in its zone (`store/reset.ts`). */
  readonly rebuildsFrom = true
  private readonly cuts: RebuildCuts

  constructor(private timezone: (gameId: string) => Promise<string | undefined> = async () => undefined) {
    this.cuts = new RebuildCuts(timezone)
    this.zones = new GameZones(timezone)
  }

  /** A game's time zone changed or it was deleted: its next events look it up again. */
  forgetGame(gameId: string): void {
    this.cuts.forget()
    this.zones.forget(gameId)
  }

  /** Forgets the games whose time zone changed without this instance hearing of it. */
  async recheckZones(): Promise<void> {
    for (const g of await this.zones.changed()) this.forgetGame(g)
  }

  replayFrom(gameId: string, from: number): Promise<number> {
    return this.cuts.replayFrom(gameId, from)
  }

  /** Every cached sketch (a batch rolled back, or another instance wrote). */
  forget(): void {
    this.cache.clear()
  }

  reset(from: number | undefined, db: Db, pause: Pause): Promise<void> {
    return resetBehavior(this.cuts, db, from, pause)
  }

  async init(db: Db): Promise<void> {
    this.db = db
  }

  /** Raw-id spans and death points past retention go; day counters and sketches stay. */
  async purge(db: Db, s: { gameId: string; env: string }, cutoff: number): Promise<number> {
    const p = [s.gameId, s.env, cutoff]
    return (
      (await db.run('DELETE FROM analytics_event_span WHERE game_id = ? AND env = ? AND hour < ?', [
        s.gameId,
        s.env,
        floorTo(cutoff, HOUR),
      ])) +
      (await db.run('DELETE FROM analytics_death WHERE game_id = ? AND env = ? AND ts < ?', p)) +
      (await db.run('DELETE FROM analytics_transaction WHERE game_id = ? AND env = ? AND ts < ?', p))
    )
  }

  gather(events: readonly NormEvent[]): RollupBatch<BehaviorRows> | Promise<RollupBatch<BehaviorRows>> {
    const missing = [...new Set(events.map((e) => e.gameId))].filter((g) => !this.zones.has(g))
    if (missing.length) return this.zones.load(missing).then(() => this.gather(events))
    const g = this.collect(events)
    const loads: Promise<void>[] = []
    const unloaded: string[] = []
    for (const [key, slot] of g.sketches) if (!slot.sk) unloaded.push(key)
    const fill = (key: string) => (sk: Sketch) => {
      const slot = g.sketches.get(key)!
      for (const who of slot.whos) if (sk.h.add(who)) slot.changed = true
      slot.sk = sk
    }
    // PostgreSQL: the batch's missing sketches in one query (`store/sketch-loads-pg.ts`).
    if (this.db?.dialect === 'postgres' && unloaded.length > 1)
      for (const [key, sk] of this.sketchesPg(unloaded)) loads.push(sk.then(fill(key)))
    else for (const key of unloaded) loads.push(this.sketch(key).then(fill(key)))
    const batch = () => {
      const due: Array<[string, Sketch, number]> = []
      for (const [key, slot] of g.sketches) if (slot.changed && slot.sk) due.push([key, slot.sk, ++slot.sk.v])
      return { rows: rowsOf(g, due) }
    }
    return loads.length ? Promise.all(loads).then(batch) : batch()
  }

  /** One pass over the commit's events. */
  private collect(events: readonly NormEvent[]): Gathered {
    const g = new Gathered()
    const count = (key: string, n: number, total: number, ts: number) => {
      const v = g.counters.get(key)
      if (!v) g.counters.set(key, [n, total, ts, ts])
      else {
        v[0] += n
        v[1] += total
        if (ts < v[2]) v[2] = ts
        if (ts > v[3]) v[3] = ts
      }
    }
    const see = (key: string, user: string | null) => {
      if (!user) return
      let slot = g.sketches.get(key)
      if (!slot) {
        slot = { sk: this.cache.get(key), whos: [], changed: false }
        g.sketches.set(key, slot)
      }
      if (!slot.sk) slot.whos.push(user)
      else if (slot.sk.h.add(user)) slot.changed = true
    }
    // Consecutive events mostly share their stream, client hour, receive window and local day:
    // the keys built from them are reused (the per-event work is on ingest's hot path).
    let game = ''
    let env = ''
    let stream = ''
    let z = zone(undefined)
    let hour = Number.NaN
    let window = Number.NaN
    let span: [number, number, number] = [0, 0, 0]
    let dayNo = Number.NaN
    let day = ''
    for (let i = 0; i < events.length; i++) {
      const e = events[i]
      const id = e.id
      if (e.gameId !== game || e.env !== env) {
        game = e.gameId
        env = e.env
        stream = `${game}${sep}${env}`
        z = this.zones.get(game) ?? zone(undefined)
        hour = Number.NaN
        dayNo = Number.NaN
      }
      const h = floorTo(e.ts, HOUR)
      const w = floorTo(Math.floor(id / 1024), SPAN_WINDOW)
      if (h !== hour || w !== window) {
        hour = h
        window = w
        const key = `${stream}${sep}${pad(h)}${sep}${pad(w)}`
        const known = g.spans.get(key)
        if (known) span = known
        else {
          span = [id, id, 0]
          g.spans.set(key, span)
        }
      }
      // Ids rise within a transaction's rows; across transactions (PostgreSQL) they may not.
      if (id < span[0]) span[0] = id
      if (id > span[1]) span[1] = id
      span[2]++
      const d = z.day(e.ts)
      if (d !== dayNo) {
        dayNo = d
        day = `${stream}${sep}${pad(d)}`
      }
      // Each part is at most 128 characters (core/event-bounds.ts); a two-part name (feature and
      // dimension, episode and level) is cut whole to the narrowest key column, its second part.
      const at = (kind: string, name: string) => `${day}${sep}${kind}${sep}${cut(name, KEY_COLUMN_MAX)}`
      const named = at('event', e.event)
      count(named, 1, 0, e.ts)
      see(named, e.userId)
      if (e.payment) {
        const s = e.payment.supersedes
        // A superseding row: the client's it takes off and its own, said apart (game-rollup.ts).
        if (s) {
          paymentMeta(g.payments, s, `${stream}${sep}${pad(z.day(s.ts))}`, TAKEN_OFF)
          paymentMeta(g.payments, e, day, REPLACING)
        } else paymentMeta(g.payments, e, day, '')
        continue
      }
      if (e.event === EVENTS.featureUse) {
        const feature = label(pick(e.props, 'feature'))
        if (!feature) continue
        count(at('feature', feature), 1, 0, e.ts)
        see(at('feature', feature), e.userId)
        for (const d of DIMENSION_NAMES) {
          const v = dimensionOf(e.props, d)
          if (v === undefined) continue
          count(at(`feature.${d}`, `${feature}${sep}${v}`), 1, 0, e.ts)
          see(at(`feature.${d}`, `${feature}${sep}${v}`), e.userId)
        }
        continue
      }
      const kind = LEVEL_KINDS[e.event]
      if (kind === undefined) continue
      const level = e.level ?? label(pick(e.props, 'level'))
      if (!level) continue
      const name = `${label(pick(e.props, 'episode')) ?? ''}${sep}${level}`
      count(at(kind, name), 1, 0, e.ts)
      see(at('level', name), e.userId)
      if (e.event === EVENTS.levelComplete && e.durationMs !== null && e.durationMs >= 0)
        count(at('level.duration', name), 1, e.durationMs, e.ts)
      if (e.event === EVENTS.levelFail) {
        const x = num(pick(e.props, 'x'))
        const y = num(pick(e.props, 'y'))
        if (x !== undefined && y !== undefined && Math.abs(x) < 1e12 && Math.abs(y) < 1e12)
          g.deaths.push(
            e.gameId,
            e.env,
            label(pick(e.props, 'map')) ?? '',
            e.ts,
            id,
            Math.round(x * 1000),
            Math.round(y * 1000),
            level,
            e.userId,
          )
      }
    }
    return g
  }

  /** The cached sketch of a key; concurrent commits share one load and one object. */
  private sketch(key: string): Promise<Sketch> {
    const hit = this.cache.get(key)
    if (hit) return Promise.resolve(hit)
    let loading = this.loading.get(key)
    if (!loading) {
      const db = this.db
      if (!db) return Promise.reject(new Error('behavior rollup used before init'))
      const [game, env, day, kind, name] = splitKey(key)
      loading = db
        .get<{ sketch: string; version: number }>(
          'SELECT sketch, version FROM analytics_behavior_sketch WHERE game_id = ? AND env = ? AND day = ? AND kind = ? AND name = ?',
          [game, env, day, kind, name],
        )
        .then((row) => this.keep(key, row ?? undefined))
        .finally(() => this.loading.delete(key))
      this.loading.set(key, loading)
    }
    return loading
  }

  /** A loaded sketch, cached (an empty one when none is stored). */
  private keep(key: string, row: StoredSketch | undefined): Sketch {
    const sk: Sketch = {
      h: row ? HyperLogLog.parse(row.sketch) : new HyperLogLog(),
      v: Number(row?.version ?? 0),
    }
    // Oldest first out (each batch writes what it changed, so eviction loses nothing).
    for (const old of this.cache.keys()) {
      if (this.cache.size < SKETCH_CAP) break
      this.cache.delete(old)
    }
    this.cache.set(key, sk)
    return sk
  }

  /** PostgreSQL: the sketches of many keys, those neither cached nor loading in one query. */
  private sketchesPg(keys: string[]): Array<[string, Promise<Sketch>]> {
    const out: Array<[string, Promise<Sketch>]> = []
    const load: string[] = []
    for (const key of keys) {
      const hit = this.cache.get(key)
      const loading = hit ? Promise.resolve(hit) : this.loading.get(key)
      if (loading) out.push([key, loading])
      else load.push(key)
    }
    if (!load.length) return out
    const stored = loadSketchesPg(this.db!, SKETCH_TABLE, load.map(splitKey))
    load.forEach((key, i) => {
      const loading = stored.then((rows) => this.keep(key, rows[i])).finally(() => this.loading.delete(key))
      this.loading.set(key, loading)
      out.push([key, loading])
    })
    return out
  }
}

/** `game \u0001 env \u0001 day \u0001 kind \u0001 name` (the name may hold the separator itself). */
function splitKey(key: string): [string, string, number, string, string] {
  const p = key.split(sep)
  return [p[0], p[1], Number(p[2]), p[3], p.slice(4).join(sep)]
}

const sorted = <V>(m: Map<string, V>) => [...m.keys()].sort()
const cmp = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0)

function rowsOf(g: Gathered, due: Array<[string, Sketch, number]>): BehaviorRows {
  const counters: Param[] = []
  for (const k of sorted(g.counters)) counters.push(...splitKey(k), ...g.counters.get(k)!)
  const sketches: Param[] = []
  // Each write carries a new version: a slower commit holding an older snapshot cannot overwrite a newer one.
  due.sort((a, b) => cmp(a[0], b[0]))
  for (const [k, sk, version] of due) sketches.push(...splitKey(k), sk.h.count(), sk.h.serialize(), version)
  const spans: Param[] = []
  for (const k of sorted(g.spans)) {
    const [game, env, hour, received] = k.split(sep)
    spans.push(game, env, Number(hour), Number(received), ...g.spans.get(k)!)
  }
  // Payments carry their local day as a key prefix; the write half needs the number.
  const payments = g.payments.map((v, i) => (i % 9 === 4 ? Number(String(v).split(sep)[2]) : v))
  return { counters, sketches, spans, deaths: g.deaths, payments }
}

/** A payment's facts the write half matches with the batch's payments (`BehaviorRows.payments`). */
function paymentMeta(out: Param[], e: NormEvent, day: string, role: string): void {
  const p = e.props
  out.push(
    e.gameId,
    e.env,
    e.payment!.orderId,
    `${e.payment!.status}${role}`,
    day,
    label(pick(p, 'product_id')) ?? label(pick(p, 'productId')) ?? '',
    label(pick(p, 'kind')) === 'subscription' ? 'subscription' : 'iap',
    dimensionOf(p, 'platform') ?? '',
    e.currency ?? '',
  )
}
