import type { AuthService } from '../../../core/auth/service'
import { Forbidden, HttpError, Unauthorized } from '../../../core/http'
import type { FastServer } from '../../../core/plugin'
import { rateHeaders } from '../../../core/ratelimit'
import { decodeOtlp, encodingOf } from '../otlp/decode'
import type { Signal } from '../otlp/proto'
import { type Denial, protect } from '../privacy/privacy'
import { type Ingestor, boundedDepth, gunzip, parseJson, readBody } from './service'
import {
  type EventError,
  type EventWindow,
  type NormEvent,
  type ValidateOptions,
  batchItem,
  batchItemId,
  eventWindow,
  sameStreamAsPrevious,
  streamKey,
  validateEvents,
} from './validate'

/**
 * The request pipelines behind the ingestion routes: raw body, signature or API key, parsing,
 * validation, environment checks, limits, sampling, and the durable write.
 */
export type Headers = Record<string, string | undefined>

const piiDenied = (denied: Denial[]) =>
  new HttpError(400, 'pii_denied', denied.map((d) => `[${d.index}].${d.field}: ${d.reason}`).join('; '), {
    errors: denied,
  })
/** Bun's server, where the request came through one (absent for `app.handle`). */
export type Server = FastServer | null | undefined

/**
 * The client's address, looked up only when asked: Bun's requestIP costs a few microseconds and
 * only per-IP rate limits read it.
 */
export const clientIp = (server: Server, request: Request) => () =>
  server?.requestIP(request)?.address ?? 'unknown'

/** A signed body, its signature already checked → validated events; the whole batch is refused when any event is bad. */
export function signedEvents(
  ing: Pick<Ingestor, 'signedReach' | 'config'>,
  body: Uint8Array,
  headers: Headers,
  payments: boolean,
): NormEvent[] {
  const list = parseJson(body)
  if (!Array.isArray(list))
    throw new HttpError(400, 'invalid_payload', 'body: must be a JSON array of event objects')
  const gameId = headers['x-game-id']
  return checked(
    list,
    payments,
    gameId,
    (g) => ing.signedReach(gameId, g),
    eventWindow(ing.config, Date.now()),
  )
}

export function checked(
  list: unknown[],
  payments: boolean,
  gameId?: string,
  reach?: ValidateOptions['reach'],
  window?: EventWindow,
): NormEvent[] {
  const { events, errors } = validateEvents(list, { payments, gameId, reach, window })
  if (errors.length) throw invalidEvents(errors, list.length)
  return events
}

function invalidEvents(errors: EventError[], total: number) {
  const shown = errors
    .slice(0, 5)
    .map((e) => `[${e.index}].${e.field}: ${e.reason}`)
    .join('; ')
  const more = errors.length > 5 ? ` (and ${errors.length - 5} more)` : ''
  const bad = new Set(errors.map((e) => e.index)).size
  return new HttpError(
    400,
    'invalid_events',
    `${bad} of ${total} events are invalid, nothing was stored: ${shown}${more}`,
    { errors },
  )
}

/** Environment check, per-IP limit, sampling and a durable write. */
export async function accept(
  ing: Ingestor,
  events: NormEvent[],
  ip: () => string,
  set: { headers: Record<string, string> },
  /** The signed request's nonce, committed with its events where the replay window is kept so. */
  nonce?: string,
) {
  // Where each game and environment is first named; a run of events of one stream is skipped.
  const firstAt = new Map<string, number>()
  for (let i = 0; i < events.length; i++) {
    const e = events[i]
    if (sameStreamAsPrevious(events, i)) continue
    const k = streamKey(e.gameId, e.env)
    if (!firstAt.has(k)) firstAt.set(k, i)
  }
  const envs = await ing.environments(
    [...firstAt.values()].map((i) => ({ gameId: events[i].gameId, env: events[i].env, field: `[${i}]` })),
  )
  for (const env of envs.values()) {
    const d = ing.limit(
      env.settings.rateLimit.requestsPerMinutePerIp,
      () => `ip:${env.gameId}:${env.name}:${ip()}`,
    )
    if (d) Object.assign(set.headers, rateHeaders(d))
  }
  const { kept, denied } = protect(events, envs)
  if (denied.length) throw piiDenied(denied)
  await ing.store(ing.sample(kept, envs), nonce)
}

/** Bytes of a string in UTF-8 (the event limit is 64 KB, not 64 K characters). */
const utf8Bytes = (s: string): number => Buffer.byteLength(s, 'utf8')

/**
 * `/v1/batch`, `/v1/logs` and `/v1/traces`: API key (bound to a game and environment) or a signature. Items
 * are judged one by one: bad ones are listed in `rejected`, the rest stored.
 */
export async function collect(
  ing: Ingestor,
  auth: AuthService,
  request: Request,
  headers: Headers,
  ip: () => string,
  set: { headers: Record<string, unknown> },
  /** `/v1/logs` and `/v1/traces` (and their gRPC services): the OTLP signal the body carries. */
  otlp?: Signal,
) {
  const cfg = ing.config
  // A key is checked before the body is read (a stranger's upload costs nothing); a signature
  // covers the body, so that one is read first.
  let key: { gameId: string; env: string } | undefined
  if (headers['x-api-key']) {
    const p = await auth.verifyApiKey(headers['x-api-key'])
    if (!p) throw new Unauthorized('missing or invalid x-api-key', 'invalid_api_key')
    if (!p.gameId || !p.environment)
      throw new Forbidden('this API key is not bound to a game and environment', 'api_key_unbound')
    key = { gameId: p.gameId, env: p.environment }
  }
  let body = await readBody(request, cfg.batch_max_body_kb * 1024)
  if (!key) await ing.verify(headers, body)
  if ((headers['content-encoding'] ?? '').toLowerCase() === 'gzip')
    body = await gunzip(body, cfg.batch_max_body_kb * 1024)

  let items: unknown[]
  const preRejected: Array<{ event_id: string; reason: string }> = []
  if (otlp) {
    // Protobuf or JSON, both decoded to the JSON shape; a refused entry stands as `null`.
    const decoded = decodeOtlp(otlp, body, encodingOf(headers['content-type']), {
      maxEntries: cfg.batch_max_events,
      maxEntryBytes: cfg.batch_max_event_kb * 1024,
    })
    items = decoded.items
    preRejected.push(...decoded.rejected)
  } else {
    const text = new TextDecoder().decode(body)
    if (text.trimStart().startsWith('[')) {
      const parsed = parseJson(body)
      items = Array.isArray(parsed) ? parsed : []
    } else {
      // NDJSON: a line that does not parse is rejected on its own; a body of which no line
      // parses is not NDJSON at all (400 invalid_payload, spec 1 section 7 rule 1).
      items = []
      let parsedLines = 0
      for (const line of text.split('\n')) {
        if (!line.trim()) continue
        if (utf8Bytes(line) > cfg.batch_max_event_kb * 1024) {
          preRejected.push({ event_id: String(items.length), reason: 'event_too_large' })
          items.push(null)
          continue
        }
        let item: unknown
        try {
          item = JSON.parse(line)
        } catch {
          preRejected.push({ event_id: String(items.length), reason: 'invalid JSON' })
          items.push(null)
          continue
        }
        // Over-deep refuses the whole body, as in a JSON array: it is the body's bound, not a bad event.
        items.push(boundedDepth(item))
        parsedLines++
      }
      if (parsedLines === 0 && preRejected.some((r) => r.reason === 'invalid JSON'))
        throw new HttpError(400, 'invalid_payload', 'body: neither a JSON array nor NDJSON (no line is JSON)')
    }
  }
  if (items.length > cfg.batch_max_events)
    throw new HttpError(
      413,
      'batch_too_large',
      `body: at most ${cfg.batch_max_events} events per request, got ${items.length}`,
      { limit: cfg.batch_max_events },
    )

  const now = Date.now()
  const window = eventWindow(cfg, now)
  const taken = new Set(preRejected.map((r) => r.event_id))
  const rejected = [...preRejected]
  const events: NormEvent[] = []
  const accepted: string[] = []
  const ids: string[] = []
  items.forEach((raw, i) => {
    const id = batchItemId(raw, i)
    if (taken.has(String(i)) && raw === null) return
    if (utf8Bytes(JSON.stringify(raw)) > cfg.batch_max_event_kb * 1024)
      return void rejected.push({ event_id: id, reason: 'event_too_large' })
    const obj = raw as Record<string, unknown> | null
    const itemKey = key ?? {
      gameId: String(obj?.game_id ?? headers['x-game-id'] ?? ''),
      env: String(obj?.environment ?? obj?.env ?? ''),
    }
    if (!key && (!itemKey.gameId || !itemKey.env))
      return void rejected.push({
        event_id: id,
        reason: 'game_id and environment: required without an API key',
      })
    if (!key && headers['x-game-id'] && itemKey.gameId !== headers['x-game-id'])
      return void rejected.push({ event_id: id, reason: 'game_id: must match X-Game-Id' })
    const outOfReach = key ? undefined : ing.signedReach(headers['x-game-id'], itemKey.gameId)
    if (outOfReach) return void rejected.push({ event_id: id, reason: `game_id: ${outOfReach}` })
    const ev = batchItem(raw, itemKey, now, window)
    if (typeof ev === 'string') return void rejected.push({ event_id: id, reason: ev })
    events.push(ev)
    ids.push(id)
  })

  const pairs = new Map<string, { gameId: string; env: string; field: string }>()
  // The key's own environment always counts, so even an empty request meets its rate limit.
  if (key) pairs.set(streamKey(key.gameId, key.env), { gameId: key.gameId, env: key.env, field: 'x-api-key' })
  events.forEach((e, i) =>
    pairs.set(streamKey(e.gameId, e.env), { gameId: e.gameId, env: e.env, field: `[${ids[i]}]` }),
  )
  const envs = await ing.environments([...pairs.values()])
  for (const env of envs.values()) {
    const perKey = key
      ? ing.limit(
          env.settings.rateLimit.requestsPerMinutePerKey,
          () => `key:${headers['x-api-key']}`,
          env.settings.rateLimit.burstPerSecondPerKey,
        )
      : undefined
    const perIp = ing.limit(
      env.settings.rateLimit.requestsPerMinutePerIp,
      () => `ip:${env.gameId}:${env.name}:${ip()}`,
    )
    const d = perKey ?? perIp
    if (d) Object.assign(set.headers, rateHeaders(d))
  }
  const { kept, denied } = protect(events, envs)
  const refused = new Set(denied.map((d) => d.index))
  for (const d of denied) rejected.push({ event_id: ids[d.index], reason: `${d.field}: ${d.reason}` })
  await ing.store(ing.sample(kept, envs), key ? undefined : headers['x-nonce'])
  accepted.push(...ids.filter((_, i) => !refused.has(i)))
  return { accepted, rejected }
}

/**
 * Server-side writes (`/api/v1/analytics/ingest`, `/payments/ingest`): validated like signed
 * ingestion and bound by the same privacy policy, but never sampled. Their payments are the
 * server's (`ingest_payments.source`): one of an order and status a client stored first
 * supersedes it (docs/security.md, "Superseding payments").
 */
export async function serverWrite(ing: Ingestor, body: unknown[], payments: boolean) {
  const events = checked(body, payments, undefined, undefined, eventWindow(ing.config, Date.now()))
  const envs = await ing.environments(
    events.map((e, i) => ({ gameId: e.gameId, env: e.env, field: `body[${i}]` })),
  )
  const { kept, denied } = protect(events, envs)
  if (denied.length) throw piiDenied(denied)
  // The trusted route's payments replace a client's stored first (persist/writer.ts, `settle`).
  if (payments) for (const e of kept) if (e.payment) e.server = true
  await ing.store(kept)
  return { ok: true as const, accepted: kept.length }
}
