/**
 * A small, plausible game's events for the console's tests, screenshots and benchmark: players
 * who arrive over `days` days and fade away, sessions, logins, payments, ads, levels with death
 * points around a few hot spots, feature use and an experiment's exposures and conversions.
 * Deterministic for a given seed, so screenshots look alike from run to run.
 */

import { rng } from '../../plugins/ml/algorithms/data'

const DAY = 86_400_000

export interface GeneratedEvents {
  events: Record<string, unknown>[]
  payments: Record<string, unknown>[]
}

const HOT = [
  [22, 70],
  [61, 35],
  [80, 80],
] as const
const FEATURES = ['daily_quest', 'guild_chat', 'shop', 'leaderboard', 'photo_mode']
const PRODUCTS = ['gems_small', 'gems_large', 'starter_pack', 'season_pass']

export function gameEvents(o: {
  gameId: string
  env?: string
  users: number
  days: number
  /** Experiment id whose variants `control` and `treatment` the players are exposed to. */
  experimentId?: string
  now?: number
  seed?: number
}): GeneratedEvents {
  const r = rng(o.seed ?? 7)
  const env = o.env ?? 'prod'
  const now = o.now ?? Date.now()
  const start = now - o.days * DAY
  const events: Record<string, unknown>[] = []
  const payments: Record<string, unknown>[] = []
  let order = 0
  for (let u = 0; u < o.users; u++) {
    const uid = `player-${u}`
    const platform = r() < 0.55 ? 'ANDROID' : r() < 0.8 ? 'IOS' : 'WEB'
    const first = start + Math.floor(r() * o.days) * DAY
    const loyalty = 0.25 + r() * 0.6
    const variant = r() < 0.5 ? 'control' : 'treatment'
    let exposed = false
    for (let day = first; day < now; day += DAY) {
      // Each later day the player comes back with a chance that fades with time.
      const age = (day - first) / DAY
      if (age > 0 && r() > loyalty ** Math.sqrt(age)) continue
      const sessions = 1 + Math.floor(r() * 2.5)
      for (let s = 0; s < sessions; s++) {
        let t = day + Math.floor(r() * (DAY - 3_600_000))
        if (t > now - 60_000) t = now - 60_000 - Math.floor(r() * 3_600_000)
        const sid = `${uid}-${Math.round(t / 1000)}`
        const base = { game_id: o.gameId, env, uid, session_id: sid, platform }
        const at = (dt: number) => String(t + dt)
        events.push({ ...base, event: 'session_start', ts: at(0) }, { ...base, event: 'login', ts: at(1) })
        let dt = 2000
        const step = () => {
          dt += 5000 + Math.floor(r() * 40_000)
          return at(dt)
        }
        if (o.experimentId && !exposed) {
          exposed = true
          events.push({ ...base, event: 'experiment_exposure', ts: step(), exp: o.experimentId, variant })
        }
        const levels = Math.floor(r() * 4)
        for (let l = 0; l < levels; l++) {
          const level = String(1 + Math.min(11, Math.floor(age + l + r() * 3)))
          const episode = `episode-${1 + Math.floor((Number(level) - 1) / 4)}`
          const map = `map-${1 + ((Number(level) - 1) % 3)}`
          events.push({ ...base, event: 'level_start', ts: step(), level, episode, map })
          if (r() < 0.3 + Number(level) * 0.04) {
            const [hx, hy] = HOT[Math.floor(r() * HOT.length)]
            events.push({
              ...base,
              event: 'level_fail',
              ts: step(),
              level,
              episode,
              map,
              x: Math.max(0, Math.min(100, hx + (r() - 0.5) * 24)),
              y: Math.max(0, Math.min(100, hy + (r() - 0.5) * 24)),
            })
          } else
            events.push({
              ...base,
              event: 'level_complete',
              ts: step(),
              level,
              episode,
              map,
              duration_ms: 30_000 + Math.floor(r() * 90_000),
            })
        }
        if (r() < 0.6)
          events.push({
            ...base,
            event: 'feature_use',
            ts: step(),
            feature: FEATURES[Math.floor(r() * r() * 5)],
          })
        if (r() < 0.35) {
          const network = r() < 0.6 ? 'admob' : 'unity'
          const filled = r() < 0.85
          events.push({ ...base, event: 'ad_request', ts: step(), network, placement: 'rewarded', filled })
          if (filled)
            events.push({
              ...base,
              event: 'ad_impression',
              ts: step(),
              network,
              placement: 'rewarded',
              revenue: 0.004 + r() * 0.02,
            })
        }
        const buyer = variant === 'treatment' ? 0.09 : 0.06
        if (r() < buyer) {
          events.push({ ...base, event: 'shop_purchase', ts: step() })
          const product = PRODUCTS[Math.floor(r() * PRODUCTS.length)]
          payments.push({
            ...base,
            event: 'payment',
            ts: step(),
            order_id: `order-${o.seed ?? 7}-${order++}`,
            status: r() < 0.95 ? 'success' : 'refunded',
            amount_cents: [199, 999, 499, 1499][PRODUCTS.indexOf(product)],
            currency: 'EUR',
            kind: product === 'season_pass' ? 'subscription' : 'iap',
            product_id: product,
          })
        }
        if (r() < 0.05)
          events.push({
            ...base,
            event: 'friend_add',
            ts: step(),
            friend_id: `player-${Math.floor(r() * o.users)}`,
          })
        events.push({
          ...base,
          event: 'session_end',
          ts: step(),
          duration_ms: dt,
          events: 3 + levels * 2,
        })
      }
    }
  }
  return { events, payments }
}
