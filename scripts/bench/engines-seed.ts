/**
 * The two sides of `engines.ts` (PostgreSQL and MariaDB/MySQL servers) and their common seed:
 * byte for byte the same signed batches and experiments, then a wait for the consumers.
 */
import type { Running } from '../../test/process'
import { eventsBody, shapes } from './events'
import { consumersCaughtUp, paymentsBody, sign } from './ingest-load'

const DAY = 86_400_000
const GAME = '@@GAME@@'

export type EngineName = 'postgres' | 'mysql'
export interface Side {
  engine: EngineName
  server: Running
  token: string
  gameId: string
  dir: string
  /** Events acknowledged (200) over every window, payments apart. */
  ackedEvents: number
  /** Seed requests answered 503 and sent again. */
  retried: number
  stored: () => Promise<number>
  /** The /proc stat files of the processes (PostgreSQL) or threads (MySQL) serving its connections. */
  serving: () => Promise<string[]>
  drop: () => Promise<void>
}

export const get = (s: Side, path: string) =>
  fetch(`${s.server.base}${path}`, { headers: { authorization: `Bearer ${s.token}` } })

/** Seconds until every consumer of the log has taken in all that is committed. */
export const catchUp = (s: Side): Promise<number> => consumersCaughtUp(s.server.base, s.token)

/** The seed, made once: the same bodies go to both servers (the game's id put in per server). */
export function seedBodies(seedBatches: number): Array<{ path: string; body: string; events: number }> {
  const pool = shapes(GAME)
  const seq = { order: 0 }
  const t0 = Date.now() - 30 * DAY
  return Array.from({ length: seedBatches }, (_, i) => {
    const at = t0 + (i / seedBatches) * 30 * DAY
    return i % 100 === 99
      ? { path: '/api/ingest/payments', body: paymentsBody(GAME, 100, at, seq), events: 0 }
      : { path: '/api/ingest/events', body: eventsBody(pool, 100, at), events: 100 }
  })
}

export async function seed(s: Side, bodies: ReturnType<typeof seedBodies>): Promise<void> {
  let next = 0
  await Promise.all(
    Array.from({ length: 4 }, async () => {
      while (next < bodies.length) {
        const b = bodies[next++]!
        const body = b.body.replaceAll(GAME, s.gameId)
        // A 503 (the store did not answer in time on a loaded machine) or a dropped connection is
        // sent again, as an SDK does.
        for (let attempt = 0; ; attempt++) {
          const r = await fetch(`${s.server.base}${b.path}`, {
            method: 'POST',
            headers: sign(body),
            body,
          }).catch((e) => String(e))
          if (typeof r !== 'string') await r.arrayBuffer()
          if (typeof r !== 'string' && r.status === 200) break
          const why = typeof r === 'string' ? r : r.status
          if ((why !== 503 && typeof why !== 'string') || attempt === 10)
            throw new Error(`${s.engine} seed ${b.path}: ${why}`)
          s.retried++
          await Bun.sleep(500)
        }
        s.ackedEvents += b.events
      }
    }),
  )
  for (let i = 0; i < 5; i++) {
    const r = await fetch(`${s.server.base}/api/experiments`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${s.token}` },
      body: JSON.stringify({
        gameId: s.gameId,
        environment: 'prod',
        name: `bench ${i}`,
        salt: `salt-${i}`,
        config: {
          variants: [
            { name: 'control', weight: 50 },
            { name: 'treatment', weight: 50 },
          ],
          metrics: { primary: 'purchase', secondary: ['level_up'] },
        },
      }),
    })
    if (r.status !== 201) throw new Error(`${s.engine} experiment: ${r.status} ${await r.text()}`)
  }
  await catchUp(s)
}
