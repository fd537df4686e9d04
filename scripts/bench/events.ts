import { uuidv7 } from '../../sdk/uuid'

/** Generated event traffic shared by the ingestion benchmarks: 200,000 users, a realistic mix. */
export const USERS = 200_000

/**
 * Event bodies without their `ts`, made once so the generator spends its CPU on sending: 400,000
 * shapes over 200,000 users; a request picks 100 at random and prefixes each with its time.
 */
export function shapes(gameId: string): string[] {
  const out: string[] = []
  for (let i = 0; i < 2 * USERS; i++) {
    const uid = `u${i % USERS}`
    const r = Math.random()
    const base = { game_id: gameId, env: 'prod', uid }
    let e: object
    if (r < 0.05) e = { ...base, event: 'login' }
    else if (r < 0.1) e = { ...base, event: 'session_start', session_id: `s${uid}` }
    else if (r < 0.4) e = { ...base, event: 'heartbeat' }
    else if (r < 0.5)
      e = {
        ...base,
        event: 'function.invoke',
        attrs: {
          functionId: `fn${i % 20}`,
          actor: uid,
          outcome: Math.random() < 0.05 ? 'failure' : 'success',
          durationMs: Math.round(Math.random() * 200),
          traceId: crypto.randomUUID(),
        },
      }
    else e = { ...base, event: 'level_up', level: String(i % 50), network: 'wifi' }
    out.push(JSON.stringify(e).slice(1))
  }
  return out
}

/**
 * A request's events: each with its time and, as the SDK sends them, its own UUIDv7 `event_id`
 * (`--event-ids=0` leaves them out: the traffic of clients that send none).
 */
export function eventsBody(pool: string[], n: number, t: number, eventIds = true): string {
  const parts: string[] = new Array(n)
  for (let i = 0; i < n; i++) {
    const id = eventIds ? `"event_id":"${uuidv7()}",` : ''
    parts[i] = `{${id}"ts":"${Math.round(t + i)}",${pool[Math.floor(Math.random() * pool.length)]}`
  }
  return `[${parts.join(',')}]`
}
