import { consumerMigrations } from './auth/migrations'
import { type Db, migrate } from './db'
import {
  type Attempt,
  type CursorRow,
  Horizon,
  LostLease,
  START,
  Trimmer,
  WHOLE,
  before,
  cursorOf,
  deliverable,
  healthOf,
  pendingOf,
  statusOf,
} from './event-log-cursor'
import { Parking, consumerMetrics, parkRow, parkedCounts, parkedRows } from './event-log-park'
import { SharedReads } from './event-log-reads'
import { performRebuild } from './event-log-rebuild'
import type {
  Appended,
  ConsumerStatus,
  EventLogService,
  LogConsumer,
  LogPosition,
  LogSource,
} from './event-log-types'
import type { Logger } from './log'
import type { Metrics } from './metrics'
import type { HealthResult } from './plugin'
import { turn, wakeOrTimeout, within } from './turn'

export type * from './event-log-types'
export { PG_SEQ_SQL } from './event-log-types'

export interface EventLogOptions {
  db: Db
  instanceId: string
  log: Logger
  metrics?: Metrics
  /** How long a lease lasts without renewal: another instance takes a consumer over after it. */
  leaseMs?: number
  /** How often an idle consumer looks for new rows when nothing notifies it. */
  pollMs?: number
  /**
   * After a batch that was not full (the consumer is caught up), how long it lets rows gather
   * before its next step: one transaction then takes in many commits instead of one each.
   */
  gatherMs?: number
  /** How often the source learns where the slowest consumer is, or the head (`LogSource.trim`); 10 s. */
  trimMs?: number
  clock?: () => number
}

/**
 * The event log's consumers (`ctx.events`). Each consumer of a name runs on one instance at a time
 * (a lease row in `liveops_consumers`, renewed every step, taken over once it lapses); each step
 * reads a batch after the cursor, hands it to the consumer and moves the cursor in one
 * transaction, conditional on the lease and on the cursor being where it was read: a step that
 * lost its lease rolls back whole, so every row is counted once. On PostgreSQL only rows of
 * transactions older than the oldest one in flight are read, so a late commit is never skipped.
 */
export class EventLog implements EventLogService {
  private source: LogSource | undefined
  private readonly consumers = new Map<string, LogConsumer>()
  private readonly busy = new Map<string, Promise<number>>()
  /** The drain reads wait for (`settle`, at most its time: a backlog held every read 10-30 s) while it runs. */
  private settling: Promise<void> | undefined
  private readonly settled = () => {
    this.settling = undefined
  }
  private readonly wakers = new Set<() => void>()
  /** Woken by `stop` alone: a failing consumer's backoff. */
  private readonly stopping = new Set<() => void>()
  /** Failed batches narrowed down to the row that fails, and rows set aside (core/event-log-park.ts). */
  private readonly parking = new Parking()
  /** Until when this instance holds each consumer's lease, as it last renewed it. */
  private readonly heldUntil = new Map<string, number>()
  /** Recent reads, shared by the consumers moving together (`SharedReads`). */
  private readonly reads = new SharedReads()
  private readonly horizon = new Horizon()
  private readonly trimmer: Trimmer
  private running = false
  /** While `stop` runs: a rebuild's reset ends at its next slice (the next start does it again). */
  private halting = false
  private loops: Promise<void>[] = []
  private readonly leaseMs: number
  private readonly pollMs: number
  private readonly gatherMs: number
  private readonly now: () => number

  constructor(private readonly o: EventLogOptions) {
    this.leaseMs = o.leaseMs ?? 10_000
    this.pollMs = o.pollMs ?? 250
    // Well inside a lease: a holder gathering rows must renew it before it lapses.
    this.gatherMs = Math.min(o.gatherMs ?? 500, this.leaseMs / 4)
    this.now = o.clock ?? Date.now
    this.trimmer = new Trimmer(o.trimMs)
    if (o.metrics) consumerMetrics(o.metrics, () => (this.source ? this.status() : Promise.resolve([])))
  }

  /** Where the log, the cursors and the consumers' results live. */
  private get db(): Db {
    return this.source?.db ?? this.o.db
  }

  provide(source: LogSource): void {
    if (this.source) throw new Error('the event log is provided twice')
    this.source = source
  }

  consume(consumer: LogConsumer): void {
    if (this.consumers.has(consumer.name)) throw new Error(`consumer '${consumer.name}' registered twice`)
    this.consumers.set(consumer.name, consumer)
    if (this.running) this.loops.push(this.loop(consumer))
  }

  names(): string[] {
    return [...this.consumers.keys()]
  }

  notify(appended?: Appended): void {
    if (appended) this.reads.append(appended)
    for (const w of this.wakers) w()
  }

  async start(): Promise<void> {
    const db = this.db
    // A separate event store gets the cursor table of core's migration 006 under a ledger of its own.
    if (db !== this.o.db) await migrate(db, [{ plugin: 'core.consumers', migrations: consumerMigrations }])
    for (const [name, c] of this.consumers) {
      // A new consumer starts past the rows stored before the log existed (seq 0), which the
      // rollups of their own commits counted; a rebuild reads them too.
      await db.run(
        'INSERT INTO liveops_consumers (name, seq, pos) VALUES (?, 0, ?) ON CONFLICT (name) DO NOTHING',
        [name, Number.MAX_SAFE_INTEGER],
      )
      await c.init?.(db)
    }
    this.running = true
    this.loops = [...this.consumers.values()].map((c) => this.loop(c))
    this.trimmer.start(() => this.db, this.source, this.consumers, this.o.log)
  }

  async stop(): Promise<void> {
    this.running = false
    this.halting = true
    this.trimmer.stop()
    this.notify()
    for (const w of this.stopping) w()
    await Promise.all(this.loops)
    await Promise.all(this.busy.values()).catch(() => undefined)
    this.halting = false
    this.heldUntil.clear()
    await this.db
      .run('UPDATE liveops_consumers SET lease_owner = NULL, lease_until = NULL WHERE lease_owner = ?', [
        this.o.instanceId,
      ])
      .catch(() => undefined)
  }

  private async loop(c: LogConsumer): Promise<void> {
    while (this.running) {
      let n = 0
      try {
        n = await this.step(c.name)
      } catch (e) {
        this.o.log.error('consumer failed', { consumer: c.name, error: String(e) })
        await wakeOrTimeout(this.stopping, this.parking.delay(c.name, this.pollMs))
        continue
      }
      if (!this.running) continue
      // A full batch: more waits, after a turn; some rows: gather more a moment; none: sleep until
      // a commit wakes it or the poll comes.
      if (n >= (c.batch ?? 1000)) await turn()
      else if (n > 0) await Bun.sleep(this.gatherMs)
      else await wakeOrTimeout(this.wakers, this.pollMs)
    }
  }

  /** One batch of one consumer, serialized within this process; the number of rows taken in. */
  step(name: string): Promise<number> {
    const prev = this.busy.get(name) ?? Promise.resolve(0)
    const next = prev.catch(() => 0).then(() => this.stepNow(name))
    this.busy.set(name, next)
    return next
  }

  private async claim(name: string): Promise<boolean> {
    const now = this.now()
    // Held for more than half a lease yet: no need to write the renewal now (the step's own
    // update still checks that this instance is the owner).
    if ((this.heldUntil.get(name) ?? 0) - now > this.leaseMs / 2) return true
    const n = await this.db.run(
      `UPDATE liveops_consumers SET lease_owner = ?, lease_until = ?
       WHERE name = ? AND (lease_owner = ? OR lease_until IS NULL OR lease_until < ?)`,
      [this.o.instanceId, now + this.leaseMs, name, this.o.instanceId, now],
    )
    if (n !== 1) {
      this.heldUntil.delete(name)
      return false
    }
    // Not held without a break since the last renewal: another instance may have written results
    // this one's memory does not know of.
    if ((this.heldUntil.get(name) ?? 0) <= now) this.consumers.get(name)?.forget?.()
    this.heldUntil.set(name, now + this.leaseMs)
    return true
  }

  private async stepNow(name: string): Promise<number> {
    const c = this.consumers.get(name)
    const source = this.source
    if (!c || !source) return 0
    if (!(await this.claim(name))) return 0
    const hook: Attempt = {}
    try {
      const cur = await this.db.get<CursorRow>('SELECT * FROM liveops_consumers WHERE name = ?', [name])
      if (!cur) return 0
      const n =
        cur.rebuild_request !== null
          ? await this.startRebuild(c, cur, hook)
          : await this.take(c, cur, source, hook)
      hook.after?.()
      if (n > 0) this.parking.succeeded(name)
      return n
    } catch (e) {
      // What the consumer remembered of the rolled-back batch is not stored.
      c.forget?.()
      this.heldUntil.delete(name)
      if (e instanceof LostLease) return 0
      const from = hook.cursor ? cursorOf(hook.cursor) : START
      if (this.parking.failed(name, hook.entries ?? [], e, from) && hook.cursor && hook.entries)
        // Another instance took the consumer meanwhile: the row is its to park, or to count.
        return parkRow(this.db, c, hook.cursor, hook.entries[0], e, {
          instanceId: this.o.instanceId,
          now: this.now,
          log: this.o.log,
          parking: this.parking,
        }).catch((pe) => (pe instanceof LostLease ? 0 : Promise.reject(pe)))
      await this.db
        .run('UPDATE liveops_consumers SET last_error = ? WHERE name = ?', [String(e).slice(0, 500), name])
        .catch(() => undefined)
      throw e
    }
  }

  /**
   * One batch: read and prepared outside any transaction (a SQLite store's one writer is not
   * held while the consumer computes), then written with the cursor's move in one transaction,
   * conditional on the lease and on the cursor being where it was read.
   */
  private async take(c: LogConsumer, cur: CursorRow, source: LogSource, hook: Attempt) {
    const at = cursorOf(cur)
    const below = await this.horizon.below(this.db, this.source)
    const limit = this.parking.limit(c.name, at, c.batch ?? 1000)
    const entries = await this.reads.read(source, at, below, limit, this.db)
    if (!entries.length) return 0
    hook.entries = entries
    hook.cursor = cur
    // Each phase ends with a turn of the event loop: on SQLite a batch's read, gathering and write
    // each hold the thread for tens of ms, and requests (and ingestion's commits) get in between.
    await turn()
    const last = entries[entries.length - 1].at
    // A full batch: more is waiting. On PostgreSQL the next batch is read meanwhile (`prefetch`).
    if (entries.length >= limit && this.db.dialect === 'postgres')
      this.reads.prefetch(source, last, below, limit, this.db)
    const rows = await deliverable(c, cur, entries, source.withheld && ((r) => source.withheld!(r)))
    const prepared = c.prepare ? await c.prepare(rows) : undefined
    await turn()
    const rebuilding = cur.until_seq !== null
    const done = rebuilding && !before(last, { seq: Number(cur.until_seq), pos: Number(cur.until_pos) })
    return this.db.tx(async (tx) => {
      const after = await c.handle(rows, tx, prepared)
      if (typeof after === 'function') hook.after = after as () => void
      const moved = await tx.run(
        `UPDATE liveops_consumers SET seq = ?, pos = ?, delivered = delivered + ?, updated_at = ?,
           last_error = NULL${done ? ', rebuild_from = NULL, until_seq = NULL, until_pos = NULL' : ''}
         WHERE name = ? AND lease_owner = ? AND seq = ? AND pos = ? AND rebuild_request IS NULL`,
        [last.seq, last.pos, entries.length, this.now(), c.name, this.o.instanceId, at.seq, at.pos],
      )
      if (moved !== 1) throw new LostLease(`consumer '${c.name}' moved under this instance`)
      return entries.length
    })
  }

  async drain(name?: string, timeoutMs = 30_000): Promise<void> {
    const source = this.source
    if (!source) return
    const names = name ? [name] : this.names()
    const head = await source.head(this.db)
    const deadline = performance.now() + timeoutMs
    for (const n of names) {
      for (;;) {
        const cur = await this.cursor(n)
        // Caught up, with no rebuild asked and not yet started. A step whose commit the cursor
        // already shows may still be running its after-commit work (`handle`'s returned hook):
        // drained means that is done too, so the step in flight, if any, is awaited.
        if (cur && !before(cur.at, head) && !cur.asked) {
          await this.busy.get(n)?.catch(() => 0)
          break
        }
        const got = await this.step(n)
        if (got > 0) continue
        if (performance.now() > deadline)
          throw new Error(`consumer '${n}' did not catch up in ${timeoutMs} ms`)
        await Bun.sleep(10)
      }
    }
  }

  async settle(timeoutMs: number): Promise<number> {
    // One drain for every read while it runs: a drain each polled the cursors behind answered reads.
    if (timeoutMs > 0 && this.consumers.size && this.source) {
      this.settling ??= this.drain(undefined, timeoutMs).then(this.settled, this.settled)
      await within(this.settling, timeoutMs)
    }
    return this.asOf()
  }

  private async cursor(name: string): Promise<{ at: LogPosition; asked: boolean } | undefined> {
    const r = await this.db.get<CursorRow>(
      'SELECT seq, pos, rebuild_request FROM liveops_consumers WHERE name = ?',
      [name],
    )
    return r && { at: cursorOf(r), asked: r.rebuild_request !== null }
  }

  /**
   * Asks for a rebuild: the instance holding the consumer's lease (this one or another sharing
   * the store) performs it at its next step (`startRebuild`). Resolves once asked; `status()`
   * shows it `rebuilding` until the cursor is back where it was.
   */
  async rebuild(name: string, from?: number): Promise<void> {
    const c = this.consumers.get(name)
    if (!c || !this.source) throw new Error(`no consumer '${name}'`)
    if (from !== undefined && !c.rebuildsFrom)
      throw new Error(`consumer '${name}' rebuilds the whole log only (its results mix events of every time)`)
    await this.db.run('UPDATE liveops_consumers SET rebuild_request = ? WHERE name = ?', [
      from ?? WHOLE,
      name,
    ])
    this.notify()
  }

  /**
   * Performs an asked rebuild (core/event-log-rebuild.ts): the consumer deletes its results (from
   * the date on) in slices, then the cursor goes back to the start of the log. Until it passes
   * where it was (or where an earlier unfinished rebuild was going), rows older than the date are
   * not delivered again: their results were kept.
   */
  private async startRebuild(c: LogConsumer, cur: CursorRow, hook: Attempt) {
    const n = await performRebuild(this.db, c, cur, {
      instanceId: this.o.instanceId,
      leaseMs: this.leaseMs,
      now: this.now,
      log: this.o.log,
      stopping: () => this.halting,
      renewed: (until) => this.heldUntil.set(c.name, until),
    })
    hook.after = () => c.forget?.()
    return n
  }

  /** The consumers' reads of the log served from a shared one, and those that read the store. */
  readCounts(): { shared: number; memory: number; read: number } {
    return { ...this.reads.counts }
  }

  /** Each consumer's cursor and lag (`pendingOf`); `counts: false` reads the times alone (`asOf`), not the rows. */
  async status(o: { counts?: boolean } = {}): Promise<ConsumerStatus[]> {
    const rows = (await this.db.all<CursorRow>('SELECT * FROM liveops_consumers ORDER BY name')).filter((r) =>
      this.consumers.has(r.name),
    )
    const pending = await pendingOf(rows, this.source, this.db, o.counts !== false)
    const parked = o.counts === false ? new Map<string, number>() : await parkedCounts(this.db)
    const now = this.now()
    return rows.map((r) => statusOf(r, pending.get(r.name)!, now, parked.get(r.name) ?? 0))
  }

  parked(name: string, limit: number) {
    return parkedRows(this.db, name, limit)
  }

  async health(): Promise<HealthResult> {
    return healthOf(await this.status())
  }

  async asOf(name?: string): Promise<number> {
    const all = await this.status({ counts: false })
    const mine = name ? all.filter((s) => s.name === name) : all
    return mine.length ? Math.min(...mine.map((s) => s.asOf)) : this.now()
  }
}

export { START as LOG_START }
