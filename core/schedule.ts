import type { Logger } from './log'

/** A periodic job: gets a signal that aborts when the app stops. */
export type ScheduledJob = (signal: AbortSignal) => Promise<void> | void

export interface ScheduleOptions {
  /** Run once at start instead of waiting one period. Default false. */
  runAtStart?: boolean
}

/**
 * One schedule for every periodic job of the platform (`ctx.schedule(name, everyMs, job)`).
 *
 * Contract, which callers rely on:
 * - a job never overlaps itself: the next run starts only after the previous one settled;
 * - `name` is unique in the app (a second registration is a startup error);
 * - jobs start after every plugin's `onStart` hook and stop (abort signal, then awaited) before the
 *   plugins' stop hooks run.
 *
 * This is the single-instance implementation: every instance runs its own ticks. Issue 36 makes
 * it one run per tick across the instances that share a store; callers do not change.
 */
export class Scheduler {
  private jobs = new Map<string, { everyMs: number; job: ScheduledJob; opts: ScheduleOptions }>()
  private timers = new Map<string, Timer>()
  private running = new Set<Promise<void>>()
  private abort = new AbortController()
  private started = false

  constructor(private log: Logger) {}

  add(name: string, everyMs: number, job: ScheduledJob, opts: ScheduleOptions = {}): void {
    if (this.jobs.has(name)) throw new Error(`scheduled job '${name}' registered twice`)
    if (!(everyMs > 0)) throw new Error(`scheduled job '${name}' needs a period above 0 ms`)
    this.jobs.set(name, { everyMs, job, opts })
    if (this.started) this.arm(name, opts.runAtStart ? 0 : everyMs)
  }

  start(): void {
    if (this.started) return
    this.started = true
    for (const [name, j] of this.jobs) this.arm(name, j.opts.runAtStart ? 0 : j.everyMs)
  }

  private arm(name: string, delay: number): void {
    if (this.abort.signal.aborted) return
    const timer = setTimeout(() => {
      const j = this.jobs.get(name)
      if (!j) return
      const run = (async () => {
        try {
          await j.job(this.abort.signal)
        } catch (e) {
          this.log.warn('scheduled job failed', { job: name, error: String(e) })
        }
      })()
      this.running.add(run)
      void run.finally(() => {
        this.running.delete(run)
        this.arm(name, j.everyMs)
      })
    }, delay)
    this.timers.set(name, timer)
  }

  /** Aborts the jobs' signal, cancels pending ticks and waits for runs in flight. */
  async stop(): Promise<void> {
    this.abort.abort()
    for (const t of this.timers.values()) clearTimeout(t)
    this.timers.clear()
    await Promise.allSettled([...this.running])
  }
}
