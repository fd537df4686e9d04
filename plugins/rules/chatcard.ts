import { createDecipheriv, createHash, timingSafeEqual } from 'node:crypto'
import { HttpError, Invalid, NotFound, ServiceUnavailable, Unauthorized, invalidField } from '../../core/http'
import type { SharedState } from '../../core/shared'
import { checkDepth, checkNul } from '../../core/strict'
import { alertKey } from './alert-id'
import type { AlertStore } from './alerts'

class NotImplemented extends HttpError {
  constructor(message: string) {
    super(501, 'not_implemented', message)
  }
}

/** One answer to every caller that did not prove itself: a stranger learns nothing from it. */
const unproven = () => new Unauthorized('the callback did not prove itself', 'callback_unauthorized')

/**
 * Decrypts a Lark/Feishu card callback `{"encrypt": base64}`: AES-256-CBC with key =
 * SHA-256(encrypt key) and IV = the first 16 bytes of the decoded blob, PKCS#7 padding.
 * Undefined when it does not decrypt to a JSON object.
 */
export function decrypt(encrypted: string, encryptKey: string): Record<string, unknown> | undefined {
  const blob = Buffer.from(encrypted, 'base64')
  if (blob.length < 32 || blob.length % 16 !== 0) return undefined
  const key = createHash('sha256').update(encryptKey).digest()
  try {
    const d = createDecipheriv('aes-256-cbc', key, blob.subarray(0, 16))
    return obj(JSON.parse(Buffer.concat([d.update(blob.subarray(16)), d.final()]).toString('utf8')))
  } catch {
    return undefined
  }
}

type Obj = Record<string, unknown>
const obj = (v: unknown): Obj | undefined =>
  v && typeof v === 'object' && !Array.isArray(v) ? (v as Obj) : undefined
const str = (v: unknown): string | undefined => (typeof v === 'string' ? v : undefined)
const same = (a: string, b: string) => {
  const x = Buffer.from(a)
  const y = Buffer.from(b)
  return x.length === y.length && timingSafeEqual(x, y)
}

/**
 * Lark's signature of a callback, checked over the raw body before it is parsed or decrypted:
 * X-Lark-Signature is the hex SHA-256 of X-Lark-Request-Timestamp + X-Lark-Request-Nonce + the
 * encrypt key + the body (Lark's callbacks when an Encrypt Key is set, card.action.trigger
 * included), or, for a card request URL of the 1.0 protocol, the hex SHA-1 of the same with the
 * verification token in the key's place (Lark's SDKs check both so). True when it verifies,
 * false when none was sent; a wrong one is 401 like every unproven caller. The signature covers
 * the time and nonce headers, so a captured callback cannot be sent again under new ones, and the
 * bytes, so a ciphertext (CBC, no MAC) cannot be rewritten.
 */
function signatureOk(
  bytes: Uint8Array,
  headers: Record<string, string | undefined>,
  encryptKey: string,
  verificationToken: string,
): boolean {
  const sent = headers['x-lark-signature']
  if (sent === undefined) return false
  const given = sent.toLowerCase()
  const prefix = (headers['x-lark-request-timestamp'] ?? '') + (headers['x-lark-request-nonce'] ?? '')
  const digest = (algorithm: string, secret: string) =>
    createHash(algorithm)
      .update(prefix + secret)
      .update(bytes)
      .digest('hex')
  if (same(given, digest('sha256', encryptKey))) return true
  if (verificationToken && same(given, digest('sha1', verificationToken))) return true
  throw unproven()
}

/** The body as JSON, held to the depth and text every JSON route keeps (core's checks, which a raw route skips). */
function parse(bytes: Uint8Array): unknown {
  let value: unknown
  try {
    value = JSON.parse(new TextDecoder().decode(bytes))
  } catch {
    throw new Invalid('body: malformed JSON', { field: 'body', reason: 'malformed JSON' })
  }
  checkDepth(value)
  checkNul(value)
  return value
}

/** How far a callback's time may be from this server's: Lark's own advice for its callbacks. */
export const CALLBACK_SKEW_MS = 5 * 60_000

/** A time as Lark writes it (seconds in X-Lark-Request-Timestamp, milliseconds in header.create_time) in ms. */
function millis(v: unknown): number | undefined {
  const n = typeof v === 'number' ? v : typeof v === 'string' && /^\d{1,19}$/.test(v) ? Number(v) : Number.NaN
  if (!Number.isFinite(n) || n <= 0) return undefined
  return n < 1e11 ? n * 1000 : n < 1e14 ? n : n / 1000
}

/**
 * When the callback was made and what names it: the 2.0 body's `header.create_time` and
 * `header.event_id` (inside the encryption when the body is encrypted), else Lark's request
 * headers X-Lark-Request-Timestamp and X-Lark-Request-Nonce. A confirm captured once was taken
 * again days later (it acknowledged a new occurrence of its alert, whose escalation then never
 * fired): a time more than 5 minutes off is 401, and the id is claimed once.
 */
function stamp(body: Obj, headers: Record<string, string | undefined>, now: number) {
  const header = obj(body.header)
  const [field, raw] =
    header?.create_time !== undefined
      ? ['body.header.create_time', header.create_time]
      : ['X-Lark-Request-Timestamp', headers['x-lark-request-timestamp']]
  if (raw === undefined) return undefined
  const at = millis(raw)
  if (at === undefined) throw invalidField(field, 'must be a time in seconds or milliseconds since the epoch')
  if (Math.abs(now - at) > CALLBACK_SKEW_MS)
    throw new Unauthorized(
      `${field} is more than 5 minutes from this server's time: a callback is taken only when it is fresh`,
      'callback_stale',
    )
  const id = str(header?.event_id) ?? headers['x-lark-request-nonce']
  return { at, id: id || undefined }
}

/** What a confirm action did: the audit entry names the operator and the alert. */
export interface CardAck {
  alert_id: string
  acked_by: string
}

/**
 * The card callback (spec 2: a chat platform's callback proves itself; issue 34 point 4).
 * Without an encrypt key or a verification token configured it answers 501 and changes nothing.
 * With them, the caller proves itself before anything is read: with an encrypt key, a signature
 * sent must verify over the raw body (`signatureOk`), and one that acts must carry one unless
 * `requireSignature` is off (Lark signs no url_verification); an encrypted body must decrypt
 * with the key, a plaintext one is taken only when a verification token is configured and it
 * carries it (`token`, or `header.token` in the 2.0 shape), and a decrypted one must carry it too
 * when one is configured; anything else is 401. Then url_verification echoes the challenge; a
 * confirm action (a button whose value carries `alert_id`, `action` absent or `confirm`/`ack`)
 * acknowledges an alert that exists (an incident or an escalation names it; 404 otherwise) in the
 * same store as POST /alerts/{id}/ack, as the operator's open_id.
 */
export function chatcard(opts: {
  encryptKey: string
  verificationToken: string
  /** With an encrypt key: a callback that acts without X-Lark-Signature is 401. */
  requireSignature: boolean
  alerts: () => AlertStore | undefined
  /** Where the callbacks taken are remembered, by every instance alike. */
  shared: SharedState
  now?: () => number
}) {
  const now = opts.now ?? Date.now
  /** The answer, and the acknowledgement taken (for the audit entry). */
  return async (
    bytes: Uint8Array,
    headers: Record<string, string | undefined> = {},
  ): Promise<{ answer: object; ack?: CardAck }> => {
    if (!opts.encryptKey && !opts.verificationToken)
      throw new NotImplemented(
        'the chat-card callback is not configured (plugins.rules.chatcard.encrypt_key or verification_token)',
      )
    const signed = opts.encryptKey
      ? signatureOk(bytes, headers, opts.encryptKey, opts.verificationToken)
      : undefined
    let body = obj(parse(bytes))
    if (!body) throw unproven()
    if (body.encrypt !== undefined) {
      if (!opts.encryptKey)
        throw new NotImplemented('encrypted callback but no card encryption key is configured')
      body = typeof body.encrypt === 'string' ? decrypt(body.encrypt, opts.encryptKey) : undefined
      if (!body) throw unproven()
      checkDepth(body)
      checkNul(body)
    } else if (!opts.verificationToken) throw unproven()
    if (opts.verificationToken) {
      const token = str(body.token) ?? str(obj(body.header)?.token)
      if (token === undefined || !same(token, opts.verificationToken)) throw unproven()
    }
    // Lark signs every callback when an Encrypt Key is set, but not the URL check, which acts on nothing.
    if (signed === false && opts.requireSignature && body.type !== 'url_verification') throw unproven()
    const when = stamp(body, headers, now())
    if (body.type === 'url_verification') {
      const challenge = str(body.challenge)
      if (challenge === undefined) throw invalidField('body.challenge', 'required for url_verification')
      return { answer: { code: 0, message: 'ok', data: { challenge } } }
    }
    const event = obj(body.event) ?? body
    const action = obj(event.action)
    const value = obj(action?.value)
    const alertId = value?.alert_id
    const kind = str(value?.action)
    if (
      !action ||
      !value ||
      (typeof alertId !== 'string' && typeof alertId !== 'number') ||
      String(alertId) === ''
    )
      throw invalidField(
        'body.action.value.alert_id',
        'a confirm action needs the alert id in the button value',
      )
    if (kind !== undefined && kind !== 'confirm' && kind !== 'ack')
      throw new Invalid(`body.action.value.action: unsupported action '${kind}'`, {
        field: 'body.action.value.action',
        reason: 'unsupported',
      })
    const store = opts.alerts()
    if (!store) throw new ServiceUnavailable('acknowledgement store is not configured')
    const id = alertKey(String(alertId))
    // An alert never raised cannot be acknowledged ahead of time: that would silence its escalation.
    if (!(await store.exists(id))) throw new NotFound(`alert '${id}' not found`)
    // A confirm acts, so it must say when it was made (Lark's callbacks always do); one without a
    // time could be sent again at any later date.
    if (!when)
      throw new Unauthorized(
        'a confirm callback needs its time (header.create_time, or the X-Lark-Request-Timestamp header)',
        'callback_stale',
      )
    // Claimed for twice the allowed skew, so a copy is a replay all the while its time is accepted.
    // Without an id, the callback itself (its time and content) names it; hashed either way, so a
    // long id is no long key in the shared state.
    const claim = `chatcard:${createHash('sha256')
      .update(
        when.id !== undefined ? `id\u0000${when.id}` : `body\u0000${when.at}\u0000${JSON.stringify(body)}`,
      )
      .digest('base64url')}`
    if (!(await opts.shared.claimOnce(claim, 2 * CALLBACK_SKEW_MS)))
      return {
        answer: { code: 0, message: 'already handled', data: { alert_id: id, duplicate: true } },
      }
    const operator = obj(event.operator)
    const by =
      str(event.open_id) ?? str(operator?.open_id) ?? str(event.user_id) ?? str(operator?.user_id) ?? ''
    // A confirm that did not take effect may come again (Lark retries a callback that failed).
    const rec = await store.ack(id, by, 'chatcard').catch(async (e) => {
      await opts.shared.remove([claim]).catch(() => undefined)
      throw e
    })
    return {
      answer: {
        code: 0,
        message: 'ok',
        data: { alert_id: rec.alert_id, acknowledged: true, acked_by: rec.acked_by },
      },
      ack: { alert_id: rec.alert_id, acked_by: by },
    }
  }
}
