import { clean, pick, str } from '../../../core/derive'
import { AMOUNT_CENTS_MAX, KEY_MAX, TS_MAX } from '../../../core/event-bounds'
import type { LogEvent } from '../../../core/event-log-types'
/**
 * Event validation of spec 1 section 4 and 7 rule 2, and the mapping of accepted events to the
 * stored shape. Pure functions: the routes, the service and the tests share them.
 */

/**
 * One accepted event, normalized (`props` is the event object as sent): what the log's consumers
 * later read (`LogEvent`, core/event-log-types.ts), before it has a stored id and receive time.
 */
export type NormEvent = Omit<LogEvent, 'id' | 'receivedAt' | 'invocation'> & {
  /** Written through the trusted server route (`serverWrite`): its payment may supersede a client's. */
  server?: true
}

/**
 * The key of one game's environment (a stream) in the maps the ingest path shares:
 * `Ingestor.environments` answers by it, and the policy, sampling and rate-limit steps read it.
 */
export const streamKey = (gameId: string, env: string): string => `${gameId}\u0001${env}`

/** Whether event `i` names the game and environment of the event before it: a run shares one lookup. */
export const sameStreamAsPrevious = (events: readonly NormEvent[], i: number): boolean =>
  i > 0 && events[i].gameId === events[i - 1].gameId && events[i].env === events[i - 1].env

export const PAYMENT_STATUSES = ['success', 'refunded', 'failed'] as const
export type PaymentStatus = (typeof PAYMENT_STATUSES)[number]

export interface EventError {
  index: number
  field: string
  reason: string
}

type Obj = Record<string, unknown>
const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v)

export { clean, pick, str }

/** Integers within the exact double range only: a BIGINT overflow would fail the whole group commit. */
const num = (v: unknown): number | null => {
  const n = typeof v === 'number' ? v : typeof v === 'string' && v.trim() !== '' ? Number(v) : Number.NaN
  return Number.isFinite(n) && Math.abs(n) <= Number.MAX_SAFE_INTEGER ? Math.round(n) : null
}

/** `session.start` (OpenTelemetry style) and `session_start` are one event. */
export function canonicalName(name: string): string {
  return name === 'session.start' ? 'session_start' : clean(name)
}

const TS = /^\d{1,16}$/

const DAY_MS = 86_400_000

/** Refused per event without a window (events built for the store directly): a time past `TS_MAX`. */
const TS_TOO_LATE = 'must be epoch milliseconds no later than 9999-12-31T23:59:59.999Z'

/**
 * The event times taken, epoch ms inclusive, from the plugin's `max_event_age_days` and
 * `max_event_future_s` around the receive time (docs/security.md, "Input bounds"). An event
 * outside it is refused: each day named became rollup rows no purge reaches (a future day
 * escapes every `< cutoff` purge), and a 1970 event made its user's first day 1970 (audit 19 M4).
 */
export interface EventWindow {
  min: number
  max: number
  ageDays: number
  futureS: number
}

/** The window of a request received at `now`; never past `TS_MAX` (core/event-bounds.ts). */
export function eventWindow(
  cfg: { max_event_age_days: number; max_event_future_s: number },
  now: number,
): EventWindow {
  return {
    min: Math.max(0, now - cfg.max_event_age_days * DAY_MS),
    max: Math.min(TS_MAX, now + cfg.max_event_future_s * 1000),
    ageDays: cfg.max_event_age_days,
    futureS: cfg.max_event_future_s,
  }
}

/** Why a time outside `w` is refused: the bounds, as settings and as dates (built only on refusal). */
export const outsideWindow = (w: EventWindow): string =>
  `must be epoch milliseconds from ${new Date(w.min).toISOString()} to ${new Date(w.max).toISOString()} ` +
  `(at most max_event_age_days ${w.ageDays} days old and max_event_future_s ${w.futureS} s ahead of the server's clock)`
/** Refused per event: one payment past `AMOUNT_CENTS_MAX` (core/event-bounds.ts). */
const AMOUNT_TOO_LARGE = `must be at most ${AMOUNT_CENTS_MAX} (10^12 minor units)`

/** Longest `event_id` kept for deduplication (a UUID has 36 characters). */
export const EVENT_ID_MAX = 128

/** Why an event's `event_id` is refused, or undefined: absent, or a string or number of at most `EVENT_ID_MAX` characters. */
export function eventIdProblem(raw: Obj): string | undefined {
  const id = pick(raw, 'event_id')
  if (id === undefined || id === null) return undefined
  if (typeof id !== 'string' && !(typeof id === 'number' && Number.isFinite(id))) return 'must be a string'
  if (String(id).length > EVENT_ID_MAX) return `must be at most ${EVENT_ID_MAX} characters`
  return undefined
}

const TOO_LONG = `must be at most ${KEY_MAX} characters`

/**
 * The ids that become keys of the derived tables, where the top level or `attrs` holds them.
 * Longer than `KEY_MAX` they are refused, as the event name is: stored, a 192-character one
 * stopped a consumer on MySQL (core/event-bounds.ts), and cut it would merge players or sessions.
 */
const ID_FIELDS = ['user_id', 'uid', 'device_id', 'session_id'] as const

/** The first id field of `raw` longer than `KEY_MAX`, or undefined. */
export function longIdField(raw: Obj): string | undefined {
  return ID_FIELDS.find((k) => (str(pick(raw, k))?.length ?? 0) > KEY_MAX)
}

export interface ValidateOptions {
  payments: boolean
  /** The `X-Game-Id` header: the default game and the one every event must name. */
  gameId?: string
  /** Why the request's credential may not write a game's events (`Ingestor.signedReach`), else undefined. */
  reach?: (gameId: string) => string | undefined
  /**
   * The event times taken (`eventWindow`); an event outside it is refused naming `ts`. Every
   * ingestion route passes one; without it (events built for the store directly, in tests and
   * benchmarks) only `TS_MAX` bounds `ts`.
   */
  window?: EventWindow
}

/**
 * Checks every event and reports every problem; the caller refuses the batch when any exists.
 * A numeric `ts` is reported as missing, as the spec requires.
 */
export function validateEvents(
  list: unknown[],
  opts: ValidateOptions,
): { events: NormEvent[]; errors: EventError[] } {
  const events: NormEvent[] = []
  const errors: EventError[] = []
  list.forEach((raw, index) => {
    const bad = (field: string, reason: string) => errors.push({ index, field, reason })
    if (!isObj(raw)) return bad('event', 'must be a JSON object')
    const before = errors.length
    const name = pick(raw, 'event')
    if (name === undefined || name === null || name === '') bad('event', 'required')
    else if (typeof name !== 'string') bad('event', 'must be a string')
    else if (name.length > KEY_MAX) bad('event', TOO_LONG)
    const ts = pick(raw, 'ts')
    if (ts === undefined || ts === null || typeof ts === 'number')
      bad('ts', 'missing: ts must be a string of epoch milliseconds')
    else if (typeof ts !== 'string' || !TS.test(ts)) bad('ts', 'must be a string of epoch milliseconds')
    else {
      const n = Number(ts)
      const w = opts.window
      if (w ? n < w.min || n > w.max : n > TS_MAX) bad('ts', w ? outsideWindow(w) : TS_TOO_LATE)
    }
    let gameId = pick(raw, 'game_id')
    if (gameId === undefined && opts.gameId) gameId = opts.gameId
    if (gameId === undefined || gameId === '') bad('game_id', 'required')
    else if (typeof gameId !== 'string') bad('game_id', 'must be a string')
    else if (opts.gameId && gameId !== opts.gameId) bad('game_id', `must match X-Game-Id '${opts.gameId}'`)
    else {
      const refused = opts.reach?.(gameId)
      if (refused) bad('game_id', refused)
    }
    const env = pick(raw, 'env')
    if (env === undefined || env === '') bad('env', 'required')
    else if (typeof env !== 'string') bad('env', 'must be a string')
    const idProblem = eventIdProblem(raw)
    if (idProblem) bad('event_id', idProblem)
    const longId = longIdField(raw)
    if (longId) bad(longId, TOO_LONG)
    let payment: NormEvent['payment']
    if (opts.payments) {
      // Every event of a payments route is a payment (spec 1 §4): another name had counted as
      // revenue, and its behavior counters (a session_start's) carried the payment too.
      if (typeof name === 'string' && name !== '' && name.length <= KEY_MAX && name !== 'payment')
        bad('event', "must be 'payment' on a payments route")
      const orderId = pick(raw, 'order_id')
      const status = pick(raw, 'status')
      const amount = pick(raw, 'amount_cents')
      if (typeof orderId !== 'string' || orderId === '')
        bad('order_id', orderId === undefined ? 'required' : 'must be a non-empty string')
      else if (orderId.length > KEY_MAX) bad('order_id', TOO_LONG)
      if (typeof status !== 'string' || !PAYMENT_STATUSES.includes(status as PaymentStatus))
        bad('status', status === undefined ? 'required' : `must be one of ${PAYMENT_STATUSES.join(', ')}`)
      if (typeof amount !== 'number' || !Number.isSafeInteger(amount) || amount <= 0)
        bad('amount_cents', amount === undefined ? 'required' : 'must be an integer greater than 0')
      else if (amount > AMOUNT_CENTS_MAX) bad('amount_cents', AMOUNT_TOO_LARGE)
      if (errors.length === before)
        payment = {
          orderId: clean(orderId as string),
          status: status as PaymentStatus,
          amountCents: amount as number,
        }
    }
    if (errors.length !== before) return
    events.push(
      normalize(
        raw,
        { gameId: gameId as string, env: env as string, event: name as string, ts: Number(ts) },
        payment,
      ),
    )
  })
  return { events, errors }
}

/** Builds the stored shape; `base` holds the already-validated identity fields. */
export function normalize(
  raw: Obj,
  base: { gameId: string; env: string; event: string; ts: number },
  payment?: NormEvent['payment'],
): NormEvent {
  return {
    gameId: base.gameId,
    env: base.env,
    event: canonicalName(base.event),
    ts: base.ts,
    userId: str(pick(raw, 'user_id')) ?? str(pick(raw, 'uid')),
    sessionId: str(pick(raw, 'session_id')),
    amountCents: payment?.amountCents ?? num(pick(raw, 'amount_cents')),
    currency: str(pick(raw, 'currency')),
    durationMs: num(pick(raw, 'duration_ms') ?? pick(raw, 'durationMs')),
    network: str(pick(raw, 'network')),
    level: str(pick(raw, 'level')),
    eventId: str(pick(raw, 'event_id')),
    props: raw,
    payment,
  }
}

/**
 * `/v1/batch` items (upstream fields event_id, game_id, environment, event_type, event_name,
 * device_id, ts_client): game and environment come from the API key; an item naming another is
 * rejected, as is a `ts_client` outside `window`. Returns the event or the rejection reason.
 */
export function batchItem(
  raw: unknown,
  key: { gameId: string; env: string },
  now: number,
  window: EventWindow,
): NormEvent | string {
  if (!isObj(raw)) return 'must be a JSON object'
  const idProblem = eventIdProblem(raw)
  if (idProblem) return `event_id: ${idProblem}`
  const name = pick(raw, 'event_name') ?? pick(raw, 'event') ?? pick(raw, 'event_type')
  if (typeof name !== 'string' || name === '') return 'event_name: required'
  if (name.length > KEY_MAX) return `event_name: ${TOO_LONG}`
  const longId = longIdField(raw)
  if (longId) return `${longId}: ${TOO_LONG}`
  const game = pick(raw, 'game_id')
  if (game !== undefined && game !== key.gameId) return `game_id: must be the API key's game '${key.gameId}'`
  const env = pick(raw, 'environment') ?? pick(raw, 'env')
  if (env !== undefined && env !== key.env)
    return `environment: must be the API key's environment '${key.env}'`
  const tsRaw = pick(raw, 'ts_client') ?? pick(raw, 'ts')
  let ts = now
  if (tsRaw !== undefined) {
    const parsed =
      typeof tsRaw === 'number'
        ? tsRaw
        : typeof tsRaw === 'string' && TS.test(tsRaw)
          ? Number(tsRaw)
          : typeof tsRaw === 'string'
            ? Date.parse(tsRaw)
            : Number.NaN
    if (!Number.isFinite(parsed) || parsed < 0)
      return 'ts_client: must be epoch milliseconds or an ISO 8601 date-time'
    if (parsed < window.min || parsed > window.max) return `ts_client: ${outsideWindow(window)}`
    ts = Math.round(parsed)
  }
  const ev = normalize(raw, { gameId: key.gameId, env: key.env, event: name, ts })
  ev.userId ??= str(pick(raw, 'device_id'))
  return ev
}

/** The client's id of a `/v1/batch` item, or its position when it has none. */
export function batchItemId(raw: unknown, index: number): string {
  const id = isObj(raw) ? raw.event_id : undefined
  return typeof id === 'string' && id !== '' ? id : String(index)
}
