import { setSystemTime } from 'bun:test'
import { signRequest } from '../../sdk/sign'
import { type Engine, type TestApp, makeApp } from '../helpers'
import { NOW, type Simulation, ZONE, simulate } from './simulate'

/**
 * Runs the simulated month against the real app on a clock of its own (bun:test's
 * `setSystemTime`): the app starts a minute before the simulation's `NOW`; request k of the
 * month is sent with the clock held at `NOW + k x STEP_MS`, so every time the app compares
 * (a sketch written again only 2 s after its last write, receive times, dedup windows) comes
 * out the same on a fast machine and a slow one; then the clock runs on in real time from
 * there for the drain and the reads. The game is created, and every batch sent through the
 * signed ingestion route in arrival order, one request after the other.
 */
export const SECRET = 'reference-signing-secret'
/** Simulated time between two requests: the month's 339 requests take 17 s of the app's time. */
export const STEP_MS = 50

export interface Run {
  app: TestApp
  admin: string
  sim: Simulation
  sendMs: number
  /** Stops the app and gives the clock back. */
  stop(): Promise<void>
}

/** The test's clock: held at an instant (`hold`), or running in real time from one (`run`). */
export class Clock {
  private base = 0
  private p0 = 0
  private held = true
  private readonly timer: ReturnType<typeof setInterval>

  constructor(at: number) {
    this.run(at)
    this.timer = setInterval(() => {
      if (!this.held) setSystemTime(new Date(this.base + Math.round(performance.now() - this.p0)))
    }, 2)
  }

  hold(at: number): void {
    this.held = true
    setSystemTime(new Date(at))
  }

  run(from: number): void {
    this.base = from
    this.p0 = performance.now()
    this.held = false
    setSystemTime(new Date(from))
  }

  release(): void {
    clearInterval(this.timer)
    setSystemTime()
  }
}

export async function runMonth(engine: Engine): Promise<Run> {
  const clock = new Clock(NOW - 60_000)
  const app = await makeApp(engine, {
    plugins: {
      games: {},
      ingest: { signing_secret: SECRET, purge_interval_minutes: 0 },
      analytics: { warehouse: { dsn: 'embedded' } },
    },
  })
  try {
    const admin = await app.token('admin')
    const g = await app.req('POST', '/api/games', {
      token: admin,
      body: {
        name: 'Reference Month',
        genre: 'PUZZLE',
        platforms: ['ANDROID', 'IOS'],
        timezone: ZONE,
        defaultCurrency: 'USD',
      },
    })
    if (g.status !== 201) throw new Error(`creating the game answered ${g.status} ${JSON.stringify(g.body)}`)
    // REFERENCE_SEED=<n>: another month of the same shape (the lists of known differences are seed 35's).
    const sim = simulate(g.body.id, Number(process.env.REFERENCE_SEED ?? 35))
    const t0 = performance.now()
    for (const [k, b] of sim.batches.entries()) {
      clock.hold(NOW + k * STEP_MS)
      const body = JSON.stringify(b.items)
      const sig = await signRequest(SECRET, body)
      const res = await app.req('POST', `/api/ingest/${b.route}`, {
        raw: body,
        headers: { 'content-type': 'application/json', ...sig },
      })
      if (res.status !== 200)
        throw new Error(`ingest ${b.route} answered ${res.status}: ${JSON.stringify(res.body)}`)
    }
    clock.run(NOW + sim.batches.length * STEP_MS)
    await app.events.drain()
    const sendMs = performance.now() - t0
    return {
      app,
      admin,
      sim,
      sendMs,
      stop: async () => {
        await app.stop()
        clock.release()
      },
    }
  } catch (e) {
    await app.stop()
    clock.release()
    throw e
  }
}
