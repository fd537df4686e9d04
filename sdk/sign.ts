/**
 * Request signing of the liveops ingestion endpoints (spec 1 section 5 rule 4), on WebCrypto
 * only, so it runs unchanged in browsers, Bun, Node 18+ and workers:
 *
 *   X-Signature = base64(HMAC-SHA256(secret, X-Timestamp + "\n" + X-Nonce + "\n" + hex(SHA-256(body))))
 */
export interface SignatureHeaders {
  'X-Timestamp': string
  'X-Nonce': string
  'X-Signature': string
}

const encoder = new TextEncoder()

function toHex(buf: ArrayBuffer): string {
  let out = ''
  for (const b of new Uint8Array(buf)) out += b.toString(16).padStart(2, '0')
  return out
}

function toBase64(buf: ArrayBuffer): string {
  let bin = ''
  for (const b of new Uint8Array(buf)) bin += String.fromCharCode(b)
  return btoa(bin)
}

/** A random nonce: 16 bytes as hex. */
export function newNonce(): string {
  return toHex(crypto.getRandomValues(new Uint8Array(16)).buffer as ArrayBuffer)
}

/** Lowercase hex SHA-256 of the exact bytes that will be sent. */
export async function bodyDigest(body: Uint8Array | string): Promise<string> {
  const bytes = typeof body === 'string' ? encoder.encode(body) : body
  return toHex(await crypto.subtle.digest('SHA-256', bytes as Uint8Array<ArrayBuffer>))
}

/** The three signature headers for `body`; `timestamp` (epoch seconds) and `nonce` default to now and a random one. */
export async function signRequest(
  secret: string,
  body: Uint8Array | string,
  opts: { timestamp?: number; nonce?: string } = {},
): Promise<SignatureHeaders> {
  const timestamp = String(opts.timestamp ?? Math.floor(Date.now() / 1000))
  const nonce = opts.nonce ?? newNonce()
  const key = await crypto.subtle.importKey(
    'raw',
    encoder.encode(secret),
    { name: 'HMAC', hash: 'SHA-256' },
    false,
    ['sign'],
  )
  const mac = await crypto.subtle.sign(
    'HMAC',
    key,
    encoder.encode(`${timestamp}\n${nonce}\n${await bodyDigest(body)}`),
  )
  return { 'X-Timestamp': timestamp, 'X-Nonce': nonce, 'X-Signature': toBase64(mac) }
}
