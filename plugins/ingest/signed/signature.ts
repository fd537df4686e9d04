import { timingSafeEqual } from 'node:crypto'
import { Forbidden, HttpError, TooManyRequests, Unauthorized } from '../../../core/http'

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
/** The longest X-Nonce (the SDK sends 16 random bytes in hex: 32 characters). */
export const MAX_NONCE = 128
/** Canonical Base64 of a SHA-256 HMAC: 43 characters and one `=`. */
const CANONICAL = 44

/** One refusal for every forged signature: it never changes, so it is made once. */
const BAD_SIGNATURE = new Unauthorized('X-Signature does not match the request', 'invalid_signature')

/** Compares two strings in time that depends only on their length. */
function sameText(a: string, b: string): boolean {
  if (a.length !== b.length) return false
  let d = 0
  for (let i = 0; i < a.length; i++) d |= a.charCodeAt(i) ^ b.charCodeAt(i)
  return d === 0
}

/**
 * The part of `signatureError` that needs no body: a secret, the three headers, the timestamp's
 * form and skew, the nonce's length. OTLP/gRPC asks it before it reads a message, so a call
 * without a credential is refused before its bytes are held.
 */
export function signatureHeadersError(
  h: SignatureHeaders,
  secret: string | undefined,
  maxSkewS: number,
  now = Date.now(),
): HttpError | undefined {
  if (!secret)
    return new Forbidden('ingestion is disabled: no signing secret is configured', 'ingest_disabled')
  if (!h.timestamp || !h.nonce || !h.signature) {
    const missing = [
      !h.timestamp && 'X-Timestamp',
      !h.nonce && 'X-Nonce',
      !h.signature && 'X-Signature',
    ].filter(Boolean)
    return new HttpError(401, 'missing_signature_headers', `missing header ${missing.join(', ')}`, {
      missing,
    })
  }
  if (!TS.test(h.timestamp)) return new Unauthorized('X-Timestamp must be epoch seconds', 'invalid_timestamp')
  // Kept for the replay window in memory, the shared state and the event store (a key of 191
  // characters on MySQL, where one longer claim failed every request of its group commit).
  if (h.nonce.length > MAX_NONCE)
    return new Unauthorized(`X-Nonce must be at most ${MAX_NONCE} characters`, 'invalid_nonce')
  const skew = Math.abs(now / 1000 - Number(h.timestamp))
  if (skew > maxSkewS)
    return new Unauthorized(
      `X-Timestamp is ${Math.round(skew)} s from the server clock (at most ${maxSkewS} s)`,
      'timestamp_skew',
    )
  return undefined
}

/**
 * Spec 1 section 5 rule 4: X-Signature = base64(HMAC-SHA256(secret, timestamp + "\n" + nonce +
 * "\n" + lowercase hex SHA-256 of the raw body)). Runs over the raw bytes before any parsing.
 * Returns (never throws, so a refused request costs no unwinding) 403 ingest_disabled without a
 * secret (whatever the headers), 401 for missing headers, a bad or skewed timestamp and a bad
 * signature, 429 duplicate_nonce for a replay; undefined when the request is authentic.
 */
export function signatureError(
  h: SignatureHeaders,
  body: Uint8Array,
  secret: string | undefined,
  nonces: NonceCache,
  maxSkewS: number,
  now = Date.now(),
): HttpError | undefined {
  const e = signatureHeadersError(h, secret, maxSkewS, now)
  if (e || !secret || !h.signature || !h.nonce) return e
  const digest = Bun.SHA256.hash(body, 'hex')
  const expected = new Bun.CryptoHasher('sha256', secret)
    .update(`${h.timestamp}\n${h.nonce}\n${digest}`)
    .digest('base64')
  if (!sameText(expected, h.signature) && !sameLenient(expected, h.signature)) return BAD_SIGNATURE
  if (!nonces.claim(h.nonce, now)) return replayError(h.nonce)
  return undefined
}

/** 429 duplicate_nonce: the nonce was accepted before, here or on another instance. */
export const replayError = (nonce: string) =>
  new TooManyRequests('X-Nonce was already used in the last 15 minutes', 1, 'duplicate_nonce', { nonce })

/**
 * A signature that is not canonical Base64 (unpadded, URL-safe alphabet) is compared as bytes,
 * as any Base64 decoder would read it.
 */
function sameLenient(expected: string, given: string): boolean {
  // Only 43 (unpadded) or 44 characters can hold 32 bytes.
  if (given.length !== CANONICAL - 1 && (given.length !== CANONICAL || !/[-_]/.test(given))) return false
  const a = Buffer.from(expected, 'base64')
  const b = Buffer.from(given, 'base64')
  return a.length === b.length && timingSafeEqual(a, b)
}

/** `signatureError`, thrown. */
export function verifySignature(...args: Parameters<typeof signatureError>): void {
  const e = signatureError(...args)
  if (e) throw e
}
