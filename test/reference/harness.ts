import { setSystemTime } from 'bun:test'
import { signRequest } from '../../sdk/sign'
import { type Engine, type TestApp, makeApp } from '../helpers'
import { NOW, type Simulation, ZONE, simulate } from './simulate'

/**
 * Runs the simulated month against the real app: the clock held at the simulation's `NOW` and
 * advancing from there in real time (bun:test's `setSystemTime`, re-set every few ms from
 * `performance.now()`; a clock frozen outright would stop the app's own timers that compare
 * `Date.now()`s, such as when a changed sketch is written), the game created, every batch sent
 * through the signed ingestion route in arrival order, one request after the other.
 */
export const SECRET = 'reference-signing-secret'

export interface Run {
  app: TestApp
  admin: string
  sim: Simulation
  sendMs: number
  /** Stops the app and gives the clock back. */
  stop(): Promise<void>
}

export function holdClock(at: number): () => void {
  const p0 = performance.now()
  const tick = () => setSystemTime(new Date(at + Math.round(performance.now() - p0)))
  tick()
  const h = setInterval(tick, 2)
  return () => {
    clearInterval(h)
    setSystemTime()
  }
}

export async function runMonth(engine: Engine): Promise<Run> {
  const release = holdClock(NOW)
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
    const sim = simulate(g.body.id)
    const t0 = performance.now()
    for (const b of sim.batches) {
      const body = JSON.stringify(b.items)
      const sig = await signRequest(SECRET, body)
      const res = await app.req('POST', `/api/ingest/${b.route}`, {
        raw: body,
        headers: { 'content-type': 'application/json', ...sig },
      })
      if (res.status !== 200)
        throw new Error(`ingest ${b.route} answered ${res.status}: ${JSON.stringify(res.body)}`)
    }
    await app.events.drain()
    const sendMs = performance.now() - t0
    return {
      app,
      admin,
      sim,
      sendMs,
      stop: async () => {
        await app.stop()
        release()
      },
    }
  } catch (e) {
    await app.stop()
    release()
    throw e
  }
}
