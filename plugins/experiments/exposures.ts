import type { Db, Param } from '../../core/db'
import { rowsByKeys } from '../../core/db/keyed'
import { deleteInSlices } from '../../core/db/slices'
import { type Derivation, type Gathered as RollupBatch, label, pick } from '../../core/derive'
import type { LogEvent as NormEvent, Pause } from '../../core/event-log-types'
import { byStream, inOrder } from '../../core/order'
import { type CountedExperiments, Lru, scopeOf } from './exposed'
import { writeExposures } from './exposures-write'

/** A commit's exposure rows for `exposures-write.ts`: each table's values one row after another, keys in order. */
export interface ExposureRows {
  exposures: Param[]
  userEvents: Param[]
}

/** Experiments looked up lately: their `game \u0001 env`, or null when exposures do not count for them. */
const EXPERIMENTS_KEPT = 10_000
/** How long an id that names no counted experiment is taken as such (a draft may be published since). */
const NOT_COUNTED_MS = 5_000
/** Exposed users kept in memory in all, unless told (`experiments.exposed_users_in_memory`). */
export const EXPOSED_USERS_KEPT = 1_000_000

/**
 * Experiment analysis without scanning raw events, a consumer of the event log: each user's
 * first exposure (`experiment_exposure` with attrs `exp` and `variant`), and for exposed users
 * the last time they sent each event (`experiments_exposures`, `experiments_user_events`).
 *
 * Exposure events come with the SDK key, public in every game client: only those naming an
 * experiment of their own game and environment that is not a draft count (`CountedExperiments`,
 * looked up once per batch for the ids not remembered), so neither the tables nor the users kept
 * in memory grow with made-up experiment ids. Each batch's conversions are matched against the
 * exposed users on the event loop: those of every game and environment are kept in memory while
 * they number at most `usersKept` in all (a store lookup per batch took the ingest benchmark
 * from 126,773 to 31,121 events/s). Past it, the environments with the most go to the store: a
 * batch's users of such an environment are looked up there, in one read (of up to 4,096 users),
 * so made-up users sent for a real experiment cost no memory (0.5 KB each had been kept for good).
 */
export class ExposureRollup implements Derivation<ExposureRows> {
  readonly name = 'exposures'
  readonly write = writeExposures
  /**
   * `game \u0001 env` -> users with an exposure, of the environments kept in memory: only their
   * events feed the conversion rows.
   */
  private exposed = new Map<string, Set<string>>()
  /** Users in `exposed`, all environments together. */
  private kept = 0
  /** Environments whose exposed users are looked up in the store, batch by batch (too many to keep). */
  private inStore = new Set<string>()
  /** Experiment id -> its `game \u0001 env` when exposures count for it, else null, and when it was read. */
  private experiments = new Lru<string, { scope: string | null; at: number }>(EXPERIMENTS_KEPT)
  private db: Db | undefined

  constructor(
    private readonly counted: CountedExperiments,
    /** Exposed users kept in memory in all (`experiments.exposed_users_in_memory`). */
    private readonly usersKept = EXPOSED_USERS_KEPT,
  ) {}

  /** Exposed users in memory, and the environments looked up in the store instead. */
  held(): { users: number; inStore: number } {
    return { users: this.kept, inStore: this.inStore.size }
  }

  async init(db: Db): Promise<void> {
    this.db = db
    await this.load()
  }

  /** A batch rolled back, another instance stored exposures, a rebuild or a deleted stream: read again. */
  forget(): void {
    this.exposed.clear()
    this.kept = 0
    this.inStore.clear()
    this.loaded = false
    this.experiments.clear()
  }

  /** Rebuilds from an instant: its rows are keyed by event time, not by a game's days. */
  readonly rebuildsFrom = true

  /**
   * Deletes first exposures at or after `from` and the last times at or after it (all when
   * undefined). An earlier first exposure or last time stays: the events delivered again (from
   * `from` on) cannot move it (a first exposure only moves earlier, a last time only later).
   */
  async reset(from: number | undefined, db: Db, pause: Pause): Promise<void> {
    // In slices of each key (`LogConsumer.reset`): a row per exposed user and per user and event.
    const all = { where: '1 = 1', params: [], pinned: [] }
    await deleteInSlices(
      db,
      'experiments_exposures',
      from === undefined ? all : { ...all, where: 'ts >= ?', params: [from] },
      pause,
    )
    await pause()
    await deleteInSlices(
      db,
      'experiments_user_events',
      from === undefined ? all : { ...all, where: 'last_ts >= ?', params: [from] },
      pause,
    )
  }

  private loaded = false
  /**
   * Reads the exposed users again: of the environments with the fewest first, while they fit in
   * `usersKept`; the others are looked up in the store.
   */
  private async load(): Promise<void> {
    if (this.loaded || !this.db) return
    const db = this.db
    this.exposed.clear()
    this.kept = 0
    this.inStore.clear()
    const scopes = await db.all<{ game_id: string; env: string; n: number }>(
      'SELECT game_id, env, COUNT(DISTINCT user_id) AS n FROM experiments_exposures GROUP BY game_id, env',
    )
    scopes.sort((a, b) => Number(a.n) - Number(b.n))
    for (const s of scopes) {
      const scope = scopeOf(s.game_id, s.env)
      if (this.kept + Number(s.n) > this.usersKept) {
        this.inStore.add(scope)
        continue
      }
      const users = await db.all<{ user_id: string }>(
        'SELECT DISTINCT user_id FROM experiments_exposures WHERE game_id = ? AND env = ?',
        [s.game_id, s.env],
      )
      this.exposed.set(scope, new Set(users.map((r) => r.user_id)))
      this.kept += users.length
    }
    this.loaded = true
  }

  /** The users of a batch's events (`at`) exposed in an environment kept in the store. */
  private async storedUsers(
    gameId: string,
    env: string,
    events: readonly NormEvent[],
    at: readonly number[],
  ) {
    const asked = new Set<string>()
    for (const i of at) {
      const u = events[i].userId
      if (u) asked.add(u)
    }
    const rows = await rowsByKeys<{ user_id: string }>(this.db!, {
      table: 'experiments_exposures',
      cols: ['user_id'],
      scope: [
        ['game_id', gameId],
        ['env', env],
      ],
      key: 'user_id',
      keys: [...asked],
    })
    return new Set(rows.map((r) => r.user_id))
  }

  /** Past `usersKept`, the environments with the most users go to the store until the rest fit. */
  private spill(): void {
    while (this.kept > this.usersKept) {
      let most: [string, Set<string>] | undefined
      for (const e of this.exposed) if (!most || e[1].size > most[1].size) most = e
      if (!most) return
      this.exposed.delete(most[0])
      this.kept -= most[1].size
      this.inStore.add(most[0])
    }
  }

  /** The experiment ids the batch's exposures name, looked up (those not remembered) in one read. */
  private async learnExperiments(events: readonly NormEvent[]): Promise<void> {
    const now = Date.now()
    const unknown = new Set<string>()
    for (const e of events) {
      if (e.event !== 'experiment_exposure' || !e.userId) continue
      const exp = label(pick(e.props, 'exp'))
      if (!exp || unknown.has(exp)) continue
      const known = this.experiments.get(exp)
      if (!known || (known.scope === null && now - known.at > NOT_COUNTED_MS)) unknown.add(exp)
    }
    if (!unknown.size) return
    const counted = await this.counted([...unknown])
    for (const id of unknown) this.experiments.set(id, { scope: counted.get(id) ?? null, at: now })
  }

  async gather(events: readonly NormEvent[]): Promise<RollupBatch<ExposureRows> | undefined> {
    await this.load()
    await this.learnExperiments(events)
    const out: ExposureRows = { exposures: [], userEvents: [] }
    for (const { gameId: g, env, at } of byStream(events)) {
      const scope = scopeOf(g, env)
      // In memory (its users kept), else this batch's users looked up in the store.
      let exposed = this.exposed.get(scope)
      const inMemory = !this.inStore.has(scope)
      if (!inMemory) exposed = await this.storedUsers(g, env, events, at)
      else if (!exposed) {
        exposed = new Set()
        this.exposed.set(scope, exposed)
      }
      const before = exposed.size
      /** experiment -> user -> [variant, ts] */
      const firsts = new Map<string, Map<string, [string, number]>>()
      for (const i of at) {
        const e = events[i]
        if (e.event !== 'experiment_exposure' || !e.userId) continue
        const exp = label(pick(e.props, 'exp'))
        const variant = label(pick(e.props, 'variant'))
        if (!exp || !variant || this.experiments.get(exp)?.scope !== scope) continue
        let users = firsts.get(exp)
        if (!users) {
          users = new Map()
          firsts.set(exp, users)
        }
        const prev = users.get(e.userId)
        if (!prev || e.ts < prev[1]) users.set(e.userId, [variant, e.ts])
        exposed.add(e.userId)
      }
      if (inMemory) this.kept += exposed.size - before
      for (const exp of inOrder(firsts)) {
        const users = firsts.get(exp)!
        for (const user of inOrder(users)) {
          const [variant, ts] = users.get(user)!
          out.exposures.push(g, env, exp, user, variant, ts)
        }
      }
      if (!exposed.size) continue
      // Conversions after the exposures, so an exposure earlier in this commit counts.
      /** user -> event -> last ts */
      const last = new Map<string, Map<string, number>>()
      for (const i of at) {
        const { userId, event, ts } = events[i]
        if (!userId || !exposed.has(userId)) continue
        let byEvent = last.get(userId)
        if (!byEvent) {
          byEvent = new Map()
          last.set(userId, byEvent)
        }
        const prev = byEvent.get(event)
        if (prev === undefined || ts > prev) byEvent.set(event, ts)
      }
      for (const user of inOrder(last)) {
        const byEvent = last.get(user)!
        for (const event of inOrder(byEvent)) out.userEvents.push(g, env, user, event, byEvent.get(event)!)
      }
    }
    this.spill()
    return out.exposures.length || out.userEvents.length ? { rows: out } : undefined
  }
}

/**
 * Unexpected variants (names the experiment does not configure, sent with the public SDK key)
 * listed by name in results: the ones with the most exposures; the rest are counted in one line.
 * 400,000 made-up names had made one results answer 10 MB.
 */
export const UNEXPECTED_SHOWN = 20

/**
 * Per variant: users whose first exposure named it, and of them those who sent each metric event
 * at or after it. Null-prototype records: variant and metric names are free text (`constructor`,
 * `__proto__`), read with `Object.hasOwn`.
 */
export interface ExperimentCounts {
  variants: Record<string, { exposures: number; conversions: Record<string, number> }>
  /** Unexpected variants counted, not listed (past the `UNEXPECTED_SHOWN` with most exposures). */
  rest?: { variants: number; exposures: number }
}

const n = (v: unknown) => Number(v ?? 0)
/** A record no name reaches through its prototype. */
export const record = <V>(): Record<string, V> => Object.create(null)
const marks = (k: number) => Array(k).fill('?').join(', ')

/**
 * Counts for one experiment from the exposure rollup. A user counts once, in the variant of their
 * first exposure. `configured` variants are read whatever their counts; of the others, the
 * `UNEXPECTED_SHOWN` with most exposures, and the rest as one count (`rest`).
 */
export async function experimentCounts(
  db: Db,
  q: {
    gameId: string
    environment: string
    experimentId: string
    metrics: string[]
    configured?: readonly string[]
  },
): Promise<ExperimentCounts> {
  const base = [q.gameId, q.environment, q.experimentId]
  const scope = 'FROM experiments_exposures WHERE game_id = ? AND env = ? AND experiment_id = ?'
  const configured = [...new Set(q.configured ?? [])]
  const others = configured.length ? ` AND variant NOT IN (${marks(configured.length)})` : ''
  const [known, unexpected] = await Promise.all([
    configured.length
      ? db.all<{ variant: string; n: number }>(
          `SELECT variant, COUNT(*) AS n ${scope} AND variant IN (${marks(configured.length)}) GROUP BY variant`,
          [...base, ...configured],
        )
      : [],
    db.all<{ variant: string; n: number }>(
      `SELECT variant, COUNT(*) AS n ${scope}${others} GROUP BY variant ORDER BY n DESC, variant LIMIT ?`,
      [...base, ...configured, UNEXPECTED_SHOWN],
    ),
  ])
  const out: ExperimentCounts = { variants: record() }
  const conversions = () => {
    const c = record<number>()
    for (const m of q.metrics) c[m] = 0
    return c
  }
  for (const r of [...known, ...unexpected])
    out.variants[r.variant] = { exposures: n(r.n), conversions: conversions() }
  if (unexpected.length === UNEXPECTED_SHOWN) {
    const all = await db.get<{ v: number; n: number }>(
      `SELECT COUNT(DISTINCT variant) AS v, COUNT(*) AS n ${scope}${others}`,
      [...base, ...configured],
    )
    const shown = unexpected.reduce((a, r) => a + n(r.n), 0)
    if (n(all?.v) > UNEXPECTED_SHOWN)
      out.rest = { variants: n(all?.v) - UNEXPECTED_SHOWN, exposures: n(all?.n) - shown }
  }
  const names = Object.keys(out.variants)
  if (!q.metrics.length || !names.length) return out
  const conv = await db.all<{ variant: string; event: string; n: number }>(
    `SELECT x.variant, u.event, COUNT(*) AS n FROM experiments_exposures x
     JOIN experiments_user_events u ON u.game_id = x.game_id AND u.env = x.env AND u.user_id = x.user_id
     WHERE x.game_id = ? AND x.env = ? AND x.experiment_id = ? AND x.variant IN (${marks(names.length)})
       AND u.event IN (${marks(q.metrics.length)}) AND u.last_ts >= x.ts
     GROUP BY x.variant, u.event`,
    [...base, ...names, ...q.metrics],
  )
  for (const r of conv)
    if (Object.hasOwn(out.variants, r.variant)) out.variants[r.variant].conversions[r.event] = n(r.n)
  return out
}
