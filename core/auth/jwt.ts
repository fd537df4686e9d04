import { createHmac, timingSafeEqual } from 'node:crypto'

/**
 * HS256 JSON Web Tokens. Written here rather than through @elysiajs/jwt because verification
 * runs inside the core permission macro on every request, outside any Elysia context, and a
 * synchronous HMAC check is what lets the hot path stay allocation-light.
 */
export interface Claims {
  sub: string
  iat: number
  exp: number
  [key: string]: unknown
}

const b64 = (buf: Buffer | string) => Buffer.from(buf).toString('base64url')
const HEADER = b64(JSON.stringify({ alg: 'HS256', typ: 'JWT' }))

export function signJwt(claims: Claims, secret: string): string {
  const body = `${HEADER}.${b64(JSON.stringify(claims))}`
  return `${body}.${createHmac('sha256', secret).update(body).digest('base64url')}`
}

/** Claims of a valid, unexpired token; undefined otherwise. */
export function verifyJwt(token: string, secret: string, now = Date.now()): Claims | undefined {
  const parts = token.split('.')
  if (parts.length !== 3 || parts[0] !== HEADER) return undefined
  const expected = createHmac('sha256', secret).update(`${parts[0]}.${parts[1]}`).digest()
  const given = Buffer.from(parts[2], 'base64url')
  if (given.length !== expected.length || !timingSafeEqual(given, expected)) return undefined
  try {
    const claims = JSON.parse(Buffer.from(parts[1], 'base64url').toString()) as Claims
    if (typeof claims.exp !== 'number' || claims.exp * 1000 <= now) return undefined
    return claims
  } catch {
    return undefined
  }
}
