import { describe, expect, test } from 'bun:test'
import { createHash, createHmac } from 'node:crypto'
import { HttpError } from '../../../core/http'
import { MAX_NONCE, NonceCache, signatureError, verifySignature } from './signature'

const SECRET = 'unit-secret'
const body = new TextEncoder().encode('[{"event":"x","ts":"1"}]')
const now = 1_763_900_000_000
const timestamp = String(now / 1000)

/** Signed independently of the code under test: node:crypto, hex digest, Base64 HMAC. */
function sign(nonce: string): string {
  const digest = createHash('sha256').update(body).digest('hex')
  return createHmac('sha256', SECRET).update(`${timestamp}\n${nonce}\n${digest}`).digest('base64')
}
const check = (signature: string, nonce: string) =>
  signatureError({ timestamp, nonce, signature }, body, SECRET, new NonceCache(900_000), 300, now)

describe('signature check', () => {
  test('the canonical Base64 signature passes', () => {
    const n = 'n-canonical'
    expect(check(sign(n), n)).toBeUndefined()
  })

  test('a nonce past 128 characters is refused with 401 invalid_nonce, even rightly signed (it is kept as a key)', () => {
    const long = 'n'.repeat(MAX_NONCE + 1)
    const e = check(sign(long), long)
    expect([e?.status, (e as HttpError).code]).toEqual([401, 'invalid_nonce'])
    const longest = 'n'.repeat(MAX_NONCE)
    expect(check(sign(longest), longest)).toBeUndefined()
  })

  test('unpadded and URL-safe Base64 of the same bytes pass, as any decoder would read them', () => {
    const n = 'n-lenient'
    const canonical = sign(n)
    expect(canonical).toHaveLength(44)
    expect(check(canonical.replace(/=+$/, ''), n)).toBeUndefined()
    const urlSafe = canonical.replace(/\+/g, '-').replace(/\//g, '_')
    expect(check(urlSafe, n)).toBeUndefined()
    expect(check(urlSafe.replace(/=+$/, ''), n)).toBeUndefined()
  })

  test('any other signature is refused with 401 invalid_signature, returned and not thrown', () => {
    const n = 'n-bad'
    const good = sign(n)
    const flipped = (good[0] === 'A' ? 'B' : 'A') + good.slice(1)
    for (const bad of ['AAAA', '', flipped, good.toLowerCase(), `${good}A`, good.slice(0, 40)]) {
      const e = check(bad, n)
      expect(e).toBeInstanceOf(HttpError)
      expect([e?.status, e?.code]).toEqual(
        bad === '' ? [401, 'missing_signature_headers'] : [401, 'invalid_signature'],
      )
    }
  })

  test('a replayed nonce is refused only after the signature holds; verifySignature throws the same error', () => {
    const nonces = new NonceCache(900_000)
    const n = 'n-replay'
    const h = { timestamp, nonce: n, signature: sign(n) }
    expect(signatureError(h, body, SECRET, nonces, 300, now)).toBeUndefined()
    expect(signatureError(h, body, SECRET, nonces, 300, now)?.code).toBe('duplicate_nonce')
    expect(() => verifySignature(h, body, SECRET, nonces, 300, now)).toThrow(
      'X-Nonce was already used in the last 15 minutes',
    )
    expect(signatureError(h, body, undefined, nonces, 300, now)?.status).toBe(403)
  })
})
