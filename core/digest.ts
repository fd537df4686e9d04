/** SHA-256 of a text, in hex: what a stored secret is kept as, and a long key's stand-in. */
export const sha256Hex = (s: string): string => new Bun.CryptoHasher('sha256').update(s).digest('hex')

/**
 * `key` as kept in a bounded place (a VARCHAR key column, a map of held state): itself up to
 * `max` characters, past it `#` and its SHA-256 (never equal to a short key, which has no `#`
 * that long).
 */
export const keptKey = (key: string, max: number): string => (key.length > max ? `#${sha256Hex(key)}` : key)
