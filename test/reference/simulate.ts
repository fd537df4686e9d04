/**
 * A seeded, deterministic month of one game (issue 35 point 3, the 30-day reference check):
 * 2,000 users over 30 local days in America/New_York, whose clocks go back on 1 November 2026
 * (02:00 EDT -> 01:00 EST, a 25-hour local day inside the window). The traffic is what a game
 * sends (docs/analytics.md, "Event vocabulary"): sessions, logins, levels, custom events,
 * feature use, ads, payments in two currencies with failures and refunds, server function
 * invocations, heartbeats in the last hour; and what networks do to it: late sends (events that
 * arrive days after their `ts`), duplicate sends (the same `event_id` again) and payment re-sends
 * (the same `order_id` and `status` under a NEW `event_id`, as a client that lost the answer and
 * built the payment again).
 *
 * Nothing here imports the code under test; `oracle.ts` computes the expected numbers from the
 * list this returns and `thirty-days.test.ts` sends it.
 */

export const ZONE = 'America/New_York'
/** The simulated "now": the test holds the clock here (advancing), so the month is always this one. */
export const NOW = Date.parse('2026-11-20T17:00:00Z') // 12:00 EST
export const DAYS = 30
export const USERS = 2000
export const MINUTE = 60_000
export const HOUR = 3_600_000
export const DAY = 86_400_000

export type Route = 'events' | 'payments'

/** One item as it goes on the wire (to `/api/ingest/<route>`), in arrival order. */
export interface Sent {
  route: Route
  /** The JSON object sent. */
  body: Record<string, unknown>
  /** Why it is on the list: the first send, a duplicate (same event_id), a payment re-send (new event_id). */
  kind: 'original' | 'duplicate' | 'resend'
}

export interface Simulation {
  gameId: string
  env: string
  now: number
  zone: string
  /** Local dates (YYYY-MM-DD) of the 30 days, oldest first; the last is today. */
  days: string[]
  /** Requests in the order they are sent: each a route and at most 500 items (see the end of `simulate`). */
  batches: { route: Route; items: Record<string, unknown>[] }[]
  /** Every item in arrival order, with why it was sent. */
  sent: Sent[]
}

/** mulberry32: a small seeded PRNG, so every run generates the same month. */
function rng(seed: number) {
  let a = seed >>> 0
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
  return {
    next,
    int: (lo: number, hi: number) => lo + Math.floor(next() * (hi - lo + 1)),
    chance: (p: number) => next() < p,
    pick: <T>(xs: readonly T[]): T => xs[Math.floor(next() * xs.length)],
  }
}

const fmt = new Intl.DateTimeFormat('en-CA', {
  timeZone: ZONE,
  year: 'numeric',
  month: '2-digit',
  day: '2-digit',
  hour: '2-digit',
  minute: '2-digit',
  hourCycle: 'h23',
})

/** The local date (YYYY-MM-DD) of an instant in the game's zone. */
export function localDate(ms: number): string {
  const p = Object.fromEntries(fmt.formatToParts(new Date(ms)).map((x) => [x.type, x.value]))
  return `${p.year}-${p.month}-${p.day}`
}

/** The instant the local date `d` begins (New York is UTC-4 or UTC-5; midnight is never skipped there). */
export function localMidnight(d: string): number {
  const base = Date.parse(`${d}T00:00:00Z`)
  for (const h of [4, 5]) {
    const t = base + h * HOUR
    const p = Object.fromEntries(fmt.formatToParts(new Date(t)).map((x) => [x.type, x.value]))
    if (`${p.year}-${p.month}-${p.day}` === d && p.hour === '00' && p.minute === '00') return t
  }
  throw new Error(`no midnight found for ${d}`)
}

/** The local date `n` days after `d`. */
export function addDays(d: string, n: number): string {
  return new Date(Date.parse(`${d}T00:00:00Z`) + n * DAY).toISOString().slice(0, 10)
}

const PLATFORMS = ['ANDROID', 'IOS', 'WEB'] as const
const FEATURES = ['daily_quest', 'guild_chat', 'photo_mode'] as const
const COUNTRIES = ['US', 'DE', 'BR', 'JP'] as const
const VERSIONS = ['1.4.0', '1.5.0'] as const
const PRODUCTS = [
  { id: 'gems_small', cents: 99, kind: 'iap' },
  { id: 'gems_big', cents: 499, kind: 'iap' },
  { id: 'starter_pack', cents: 999, kind: 'iap' },
  { id: 'vip_month', cents: 799, kind: 'subscription' },
] as const
const NETWORKS = ['admob', 'unity'] as const
const FUNCTIONS = ['spawn_boss', 'grant_reward', 'matchmake'] as const
const CRASHES = ['c-1a2b', 'c-3c4d', 'c-5e6f'] as const

interface Pending {
  route: Route
  body: Record<string, unknown>
  /** When it arrives (ms; the arrival order is by this, then by `seq`). */
  arrive: number
  seq: number
  kind: Sent['kind']
}

/**
 * The month for `gameId` (its `prod` environment). `seed` picks another month of the same shape.
 */
export function simulate(gameId: string, seed = 35): Simulation {
  const r = rng(seed)
  const env = 'prod'
  const today = localDate(NOW)
  const days = Array.from({ length: DAYS }, (_, i) => addDays(today, i - (DAYS - 1)))
  const pending: Pending[] = []
  let seq = 0
  let ids = 0
  let orders = 0
  const eventId = () => `ev-${seed}-${(++ids).toString(36).padStart(6, '0')}`
  const push = (
    route: Route,
    body: Record<string, unknown>,
    arrive: number,
    kind: Sent['kind'] = 'original',
  ) => pending.push({ route, body, arrive, seq: seq++, kind })
  /** Sends an event: mostly on time; some late (1-4 days after ts), some twice (same event_id). */
  const emit = (route: Route, body: Record<string, unknown>, mayBeLate: boolean) => {
    const ts = Number(body.ts)
    let arrive = ts + r.int(0, 20_000)
    if (mayBeLate && r.chance(0.03)) arrive = ts + r.int(1, 4) * DAY + r.int(0, HOUR)
    arrive = Math.min(arrive, NOW - 1)
    push(route, body, arrive)
    // A duplicate send: the same bytes again, from a few seconds to a day later.
    if (r.chance(0.02)) push(route, { ...body }, Math.min(arrive + r.int(1_000, DAY), NOW - 1), 'duplicate')
    return arrive
  }
  const base = (event: string, ts: number, uid: string | null, attrs: Record<string, unknown>) => ({
    event,
    ts: String(ts),
    game_id: gameId,
    env,
    event_id: eventId(),
    ...(uid ? { uid } : {}),
    attrs,
  })

  /** A payment: order, status, amount and currency at top level (as ingest requires them), the rest in attrs. */
  const payment = (
    ts: number,
    uid: string,
    o: { order_id: string; status: string; amount_cents: number; currency: string },
    attrs: { kind: string; product_id: string; platform: string },
  ) => ({ event: 'payment', ts: String(ts), game_id: gameId, env, event_id: eventId(), uid, ...o, attrs })

  let sessions = 0
  for (let u = 1; u <= USERS; u++) {
    const uid = `u${String(u).padStart(4, '0')}`
    const platform = r.pick(PLATFORMS)
    const country = r.pick(COUNTRIES)
    const version = r.pick(VERSIONS)
    // First day: more players early in the month; a tenth start on the last three days.
    const first = r.chance(0.1) ? r.int(DAYS - 3, DAYS - 1) : Math.floor(r.next() ** 1.3 * DAYS)
    const payer = r.chance(0.15)
    const loyalty = r.next()
    let level = 1
    let firstEvent = true
    for (let di = first; di < DAYS; di++) {
      // Day 0 always; later days with a probability falling with time and rising with loyalty.
      const since = di - first
      if (since > 0 && !r.chance(Math.min(0.9, 0.15 + 0.6 * loyalty) * Math.exp(-since / 18))) continue
      const start = localMidnight(days[di])
      const end = di === DAYS - 1 ? NOW - 2 * HOUR : localMidnight(addDays(days[di], 1))
      const nSessions = r.chance(0.3) ? 2 : 1
      // Sessions in distinct slots of the day, so one user's sessions never overlap.
      const slot = Math.floor((end - start - HOUR) / nSessions)
      for (let si = 0; si < nSessions; si++) {
        let t = start + si * slot + r.int(0, slot - HOUR)
        const sid = `s${++sessions}`
        const list: { route: Route; body: Record<string, unknown> }[] = []
        const add = (route: Route, event: string, attrs: Record<string, unknown> = {}) => {
          t += r.int(5_000, 90_000)
          list.push({ route, body: base(event, t, uid, attrs) })
        }
        t -= 5_000
        add('events', 'session_start', { session_id: sid, platform })
        const bounce = r.chance(0.12)
        if (!bounce) {
          if (r.chance(0.5)) add('events', 'login')
          for (let k = r.int(0, 4); k > 0; k--)
            add('events', 'tap', { target: r.pick(['play', 'menu', 'map']) })
          if (r.chance(0.35)) {
            const feature = r.pick(FEATURES)
            add('events', 'feature_use', { feature, platform, app_version: version, country })
          }
          if (r.chance(0.6)) {
            add('events', 'level_start', { level, episode: 'e1', map: `m${1 + ((level - 1) % 3)}` })
            if (r.chance(0.7)) {
              add('events', 'level_complete', {
                level,
                episode: 'e1',
                map: `m${1 + ((level - 1) % 3)}`,
                duration_ms: r.int(20, 300) * 1000,
              })
              level = Math.min(level + 1, 8)
            } else {
              add('events', 'level_fail', {
                level,
                episode: 'e1',
                map: `m${1 + ((level - 1) % 3)}`,
                x: r.int(0, 100),
                y: r.int(0, 100),
              })
            }
          }
          if (r.chance(0.3)) {
            const metric = r.pick(['FPS', 'LAG', 'MEMORY', 'LOAD_TIME'] as const)
            const value =
              metric === 'FPS'
                ? r.int(300, 600) / 10
                : metric === 'MEMORY'
                  ? r.int(2000, 8000) / 10
                  : metric === 'LAG'
                    ? r.int(20, 300)
                    : r.int(500, 5000)
            add('events', 'perf', { metric, value })
          }
          // Social: each friendship and each guild once (so "total" reads the same as events or as
          // distinct pairs and guilds), invites of 1-3 new players.
          if (r.chance(0.06))
            add('events', 'friend_add', { friend_id: `u${String(r.int(1, USERS)).padStart(4, '0')}` })
          if (r.chance(0.02)) add('events', 'guild_join', { guild_id: `g-${uid}-${sid}` })
          if (r.chance(0.04))
            add('events', 'invite', {
              invited: Array.from({ length: r.int(1, 3) }, (_, i) => `inv-${sid}-${i}`),
            })
          if (r.chance(0.02)) add('events', 'crash', { crashHash: r.pick(CRASHES), message: 'null pointer' })
          if (r.chance(0.25)) {
            const network = r.pick(NETWORKS)
            const filled = r.chance(0.8)
            add('events', 'ad_request', { network, placement: 'reward', filled })
            if (filled)
              add('events', 'ad_impression', {
                network,
                placement: 'reward',
                revenue: r.pick([0.01, 0.015, 0.02]),
              })
          }
          if (payer && r.chance(0.3)) {
            add('events', 'shop_open')
            const product = r.pick(PRODUCTS)
            const failed = r.chance(0.1)
            const order = `o${seed}-${++orders}`
            t += r.int(5_000, 90_000)
            const o = {
              order_id: order,
              status: failed ? 'failed' : 'success',
              amount_cents: product.cents,
              currency: r.chance(0.3) ? 'EUR' : 'USD',
            }
            list.push({
              route: 'payments',
              body: payment(t, uid, o, { kind: product.kind, product_id: product.id, platform }),
            })
          }
        }
        // The session's events before its end (a session of a session_start alone bounced: 1).
        const events = list.length
        add('events', 'session_end', {
          session_id: sid,
          duration_ms: t - Number(list[0].body.ts) + r.int(1, 30) * 1000,
          events,
        })
        for (const item of list) {
          // A user's first event is never late. Its cohort is the day of the user's first stored
          // sight, the earliest ts "within one commit" (docs/analytics.md): had the first event come
          // late, the cohort would depend on which requests a commit (or, after issue 35, a
          // consumer's batch) groups, not on the traffic alone. Later events of the user do come late.
          const arrive = emit(item.route, item.body, !firstEvent)
          firstEvent = false
          const b = item.body
          if (b.event === 'payment') {
            // A payment re-send: same order and status, a new event_id, a little later.
            if (r.chance(0.08))
              push(
                'payments',
                { ...b, event_id: eventId() },
                Math.min(arrive + r.int(1_000, HOUR), NOW - 1),
                'resend',
              )
            // A refund of a success, 1-6 days later (if that is still in the past).
            const when = Number(b.ts) + r.int(1, 6) * DAY
            if (b.status === 'success' && r.chance(0.08) && when < NOW - HOUR)
              emit('payments', { ...b, ts: String(when), event_id: eventId(), status: 'refunded' }, false)
          }
        }
      }
    }
  }

  // The last hour: 120 players online, a heartbeat a minute, some buying; online and realtime read these.
  for (let i = 0; i < 120; i++) {
    const uid = `u${String(1 + ((i * 7) % USERS)).padStart(4, '0')}`
    let t = NOW - r.int(5, 55) * MINUTE + r.int(0, 59_000)
    const sid = `s${++sessions}`
    emit('events', base('session_start', t, uid, { session_id: sid, platform: r.pick(PLATFORMS) }), false)
    for (let m = r.int(1, 8); m > 0 && t + MINUTE < NOW - 1000; m--) {
      t += MINUTE
      emit('events', base('heartbeat', t, uid, { session_id: sid }), false)
    }
    if (r.chance(0.2) && t + 10_000 < NOW - 1000) {
      const b = payment(
        t + 10_000,
        uid,
        {
          order_id: `o${seed}-${++orders}`,
          status: 'success',
          amount_cents: 299,
          currency: r.chance(0.5) ? 'EUR' : 'USD',
        },
        { kind: 'iap', product_id: 'gems_small', platform: 'IOS' },
      )
      const arrive = emit('payments', b, false)
      if (r.chance(0.4))
        push('payments', { ...b, event_id: eventId() }, Math.min(arrive + 2_000, NOW - 1), 'resend')
    }
  }

  // Server function invocations (no user), a few a day over the last 25 days.
  for (let d = 25 * 24; d > 1; d--) {
    if (!r.chance(0.7)) continue
    const ts = NOW - d * HOUR + r.int(0, HOUR - 1)
    const functionId = r.pick(FUNCTIONS)
    const failure = r.chance(functionId === 'matchmake' ? 0.2 : 0.05)
    emit(
      'events',
      base('function.invoke', ts, null, {
        functionId,
        actor: `agent-${r.int(1, 3)}`,
        outcome: failure ? 'failure' : 'success',
        durationMs: r.int(2, 400),
        traceId: `t-${d}`,
      }),
      false,
    )
  }

  pending.sort((a, b) => a.arrive - b.arrive || a.seq - b.seq)
  const sent: Sent[] = pending.map((p) => ({ route: p.route, body: p.body, kind: p.kind }))
  // Requests: the arrivals in windows; each window's events (500) go in one request, then the
  // payments that arrived in the same window in another, each route in arrival order.
  const batches: Simulation['batches'] = []
  let events: Record<string, unknown>[] = []
  let payments: Record<string, unknown>[] = []
  const flush = () => {
    if (events.length) batches.push({ route: 'events', items: events })
    if (payments.length) batches.push({ route: 'payments', items: payments })
    events = []
    payments = []
  }
  for (const s of sent) {
    if (s.route === 'events') events.push(s.body)
    else payments.push(s.body)
    if (events.length === 500 || payments.length === 500) flush()
  }
  flush()
  return { gameId, env, now: NOW, zone: ZONE, days, batches, sent }
}
