import type { Logger } from './log'
import type { Metrics } from './metrics'
import type { HealthResult } from './plugin'
import { type JobRecord, type ScheduleStore, memoryScheduleStore } from './schedule-store'

/** A periodic job: gets a signal that aborts when the app stops. */
export type ScheduledJob = (signal: AbortSignal) => Promise<void> | void

export interface ScheduleOptions {
  /**
   * A job never run before runs at once instead of waiting one period. (A job whose tick was
   * missed while every instance was down runs at start anyway, once.) Default false.
   */
  runAtStart?: boolean
  /**
   * Runs on every instance, each on its own ticks: for work on this process's own state (a cache
   * refreshed from the store). Default false: one run per tick across the instances.
   */
  perInstance?: boolean
}

export interface SchedulerOptions {
  /** Where ticks are claimed; default this process alone. */
  store?: ScheduleStore
  /** This instance's name in leases, `/healthz` and the log. */
  instanceId?: string
  /**
   * How long a claimed run holds its tick without renewal (renewed every third of it while it
   * runs): a run whose instance died is taken over once this passed. Default 15 s.
   */
  leaseMs?: number
  metrics?: Metrics
}

/** After the store failed to answer, a job's next attempt waits at most this long. */
const STORE_RETRY_MS = 2000

/**
 * One schedule for every periodic job of the platform (`ctx.schedule(name, everyMs, job)`).
 *
 * Contract, which callers rely on:
 * - one run per tick across every instance that shares the store: the instance that claims the
 *   tick (a lease row in `liveops_schedule`) runs it, the others skip it; `perInstance` jobs run
 *   on each instance instead;
 * - a job never overlaps itself, on one instance or across them; a run whose instance died is
 *   taken over after the lease (`leaseMs`);
 * - a tick missed while every instance was down runs once at the next start, not once per
 *   missed period;
 * - each job's last run (when, how long, which instance, its error) is in `/healthz` under
 *   `checks.schedule` and in the `svc_schedule_*` metrics;
 * - `name` is unique in the app (a second registration is a startup error);
 * - jobs start after every plugin's `onStart` hook and stop (abort signal, then awaited) before the
 *   plugins' stop hooks run.
 */
export class Scheduler {
  private jobs = new Map<string, { everyMs: number; job: ScheduledJob; opts: ScheduleOptions }>()
  private timers = new Map<string, Timer>()
  /** Each job's tick in flight (a claim, a run): what `stop` waits for. */
  private running = new Map<string, Promise<void>>()
  private abort = new AbortController()
  private started = false
  private readonly shared: ScheduleStore
  private readonly local = memoryScheduleStore()
  private readonly owner: string
  private readonly leaseMs: number
  private runs?: ReturnType<Metrics['counter']>
  private gauges?: {
    lastRun: ReturnType<Metrics['gauge']>
    duration: ReturnType<Metrics['gauge']>
    failed: ReturnType<Metrics['gauge']>
  }

  constructor(
    private log: Logger,
    opts: SchedulerOptions = {},
  ) {
    this.shared = opts.store ?? this.local
    this.owner = opts.instanceId ?? `pid-${process.pid}`
    this.leaseMs = opts.leaseMs ?? 15_000
    const m = opts.metrics
    if (m) {
      this.runs = m.counter('svc_schedule_runs_total', 'Scheduled job runs on this instance, by outcome', [
        'job',
        'outcome',
      ])
      this.gauges = {
        lastRun: m.gauge(
          'svc_schedule_last_run_timestamp_seconds',
          'When the last run of the job started, on any instance (epoch seconds)',
          ['job'],
        ),
        duration: m.gauge('svc_schedule_last_duration_seconds', 'How long the last run of the job took', [
          'job',
        ]),
        failed: m.gauge('svc_schedule_last_failed', '1 when the last run of the job failed, 0 when not', [
          'job',
        ]),
      }
    }
  }

  add(name: string, everyMs: number, job: ScheduledJob, opts: ScheduleOptions = {}): void {
    if (this.jobs.has(name)) throw new Error(`scheduled job '${name}' registered twice`)
    if (!(everyMs > 0)) throw new Error(`scheduled job '${name}' needs a period above 0 ms`)
    this.jobs.set(name, { everyMs, job, opts })
    if (this.started) void this.register(name)
  }

  /** Records every job in its store and arms its first tick. */
  async start(): Promise<void> {
    if (this.started) return
    this.started = true
    await Promise.all([...this.jobs.keys()].map((name) => this.register(name)))
  }

  private storeOf(name: string): ScheduleStore {
    return this.jobs.get(name)?.opts.perInstance ? this.local : this.shared
  }

  private async register(name: string): Promise<void> {
    const j = this.jobs.get(name)!
    const now = Date.now()
    const first = j.opts.runAtStart ? now : now + j.everyMs
    try {
      const due = await this.storeOf(name).register(name, j.everyMs, first, now)
      this.arm(name, due - now)
    } catch (e) {
      this.log.warn('schedule store unavailable', { job: name, error: String(e) })
      this.arm(name, Math.min(j.everyMs, STORE_RETRY_MS), true)
    }
  }

  private arm(name: string, delay: number, unregistered = false): void {
    if (this.abort.signal.aborted) return
    clearTimeout(this.timers.get(name))
    // setTimeout holds at most 2^31-1 ms; a later tick is re-armed when this one fires.
    const ms = Math.min(2 ** 31 - 1, Math.max(0, delay))
    this.timers.set(
      name,
      setTimeout(() => {
        const p = unregistered ? this.register(name) : this.tick(name)
        this.running.set(name, p)
        void p.finally(() => {
          if (this.running.get(name) === p) this.running.delete(name)
        })
      }, ms),
    )
  }

  /** Claims the tick; the instance that got it runs the job, the others wait for the next one. */
  private async tick(name: string): Promise<void> {
    const j = this.jobs.get(name)
    if (!j || this.abort.signal.aborted) return
    const store = this.storeOf(name)
    const now = Date.now()
    let won: boolean
    try {
      won = await store.claim(name, this.owner, now, now + this.leaseMs, now + j.everyMs)
      if (!won) {
        const next = (await store.nextAt(name)) ?? now + j.everyMs
        // Due but leased: another instance is running it longer than its period.
        this.arm(name, next > now ? next - now : Math.min(j.everyMs, this.leaseMs / 3))
        return
      }
    } catch (e) {
      this.log.warn('schedule store unavailable', { job: name, error: String(e) })
      this.arm(name, Math.min(j.everyMs, STORE_RETRY_MS))
      return
    }
    if (this.abort.signal.aborted) {
      // Stopping while the claim was on its way: the lease goes back unused.
      await store.renew(name, this.owner, 0).catch(() => undefined)
      return
    }
    await this.run(name, j.job, store, now)
    this.arm(name, now + j.everyMs - Date.now())
  }

  private async run(name: string, job: ScheduledJob, store: ScheduleStore, startedAt: number): Promise<void> {
    const renew = setInterval(
      () =>
        void store
          .renew(name, this.owner, Date.now() + this.leaseMs)
          .catch((e) => this.log.warn('schedule lease not renewed', { job: name, error: String(e) })),
      this.leaseMs / 3,
    )
    const t0 = performance.now()
    let error: string | undefined
    try {
      await job(this.abort.signal)
    } catch (e) {
      error = (e as Error)?.message ?? String(e)
      this.log.warn('scheduled job failed', { job: name, error })
    } finally {
      clearInterval(renew)
    }
    const durationMs = performance.now() - t0
    this.runs?.inc({ job: name, outcome: error === undefined ? 'ok' : 'failed' })
    // Unrecorded, the lease runs out and the next tick comes as planned.
    await store
      .finish(name, this.owner, { startedAt, durationMs, error })
      .catch((e) => this.log.warn('schedule run not recorded', { job: name, error: String(e) }))
  }

  /**
   * The `schedule` health check: every job's last run on any instance. Down (not critical: the
   * instance still serves) while a job's last run failed, naming it.
   */
  async health(): Promise<HealthResult> {
    const rows = new Map<string, JobRecord>()
    for (const r of await this.shared.list()) if (this.jobs.has(r.name)) rows.set(r.name, r)
    for (const r of await this.local.list()) if (this.jobs.get(r.name)?.opts.perInstance) rows.set(r.name, r)
    const at = (ms: number | null) => (ms === null ? null : new Date(Number(ms)).toISOString())
    const jobs: Record<string, unknown> = {}
    const failing: string[] = []
    for (const [name, j] of this.jobs) {
      const r = rows.get(name)
      const lastError = r?.last_error ?? null
      if (lastError !== null) failing.push(name)
      jobs[name] = {
        every_ms: j.everyMs,
        scope: j.opts.perInstance ? 'instance' : 'cluster',
        next_run_at: r ? at(r.next_at) : null,
        running_on: r?.lease_owner ?? null,
        last_run_at: r ? at(r.last_started_at) : null,
        last_duration_ms: r?.last_duration_ms ?? null,
        last_instance: r?.last_instance ?? null,
        last_error: lastError,
        last_success_at: r ? at(r.last_success_at) : null,
        runs: Number(r?.runs ?? 0),
      }
      if (this.gauges && r?.last_started_at != null) {
        this.gauges.lastRun.set({ job: name }, Number(r.last_started_at) / 1000)
        this.gauges.duration.set({ job: name }, Number(r.last_duration_ms ?? 0) / 1000)
        this.gauges.failed.set({ job: name }, lastError === null ? 0 : 1)
      }
    }
    return failing.length
      ? { status: 'down', error: `last run failed: ${failing.join(', ')}`, instance: this.owner, jobs }
      : { status: 'up', instance: this.owner, jobs }
  }

  /** Aborts the jobs' signal, cancels pending ticks and waits for runs in flight. */
  async stop(): Promise<void> {
    this.abort.abort()
    for (const t of this.timers.values()) clearTimeout(t)
    this.timers.clear()
    await Promise.allSettled([...this.running.values()])
  }
}
