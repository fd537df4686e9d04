import type { Attrs } from './client'

/**
 * The event vocabulary the analytics read (issue 17 point 1): what a game sends to feed every
 * number of the game analytics (`/api/analytics/...`) and the server analytics
 * (`/api/v1/analytics/...`). Names are the `event` field; attributes travel in `attrs` (the
 * server reads a field at top level or in `attrs`). `session_id`, `duration_ms`, `network`,
 * `level` and `amount_cents` are stored as columns. No server imports: browsers and Bun.
 */
export const EVENTS = {
  /** A session begins: DAU, online users, session counts. attrs: session_id, platform. */
  sessionStart: 'session_start',
  /** A session ends: duration_ms (ms), events (events in the session, for bounce rate). */
  sessionEnd: 'session_end',
  /** A purchase: sent as a payment (order_id, status, amount_cents, currency); attrs kind iap | subscription, product_id, platform. */
  payment: 'payment',
  /** An ad was requested: network, placement, filled (true when an ad came back). */
  adRequest: 'ad_request',
  /** An ad was shown: network, placement, revenue (in the currency's main unit, e.g. 0.012 USD). */
  adImpression: 'ad_impression',
  /** A performance sample: metric FPS | LAG | MEMORY | LOAD_TIME, value (FPS, ms, MB, ms). */
  perf: 'perf',
  /** A crash: crashHash (groups crashes of one cause), message. */
  crash: 'crash',
  /** A friendship made: friend_id. */
  friendAdd: 'friend_add',
  /** A guild joined: guild_id. */
  guildJoin: 'guild_join',
  /** Invitations sent: invited (user ids), for the viral coefficient. */
  invite: 'invite',
  /** A level begun: level, episode, map. */
  levelStart: 'level_start',
  /** A level passed: level, episode, map, duration_ms. */
  levelComplete: 'level_complete',
  /** A level failed: level, episode, map, x and y of the death. */
  levelFail: 'level_fail',
  /** A feature used: feature (its name). */
  featureUse: 'feature_use',
} as const

export type PerfMetric = 'FPS' | 'LAG' | 'MEMORY' | 'LOAD_TIME'
export const PERF_METRICS: readonly PerfMetric[] = ['FPS', 'LAG', 'MEMORY', 'LOAD_TIME']
export type Platform = 'ANDROID' | 'IOS' | 'WEB'

/** Where a level happened. */
export interface LevelAt {
  level: string | number
  episode?: string
  map?: string
}

/** The part of the client the helpers need: `LiveopsClient` fits. */
export interface Tracker {
  track(event: string, attrs?: Attrs, ts?: number): void
  payment(
    p: {
      orderId: string
      status: 'success' | 'refunded' | 'failed'
      amountCents: number
      currency?: string
      attrs?: Attrs
    },
    ts?: number,
  ): void
}

/** Drops undefined fields, so an absent optional attribute stays absent. */
const defined = (a: Record<string, unknown>): Attrs =>
  Object.fromEntries(Object.entries(a).filter(([, v]) => v !== undefined))

const levelAttrs = (l: LevelAt) => ({ level: String(l.level), episode: l.episode, map: l.map })

/**
 * Typed helpers over `track` and `payment`, one per event of the vocabulary:
 *
 *   const events = new GameEvents(client)
 *   events.sessionStart({ sessionId: 's-1', platform: 'IOS' })
 *   events.adImpression({ network: 'admob', revenue: 0.012 })
 */
export class GameEvents {
  constructor(private readonly client: Tracker) {}

  sessionStart(p: { sessionId: string; platform?: Platform }, ts?: number): void {
    this.client.track(EVENTS.sessionStart, defined({ session_id: p.sessionId, platform: p.platform }), ts)
  }

  /** `events`: how many events the session sent (a session of exactly one is a bounce). */
  sessionEnd(p: { sessionId: string; durationMs: number; events?: number }, ts?: number): void {
    this.client.track(
      EVENTS.sessionEnd,
      defined({ session_id: p.sessionId, duration_ms: p.durationMs, events: p.events }),
      ts,
    )
  }

  /** A purchase, as a payment: `kind` iap or subscription; `status` success unless said. */
  purchase(
    p: {
      orderId: string
      kind: 'iap' | 'subscription'
      amountCents: number
      currency: string
      productId?: string
      platform?: Platform
      status?: 'success' | 'refunded' | 'failed'
    },
    ts?: number,
  ): void {
    this.client.payment(
      {
        orderId: p.orderId,
        status: p.status ?? 'success',
        amountCents: p.amountCents,
        currency: p.currency,
        attrs: defined({ kind: p.kind, product_id: p.productId, platform: p.platform }),
      },
      ts,
    )
  }

  adRequest(p: { network: string; filled: boolean; placement?: string }, ts?: number): void {
    this.client.track(
      EVENTS.adRequest,
      defined({ network: p.network, filled: p.filled, placement: p.placement }),
      ts,
    )
  }

  /** `revenue` in the currency's main unit (an impression earns fractions of a cent). */
  adImpression(p: { network: string; revenue: number; placement?: string }, ts?: number): void {
    this.client.track(
      EVENTS.adImpression,
      defined({ network: p.network, revenue: p.revenue, placement: p.placement }),
      ts,
    )
  }

  perf(p: { metric: PerfMetric; value: number }, ts?: number): void {
    this.client.track(EVENTS.perf, { metric: p.metric, value: p.value }, ts)
  }

  crash(p: { crashHash: string; message?: string }, ts?: number): void {
    this.client.track(EVENTS.crash, defined({ crashHash: p.crashHash, message: p.message }), ts)
  }

  friendAdd(p: { friendId: string }, ts?: number): void {
    this.client.track(EVENTS.friendAdd, { friend_id: p.friendId }, ts)
  }

  guildJoin(p: { guildId: string }, ts?: number): void {
    this.client.track(EVENTS.guildJoin, { guild_id: p.guildId }, ts)
  }

  invite(p: { invited: string[] }, ts?: number): void {
    this.client.track(EVENTS.invite, { invited: p.invited }, ts)
  }

  levelStart(p: LevelAt, ts?: number): void {
    this.client.track(EVENTS.levelStart, defined(levelAttrs(p)), ts)
  }

  levelComplete(p: LevelAt & { durationMs?: number }, ts?: number): void {
    this.client.track(EVENTS.levelComplete, defined({ ...levelAttrs(p), duration_ms: p.durationMs }), ts)
  }

  /** `x`, `y`: where the player died (the map heat grid). */
  levelFail(p: LevelAt & { x?: number; y?: number }, ts?: number): void {
    this.client.track(EVENTS.levelFail, defined({ ...levelAttrs(p), x: p.x, y: p.y }), ts)
  }

  featureUse(p: { feature: string }, ts?: number): void {
    this.client.track(EVENTS.featureUse, { feature: p.feature }, ts)
  }
}
