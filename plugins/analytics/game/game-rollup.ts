import { label, pick } from '../../../core/derive'
import type { LogEvent as NormEvent } from '../../../core/event-log-types'
import { EVENTS, PERF_METRICS } from '../../../sdk/events'
import { HOUR, floorTo } from '../lib/time'
import type { Part } from '../store/rollup-parts'

/**
 * The counters behind the game analytics (`/api/analytics/...`), kept per local day (and per UTC
 * hour for performance, whose ranges are date-times): one pass over the events of the vocabulary
 * (`sdk/events.ts`). Revenue is counted by the write half from the payments that turn out new.
 */
export const GAME_EVENTS: ReadonlySet<string> = new Set([
  EVENTS.sessionStart,
  EVENTS.sessionEnd,
  EVENTS.adRequest,
  EVENTS.adImpression,
  EVENTS.perf,
  EVENTS.crash,
  EVENTS.friendAdd,
  EVENTS.guildJoin,
  EVENTS.invite,
])
const SOCIAL: ReadonlySet<string> = new Set([EVENTS.friendAdd, EVENTS.guildJoin, EVENTS.invite])
const PLATFORMS = new Set(['ANDROID', 'IOS', 'WEB'])
const PERF = new Set<string>(PERF_METRICS)

/** A finite number at top level or in attrs (numbers sent as strings count too), else undefined. */
function numberOf(e: NormEvent, key: string): number | undefined {
  const v = pick(e.props, key)
  const n = typeof v === 'number' ? v : typeof v === 'string' && v.trim() !== '' ? Number(v) : Number.NaN
  return Number.isFinite(n) ? n : undefined
}

function bump(m: Part['gameDays'], key: string, n: number, total: number, ts: number) {
  const v = m.get(key)
  if (!v) m.set(key, [n, total, ts, ts])
  else {
    v[0] += n
    v[1] += total
    if (ts < v[2]) v[2] = ts
    if (ts > v[3]) v[3] = ts
  }
}

/** The suffixes of a superseding payment's keys in `Part.payments` (`withDays` in store/write.ts). */
export const TAKEN_OFF = '\u0001-'
export const REPLACING = '\u0001+'

/** A payment's local day, kind and platform. */
function paymentMeta(part: Part, e: NormEvent): [number, string, string] {
  const kind = label(pick(e.props, 'kind')) === 'subscription' ? 'subscription' : 'iap'
  const said = label(pick(e.props, 'platform'))?.toUpperCase()
  return [part.s.zone.day(e.ts), kind, said && PLATFORMS.has(said) ? said : '']
}

/** Adds one event of the vocabulary (or a payment) to its stream's counters in this commit. */
export function countGame(part: Part, e: NormEvent): void {
  const { ts, userId } = e
  const day = part.s.zone.day(ts)
  const at = (metric: string, dim: string) => `${day}\u0001${metric}\u0001${dim}`
  if (e.payment) {
    const { orderId, status, supersedes } = e.payment
    const k = `${orderId}\u0001${status}`
    // A superseding row (core/event-log-types.ts `LogPayment`): the client's it takes off and its
    // own, each said apart from a client's row of the same order in the batch (a rebuild's).
    if (supersedes) {
      part.payments.set(`${k}${TAKEN_OFF}`, paymentMeta(part, supersedes))
      part.payments.set(`${k}${REPLACING}`, paymentMeta(part, e))
    } else part.payments.set(k, paymentMeta(part, e))
    return
  }
  if (userId && SOCIAL.has(e.event)) {
    const prev = part.social.get(userId)
    if (prev === undefined || ts < prev) part.social.set(userId, ts)
  }
  switch (e.event) {
    case EVENTS.sessionStart: {
      const p = label(pick(e.props, 'platform'))?.toUpperCase()
      if (!userId || !p || !PLATFORMS.has(p)) return
      const k = `${day}\u0001${p}`
      let users = part.platforms.get(k)
      if (!users) {
        users = new Set()
        part.platforms.set(k, users)
      }
      users.add(userId)
      return
    }
    case EVENTS.sessionEnd: {
      const duration = e.durationMs ?? 0
      bump(part.gameDays, at('sess', ''), 1, Math.max(0, Math.round(duration)), ts)
      const events = numberOf(e, 'events')
      if (events !== undefined && events >= 0)
        bump(part.gameDays, at('sess_ev', ''), events === 1 ? 1 : 0, Math.round(events), ts)
      return
    }
    case EVENTS.adRequest: {
      const filled = pick(e.props, 'filled')
      bump(
        part.gameDays,
        at('ad_req', e.network ?? 'unknown'),
        1,
        filled === true || filled === 'true' ? 1 : 0,
        ts,
      )
      return
    }
    case EVENTS.adImpression: {
      // Micros of the currency's main unit: an impression earns fractions of a cent.
      const micros = Math.max(0, Math.round((numberOf(e, 'revenue') ?? 0) * 1e6))
      bump(part.gameDays, at('ad_imp', e.network ?? 'unknown'), 1, micros, ts)
      return
    }
    case EVENTS.perf: {
      const metric = label(pick(e.props, 'metric'))?.toUpperCase()
      const value = numberOf(e, 'value')
      if (!metric || !PERF.has(metric) || value === undefined) return
      // Thousandths, so fractional frame rates and megabytes add up exactly.
      bump(part.gameHours, `${floorTo(ts, HOUR)}\u0001perf\u0001${metric}`, 1, Math.round(value * 1000), ts)
      return
    }
    case EVENTS.crash: {
      const hash = label(pick(e.props, 'crashHash')) ?? label(pick(e.props, 'crash_hash')) ?? 'unknown'
      bump(part.gameHours, `${floorTo(ts, HOUR)}\u0001crash\u0001${hash}`, 1, 0, ts)
      return
    }
    case EVENTS.friendAdd:
      bump(part.gameDays, at('friend', ''), 1, 0, ts)
      return
    case EVENTS.guildJoin:
      bump(part.gameDays, at('guild', ''), 1, 0, ts)
      return
    case EVENTS.invite: {
      const invited = pick(e.props, 'invited')
      const n = Array.isArray(invited) ? invited.length : (numberOf(e, 'invited') ?? 0)
      bump(part.gameDays, at('invite', ''), 1, Math.max(0, Math.round(n)), ts)
      return
    }
  }
}
