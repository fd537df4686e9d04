import type { Db, Param } from '../../core/db'
import type { Logger } from '../../core/log'
import { HyperLogLog } from './hll'
import { type CommitRows, EVENT_WIRE_WIDTH, type EventRows, persist } from './persist'
import { DAY, HOUR, MINUTE, floorTo } from './sql'
import { type NormEvent, pick, str } from './validate'

const DAU_EVENTS = new Set(['login', 'session_start'])
/**
 * Top-level fields whose columns hold them exactly (event, ts, game_id, env) are left out of
 * `props` (a smaller row is a smaller WAL); everything else, including what was promoted from
 * `attrs`, stays.
 */
function propsJson(raw: Record<string, unknown>): string {
  const out: Record<string, unknown> = {}
  for (const k in raw) if (k !== 'event' && k !== 'ts' && k !== 'game_id' && k !== 'env') out[k] = raw[k]
  return JSON.stringify(out)
}
const ONLINE_EVENTS = new Set(['heartbeat', 'session_start'])
/**
 * Commits in flight at once. PostgreSQL overlaps round trips and fsyncs on several connections.
 * SQLite has one writer: with a persist thread, the event loop prepares the next commit while the
 * thread stores the previous one; without one (`:memory:`), one at a time.
 */
export const COMMITS_IN_FLIGHT = { sqlite: 2, postgres: 3 } as const
/** Largest transaction; a bigger backlog is committed in several. */
const MAX_ROWS_PER_TX = 20_000
/** Bounded membership caches: clearing one only costs a few redundant conflict checks. */
const CACHE_CAP = 2_000_000
const SKETCH_CAP = 4096

export const histBucket = (ms: number) => Math.round(Math.log1p(Math.max(0, ms)) / Math.log(1.05))
export const histValue = (bucket: number) => Math.expm1(bucket * Math.log(1.05))

const sep = '\u0001'
const s = str

type Sketch = { h: HyperLogLog; v: number }

/**
 * Rows go out stream by stream, each key part compared as text: the order of the key joined
 * with \u0001, as the writer has always sorted. Concurrent commits (PostgreSQL) therefore lock
 * rows in one order and never deadlock; on SQLite sorted keys touch each B-tree page once.
 */
const byText = (a: string | number, b: string | number) => {
  const x = String(a)
  const y = String(b)
  return x < y ? -1 : x > y ? 1 : 0
}
function inOrder<K extends string | number>(m: Map<K, unknown>): K[] {
  const keys = [...m.keys()]
  if (keys.length > 1) {
    // Strings alone sort fastest without a comparator, by UTF-16 code unit as `<` compares.
    if (typeof keys[0] === 'string') keys.sort()
    else keys.sort(byText)
  }
  return keys
}

/**
 * One game and environment. What is known to be stored is cached per stream, keyed by the user
 * id alone, so a lookup hashes a short string the parser made instead of building a joined key.
 */
class Stream {
  /** Users whose first-seen row is stored. */
  readonly seen = new Set<string>()
  /** Per day, users whose user-day row is stored. */
  readonly days = new Map<number, Set<string>>()
  /** Users with an exposure: their events feed the conversion rollup. */
  readonly exposed = new Set<string>()
  /** Online sketches by minute; the writer bounds their number across streams. */
  readonly sketches = new Map<number, Sketch>()
  constructor(
    readonly gameId: string,
    readonly env: string,
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
class Part {
  /** user -> earliest ts */
  readonly firstSeen = new Map<string, number>()
  /** day -> users */
  readonly userDays = new Map<number, Set<string>>()
  /** order -> status -> row */
  readonly payments = new Map<string, Map<string, Param[]>>()
  /** hour -> function -> [total, failed, duration sum, duration n] */
  readonly hours = new Map<number, Map<string, [number, number, number, number]>>()
  /** hour -> bucket -> n */
  readonly hist = new Map<number, Map<number, number>>()
  /** minute -> sketch */
  readonly online = new Map<number, Slot>()
  /** experiment -> user -> [variant, ts] */
  readonly exposures = new Map<string, Map<string, [string, number]>>()
  /** user -> event -> last ts */
  readonly userEvents = new Map<string, Map<string, number>>()
  constructor(
    readonly s: Stream,
    /** The stream's index in this commit's `EventRows.streams`. */
    readonly index: number,
  ) {}
}

/** Conversions of exposed users: after the loop, so an exposure earlier in this batch counts. */
function conversions(events: NormEvent[], partOf: Part[]) {
  for (let i = 0; i < events.length; i++) {
    const e = events[i]
    const { userId } = e
    if (!userId) continue
    const p = partOf[i]
    if (!p.s.exposed.size || !p.s.exposed.has(userId)) continue
    let byEvent = p.userEvents.get(userId)
    if (!byEvent) {
      byEvent = new Map()
      p.userEvents.set(userId, byEvent)
    }
    const prev = byEvent.get(e.event)
    if (prev === undefined || e.ts > prev) byEvent.set(e.event, e.ts)
  }
}

/** The rollup rows of a commit, stream by stream, keys in order. */
function rollupRows(ordered: Part[]) {
  const payments: Param[] = []
  const hours: Param[] = []
  const hist: Param[] = []
  const firstSeen: Param[] = []
  const userDays: Param[] = []
  const online: Param[] = []
  const exposures: Param[] = []
  const userEvents: Param[] = []
  for (const p of ordered) {
    const { gameId: g, env } = p.s
    for (const order of inOrder(p.payments)) {
      const byStatus = p.payments.get(order)!
      for (const status of inOrder(byStatus)) payments.push(...byStatus.get(status)!)
    }
    for (const hour of inOrder(p.hours)) {
      const fns = p.hours.get(hour)!
      for (const fn of inOrder(fns)) {
        const h = fns.get(fn)!
        hours.push(g, env, hour, fn, h[0], h[1], h[2], h[3])
      }
    }
    for (const hour of inOrder(p.hist)) {
      const buckets = p.hist.get(hour)!
      for (const b of inOrder(buckets)) hist.push(g, env, hour, b, buckets.get(b)!)
    }
    for (const user of inOrder(p.firstSeen)) firstSeen.push(g, env, user, p.firstSeen.get(user)!)
    for (const day of inOrder(p.userDays)) {
      const users = [...p.userDays.get(day)!]
      if (users.length > 1) users.sort()
      for (const user of users) userDays.push(g, env, day, user)
    }
    // Each write of a sketch carries a new version, so a slower concurrent commit holding an
    // older snapshot of the same minute cannot overwrite a newer one.
    for (const minute of inOrder(p.online)) {
      const slot = p.online.get(minute)!
      if (!slot.changed) continue
      const sk = slot.sk!
      sk.v++
      online.push(g, env, minute, sk.h.count(), sk.h.serialize(), sk.v)
    }
    for (const exp of inOrder(p.exposures)) {
      const users = p.exposures.get(exp)!
      for (const user of inOrder(users)) {
        const [variant, ts] = users.get(user)!
        exposures.push(g, env, exp, user, variant, ts)
      }
    }
    for (const user of inOrder(p.userEvents)) {
      const byEvent = p.userEvents.get(user)!
      for (const event of inOrder(byEvent)) userEvents.push(g, env, user, event, byEvent.get(event)!)
    }
  }

  return { payments, hours, hist, firstSeen, userDays, online, exposures, userEvents }
}

interface Pending {
  events: NormEvent[]
  resolve: () => void
  reject: (e: unknown) => void
}

/**
 * Group commit (performance note 2): requests hand their events over and wait; one writer
 * drains everything queued into a single transaction that also maintains the rollups, then
 * acknowledges every request in it. Under load the next transaction collects what arrived while
 * the previous one ran, so batches grow with the load and the event loop never waits on a lock.
 */
export class GroupWriter {
  private pending: Pending[] = []
  private active = 0
  private scheduled = false
  private idleWaiters: Array<() => void> = []
  private ready: Promise<void> | undefined
  /** Commits in flight at once (see the constructor). */
  private readonly concurrency: number
  /** game -> env -> stream */
  private streams = new Map<string, Map<string, Stream>>()
  private seenSize = 0
  private userDaysSize = 0
  /** Every cached sketch, oldest first, for eviction: `game \u0001 env \u0001 minute` -> owner. */
  private sketchOrder = new Map<string, { st: Stream; minute: number }>()
  private loadingSketches = new Map<string, Promise<Sketch>>()
  private lastId = 0

  private persistRows: (rows: CommitRows) => Promise<void>

  /**
   * `thread` runs each commit's transaction somewhere else (a persist thread with its own
   * connections); by default `persist` on `db`. It must resolve only once the rows are committed.
   * `observe` learns of every commit: its events, its time from preparing the rows to the
   * answer, and whether it committed (the plugin's metrics).
   */
  constructor(
    private db: Db,
    private log: Logger,
    thread?: (rows: CommitRows) => Promise<void>,
    private observe?: (events: number, seconds: number, ok: boolean) => void,
  ) {
    this.persistRows = thread ?? ((rows) => persist(db, rows))
    this.concurrency = thread || db.dialect === 'postgres' ? COMMITS_IN_FLIGHT[db.dialect] : 1
  }

  /** Resolves once the events are committed. */
  write(events: NormEvent[]): Promise<void> {
    if (!events.length) return Promise.resolve()
    return new Promise((resolve, reject) => {
      this.pending.push({ events, resolve, reject })
      this.kick()
    })
  }

  /** Waits for everything queued so far. */
  idle(): Promise<void> {
    if (!this.active && !this.scheduled && !this.pending.length) return Promise.resolve()
    return new Promise((r) => this.idleWaiters.push(r))
  }

  /** Starts another commit when there is work and a free slot. */
  private kick() {
    if (this.scheduled || this.active >= this.concurrency || !this.pending.length) return
    this.scheduled = true
    // setImmediate lets every request parsed in this turn of the event loop join the batch.
    setImmediate(() => {
      this.scheduled = false
      void this.drainOne()
    })
  }

  private async drainOne(): Promise<void> {
    if (!this.pending.length || this.active >= this.concurrency) return
    this.active++
    const batch: Pending[] = []
    let n = 0
    try {
      // A failed start (store unreachable) is retried by the next commit.
      this.ready ??= this.init().catch((e) => {
        this.ready = undefined
        throw e
      })
      await this.ready
      while (this.pending.length && n < MAX_ROWS_PER_TX) {
        const p = this.pending.shift()!
        batch.push(p)
        n += p.events.length
      }
      // What arrives while this commit runs may start the next one (PostgreSQL: up to `concurrency`).
      this.kick()
      const started = performance.now()
      let ok = false
      try {
        await this.commit(batch.length === 1 ? batch[0].events : batch.flatMap((p) => p.events))
        ok = true
      } finally {
        this.observe?.(n, (performance.now() - started) / 1000, ok)
      }
      for (const p of batch) p.resolve()
    } catch (e) {
      this.log.error('event batch commit failed', { error: String(e), events: n })
      for (const p of batch) p.reject(e)
      if (!batch.length) for (const p of this.pending.splice(0)) p.reject(e)
    } finally {
      this.active--
      this.kick()
      if (!this.active && !this.scheduled && !this.pending.length)
        for (const r of this.idleWaiters.splice(0)) r()
    }
  }

  private stream(gameId: string, env: string): Stream {
    let byEnv = this.streams.get(gameId)
    if (!byEnv) {
      byEnv = new Map()
      this.streams.set(gameId, byEnv)
    }
    let st = byEnv.get(env)
    if (!st) {
      st = new Stream(gameId, env)
      byEnv.set(env, st)
    }
    return st
  }

  private *allStreams(): Generator<Stream> {
    for (const byEnv of this.streams.values()) yield* byEnv.values()
  }

  private async init() {
    const max = await this.db.get<{ m: number | null }>('SELECT MAX(id) AS m FROM ingest_events')
    const maxInv = await this.db.get<{ m: number | null }>('SELECT MAX(id) AS m FROM ingest_invocations')
    this.lastId = Math.max(Number(max?.m ?? 0), Number(maxInv?.m ?? 0))
    const rows = await this.db.all<{ game_id: string; env: string; user_id: string }>(
      'SELECT DISTINCT game_id, env, user_id FROM ingest_exposures',
    )
    for (const r of rows) this.stream(r.game_id, r.env).exposed.add(r.user_id)
  }

  /** The cached sketch of a minute; concurrent commits share one load and one object. */
  private sketch(st: Stream, minute: number): Promise<Sketch> {
    const hit = st.sketches.get(minute)
    if (hit) return Promise.resolve(hit)
    const k = `${st.gameId}${sep}${st.env}${sep}${minute}`
    let loading = this.loadingSketches.get(k)
    if (!loading) {
      loading = this.db
        .get<{ sketch: string; version: number }>(
          'SELECT sketch, version FROM ingest_online WHERE game_id = ? AND env = ? AND minute = ?',
          [st.gameId, st.env, minute],
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
            owner.st.sketches.delete(owner.minute)
          }
          this.sketchOrder.set(k, { st, minute })
          st.sketches.set(minute, sk)
          return sk
        })
        .finally(() => this.loadingSketches.delete(k))
      this.loadingSketches.set(k, loading)
    }
    return loading
  }

  private async commit(events: NormEvent[]): Promise<void> {
    const now = Date.now()
    // The per-event work runs in plain functions, which the JIT optimizes better than async ones.
    const { ev, invocations, parts, partOf } = this.gather(events, now)
    const loads: Promise<void>[] = []
    for (const p of parts.values())
      for (const [minute, slot] of p.online)
        if (!slot.sk)
          loads.push(
            this.sketch(p.s, minute).then((sk) => {
              for (const who of slot.whos) if (sk.h.add(who)) slot.changed = true
              slot.sk = sk
            }),
          )
    await Promise.all(loads)
    conversions(events, partOf)
    const ordered = [...parts.values()]
    if (ordered.length > 1) ordered.sort((a, b) => byText(a.s.gameId, b.s.gameId) || byText(a.s.env, b.s.env))
    await this.persistRows({ events: ev, invocations, ...rollupRows(ordered) })
    this.remember(ordered)
  }

  /** One pass over the events: raw rows, and each stream's rollup keys not yet known to be stored. */
  private gather(events: NormEvent[], now: number) {
    // Time-ordered integer ids: receive time in ms x 1024 plus a counter (exact in a double until
    // the year 2248). Starts past the largest stored id, so a restart with a clock step back
    // never collides. The loop below never suspends, so it numbers its rows alone. An
    // invocation row has the id of the event it came from.
    const firstId = Math.max(this.lastId, now * 1024 - 1) + 1
    const cols: Param[] = new Array(events.length * EVENT_WIRE_WIDTH)
    const props: string[] = new Array(events.length)
    const streams: string[] = []
    const ev: EventRows = { firstId, receivedAt: now, streams, cols, props }
    const invocations: Param[] = []
    const parts = new Map<Stream, Part>()
    const partOf: Part[] = new Array(events.length)
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
          part = new Part(st, streams.length / 2)
          parts.set(st, part)
          streams.push(gameId, env)
        }
        lastGame = gameId
        lastEnv = env
      }
      partOf[i] = part
      const st = part.s
      const id = firstId + i
      let k = i * EVENT_WIRE_WIDTH
      cols[k++] = part.index
      cols[k++] = e.event
      cols[k++] = ts
      cols[k++] = userId
      cols[k++] = e.sessionId
      cols[k++] = e.amountCents
      cols[k++] = e.currency
      cols[k++] = e.durationMs
      cols[k++] = e.network
      cols[k] = e.level
      props[i] = propsJson(e.props)
      if (e.payment) {
        const { orderId, status } = e.payment
        let byStatus = part.payments.get(orderId)
        if (!byStatus) {
          byStatus = new Map()
          part.payments.set(orderId, byStatus)
        }
        if (!byStatus.has(status))
          byStatus.set(status, [
            gameId,
            env,
            orderId,
            status,
            e.payment.amountCents,
            e.currency,
            userId,
            ts,
            now,
          ])
      }
      if (e.event === 'function.invoke') {
        const fn = s(pick(e.props, 'functionId')) ?? s(pick(e.props, 'function_id')) ?? 'unknown'
        // success or failure (spec 1, /invocations): an outcome that says anything but success
        // (error, timeout, failed) is a failure; none at all counts as the call succeeding.
        const said = s(pick(e.props, 'outcome'))
        const outcome = said == null || said === 'success' ? 'success' : 'failure'
        const dur = e.durationMs
        invocations.push(
          id,
          gameId,
          env,
          ts,
          now,
          fn,
          s(pick(e.props, 'actor')),
          outcome,
          dur,
          s(pick(e.props, 'traceId')) ?? s(pick(e.props, 'trace_id')),
        )
        const hour = floorTo(ts, HOUR)
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
      if (userId) {
        if (!st.seen.has(userId)) {
          const prev = part.firstSeen.get(userId)
          if (prev === undefined || ts < prev) part.firstSeen.set(userId, ts)
        }
        if (DAU_EVENTS.has(e.event)) {
          const day = floorTo(ts, DAY)
          if (!st.days.get(day)?.has(userId)) {
            let users = part.userDays.get(day)
            if (!users) {
              users = new Set()
              part.userDays.set(day, users)
            }
            users.add(userId)
          }
        }
        if (e.event === 'experiment_exposure') {
          const exp = s(pick(e.props, 'exp'))
          const variant = s(pick(e.props, 'variant'))
          if (exp && variant) {
            let users = part.exposures.get(exp)
            if (!users) {
              users = new Map()
              part.exposures.set(exp, users)
            }
            const prev = users.get(userId)
            if (!prev || ts < prev[1]) users.set(userId, [variant, ts])
            st.exposed.add(userId)
          }
        }
      }
      const who = userId ?? e.sessionId
      if (who && ONLINE_EVENTS.has(e.event)) {
        const minute = floorTo(ts, MINUTE)
        // Cached sketches are updated in place; missing ones are loaded once per commit below,
        // so the loop never suspends per event.
        let slot = part.online.get(minute)
        if (!slot) {
          slot = { sk: st.sketches.get(minute), whos: [], changed: false }
          part.online.set(minute, slot)
        }
        if (!slot.sk) slot.whos.push(who)
        else if (slot.sk.h.add(who)) slot.changed = true
      }
    }
    this.lastId = firstId + events.length - 1
    return { ev, invocations, parts, partOf }
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
