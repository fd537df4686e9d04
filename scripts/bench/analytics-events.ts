import { DAY } from '../../plugins/analytics/lib/time'
import { type NormEvent, validateEvents } from '../../plugins/ingest/signed/validate'
import { uuidv7 } from '../../sdk/uuid'

/**
 * The generated events of the analytics benchmarks (`analytics.ts`, `analytics-behavior.ts`):
 * one commit's events at simulated time `t`, a mix of the vocabulary, one in 100 a payment.
 * `behavior`: part of the `level_up` share becomes level_start / level_complete / level_fail
 * (with episode, map, x and y) and feature_use (20 features, a platform), so the behavior and
 * level rollups have something to count; the rest of the mix is as `analytics.ts` has it.
 */
export function analyticsBatch(
  o: { gameId: string; users: number; total: number; days: number; perCommit: number; behavior?: boolean },
  t: number,
  order: { n: number },
): NormEvent[] {
  const list: Record<string, unknown>[] = []
  const pays: Record<string, unknown>[] = []
  for (let i = 0; i < o.perCommit; i++) {
    const uid = `u${Math.floor(Math.random() * o.users)}`
    const ts = String(Math.round(t + (i * DAY) / (o.total / o.days)))
    // As the SDK sends them: each event with its own UUIDv7 id (ingest keeps them for dedup).
    const base = { game_id: o.gameId, env: 'prod', uid, ts, event_id: uuidv7() }
    const r = Math.random()
    if (r < 0.01)
      pays.push({
        ...base,
        event: 'payment',
        order_id: `o${order.n++}`,
        status: 'success',
        amount_cents: 199 + (i % 5) * 100,
        attrs: { kind: 'iap', platform: 'IOS', product_id: `p${i % 8}` },
      })
    else if (r < 0.08)
      list.push({ ...base, event: 'session_start', attrs: { session_id: `s${uid}`, platform: 'ANDROID' } })
    else if (r < 0.12) list.push({ ...base, event: 'login' })
    else if (r < 0.16)
      list.push({
        ...base,
        event: 'session_end',
        attrs: { session_id: `s${uid}`, duration_ms: 60_000 + (i % 100) * 1000, events: 1 + (i % 9) },
      })
    else if (r < 0.2)
      list.push({
        ...base,
        event: 'ad_impression',
        attrs: { network: i % 2 ? 'admob' : 'unity', revenue: 0.01 },
      })
    else if (r < 0.45) list.push({ ...base, event: 'heartbeat' })
    else if (o.behavior && r < 0.6) {
      const level = String(1 + (i % 30))
      const kind = r < 0.52 ? 'level_start' : r < 0.57 ? 'level_complete' : 'level_fail'
      list.push({
        ...base,
        event: kind,
        attrs: {
          level,
          episode: `e${Math.floor((i % 30) / 10)}`,
          map: `m${i % 3}`,
          duration_ms: kind === 'level_complete' ? 20_000 + (i % 60) * 1000 : undefined,
          x: kind === 'level_fail' ? Math.random() * 100 : undefined,
          y: kind === 'level_fail' ? Math.random() * 100 : undefined,
        },
      })
    } else if (o.behavior && r < 0.65)
      list.push({
        ...base,
        event: 'feature_use',
        attrs: { feature: `f${i % 20}`, platform: i % 2 ? 'IOS' : 'ANDROID' },
      })
    else list.push({ ...base, event: 'level_up', level: String(i % 50) })
  }
  return [
    ...validateEvents(list, { payments: false }).events,
    ...validateEvents(pays, { payments: true }).events,
  ]
}
