import { timingSafeEqual } from 'node:crypto'
import { Forbidden, HttpError, TooManyRequests, Unauthorized } from '../../core/http'

/**
 * Remembers nonces for at least `windowMs`: two generations of sets, the older dropped when the
 * newer is a window old, so the memory is bounded by two windows of traffic and a lookup is O(1).
 */
export class NonceCache {
  private current = new Set<string>()
  private previous = new Set<string>()
  private rotatedAt = Date.now()

  constructor(private windowMs: number) {}

  /** True when the nonce is new (and records it); false for a replay. */
  claim(nonce: string, now = Date.now()): boolean {
    if (now - this.rotatedAt >= this.windowMs) {
      this.previous = this.current
      this.current = new Set()
      this.rotatedAt = now
    }
    if (this.current.has(nonce) || this.previous.has(nonce)) return false
    this.current.add(nonce)
    return true
  }
}

export interface SignatureHeaders {
  timestamp?: string
  nonce?: string
  signature?: string
}

const TS = /^\d{1,12}$/

/**
 * Spec 1 section 5 rule 4: X-Signature = base64(HMAC-SHA256(secret, timestamp + "\n" + nonce +
 * "\n" + lowercase hex SHA-256 of the raw body)). Runs over the raw bytes before any parsing.
 * Throws 403 ingest_disabled without a secret (whatever the headers), 401 for missing headers, a bad or skewed
 * timestamp and a bad signature, 429 duplicate_nonce for a replay.
 */
export function verifySignature(
  h: SignatureHeaders,
  body: Uint8Array,
  secret: string | undefined,
  nonces: NonceCache,
  maxSkewS: number,
  now = Date.now(),
): void {
  if (!secret)
    throw new Forbidden('ingestion is disabled: no signing secret is configured', 'ingest_disabled')
  if (!h.timestamp || !h.nonce || !h.signature) {
    const missing = [
      !h.timestamp && 'X-Timestamp',
      !h.nonce && 'X-Nonce',
      !h.signature && 'X-Signature',
    ].filter(Boolean)
    throw new HttpError(401, 'missing_signature_headers', `missing header ${missing.join(', ')}`, { missing })
  }
  if (!TS.test(h.timestamp)) throw new Unauthorized('X-Timestamp must be epoch seconds', 'invalid_timestamp')
  const skew = Math.abs(now / 1000 - Number(h.timestamp))
  if (skew > maxSkewS)
    throw new Unauthorized(
      `X-Timestamp is ${Math.round(skew)} s from the server clock (at most ${maxSkewS} s)`,
      'timestamp_skew',
    )
  const digest = new Bun.CryptoHasher('sha256').update(body).digest('hex')
  const expected = new Bun.CryptoHasher('sha256', secret)
    .update(`${h.timestamp}\n${h.nonce}\n${digest}`)
    .digest()
  const given = Buffer.from(h.signature, 'base64')
  if (given.length !== expected.length || !timingSafeEqual(given, expected))
    throw new Unauthorized('X-Signature does not match the request', 'invalid_signature')
  if (!nonces.claim(h.nonce, now))
    throw new TooManyRequests('X-Nonce was already used in the last 15 minutes', 1, 'duplicate_nonce', {
      nonce: h.nonce,
    })
}
