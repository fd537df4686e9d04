import { createCipheriv, createHash, randomBytes } from 'node:crypto'

/**
 * Lark/Feishu card callbacks as Lark sends them, written here from Lark's documentation (not from
 * plugins/rules/chatcard.ts, so a mistake there shows): the tests of the chat-card callback share them.
 */

/** A callback body as Lark encrypts it: AES-256-CBC, key SHA-256(encrypt key), a random IV first. */
export function larkEncrypt(body: unknown, key: string): string {
  const iv = randomBytes(16)
  const c = createCipheriv('aes-256-cbc', createHash('sha256').update(key).digest(), iv)
  return Buffer.concat([iv, c.update(JSON.stringify(body), 'utf8'), c.final()]).toString('base64')
}

/**
 * `headers` with Lark's X-Lark-Signature for an Encrypt Key: hex SHA-256 of the time and nonce
 * headers, the key and the raw body (as sent: the JSON the test client writes).
 */
export function larkSigned(key: string, body: unknown, headers: Record<string, string> = {}) {
  const signature = createHash('sha256')
    .update(
      (headers['x-lark-request-timestamp'] ?? '') +
        (headers['x-lark-request-nonce'] ?? '') +
        key +
        JSON.stringify(body),
    )
    .digest('hex')
  return { ...headers, 'x-lark-signature': signature }
}
