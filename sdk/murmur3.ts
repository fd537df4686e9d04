/**
 * MurmurHash3, x86 32-bit variant, over the UTF-8 bytes of a string: the hash of spec 1's
 * assignment rule. Server and clients must agree bit for bit, so this file has no
 * dependencies and runs unchanged in Bun, Node, browsers and React Native.
 */

const C1 = 0xcc9e2d51
const C2 = 0x1b873593

// One scratch buffer reused by every call: the assignment hot path allocates nothing.
let scratch = new Uint8Array(256)

/**
 * Encodes `s` as UTF-8 into the scratch buffer from byte `at` and returns the end offset.
 * Hand-written rather than TextEncoder.encodeInto because ids and user ids are short and mostly
 * ASCII, where a plain loop beats the native call; lone surrogates become U+FFFD exactly as
 * TextEncoder does.
 */
function encode(s: string, at = 0): number {
  const n = s.length
  if (scratch.length < at + n * 3) {
    const grown = new Uint8Array(at + n * 3 + 64)
    grown.set(scratch.subarray(0, at))
    scratch = grown
  }
  const out = scratch
  let p = at
  for (let i = 0; i < n; i++) {
    let c = s.charCodeAt(i)
    if (c < 0x80) {
      out[p++] = c
    } else if (c < 0x800) {
      out[p++] = 0xc0 | (c >> 6)
      out[p++] = 0x80 | (c & 0x3f)
    } else {
      if (c >= 0xd800 && c <= 0xdfff) {
        const next = i + 1 < n ? s.charCodeAt(i + 1) : 0
        if (c <= 0xdbff && next >= 0xdc00 && next <= 0xdfff) {
          c = 0x10000 + ((c - 0xd800) << 10) + (next - 0xdc00)
          i++
          out[p++] = 0xf0 | (c >> 18)
          out[p++] = 0x80 | ((c >> 12) & 0x3f)
          out[p++] = 0x80 | ((c >> 6) & 0x3f)
          out[p++] = 0x80 | (c & 0x3f)
          continue
        }
        c = 0xfffd
      }
      out[p++] = 0xe0 | (c >> 12)
      out[p++] = 0x80 | ((c >> 6) & 0x3f)
      out[p++] = 0x80 | (c & 0x3f)
    }
  }
  return p
}

/** MurmurHash3 x86 32-bit of the first `len` bytes of `bytes`, as an unsigned integer. */
export function murmur3Bytes(bytes: Uint8Array, seed = 0, len = bytes.length): number {
  return finish(blocks(seed | 0, bytes, 0, len & ~3), bytes, len)
}

/** The body of the hash: mixes the 4-byte blocks in [from, to) into the state `h`. */
function blocks(state: number, bytes: Uint8Array, from: number, to: number): number {
  let h = state
  for (let i = from; i < to; i += 4) {
    let k = bytes[i] | (bytes[i + 1] << 8) | (bytes[i + 2] << 16) | (bytes[i + 3] << 24)
    k = Math.imul(k, C1)
    k = (k << 15) | (k >>> 17)
    h ^= Math.imul(k, C2)
    h = (h << 13) | (h >>> 19)
    h = (Math.imul(h, 5) + 0xe6546b64) | 0
  }
  return h
}

/** The tail bytes after the last whole block and the final avalanche. */
function finish(state: number, bytes: Uint8Array, len: number): number {
  let h = state
  const i = len & ~3
  const rest = len & 3
  if (rest) {
    let k = 0
    if (rest === 3) k ^= bytes[i + 2] << 16
    if (rest >= 2) k ^= bytes[i + 1] << 8
    k ^= bytes[i]
    k = Math.imul(k, C1)
    k = (k << 15) | (k >>> 17)
    h ^= Math.imul(k, C2)
  }
  h ^= len
  h ^= h >>> 16
  h = Math.imul(h, 0x85ebca6b)
  h ^= h >>> 13
  h = Math.imul(h, 0xc2b2ae35)
  h ^= h >>> 16
  return h >>> 0
}

/** MurmurHash3 x86 32-bit of the UTF-8 bytes of `s`, as an unsigned integer. */
export function murmur3(s: string, seed = 0): number {
  // encode() may replace the scratch buffer, so it must run before the buffer is read. It
  // overwrites murmur3Key's cached prefix too.
  prefixA = undefined
  const len = encode(s)
  return murmur3Bytes(scratch, seed, len)
}

// The last `a:b:` prefix hashed by murmur3Key: its bytes stay at the start of the scratch buffer
// and the state after its whole blocks is kept, so the next key with the same prefix hashes only
// what follows (the assignment hot path: one experiment, many users).
let prefixA: string | undefined
let prefixB: string | undefined
let prefixLen = 0
let prefixState = 0

/**
 * MurmurHash3 x86 32-bit (seed 0) of the UTF-8 bytes of `${a}:${b}:${c}`, without building the
 * string: equal to `murmur3(`${a}:${b}:${c}`)`.
 */
export function murmur3Key(a: string, b: string, c: string): number {
  if (a !== prefixA || b !== prefixB) {
    let p = encode(a)
    p = encode(':', p)
    p = encode(b, p)
    prefixLen = encode(':', p)
    prefixState = blocks(0, scratch, 0, prefixLen & ~3)
    prefixA = a
    prefixB = b
  }
  const len = encode(c, prefixLen)
  return finish(blocks(prefixState, scratch, prefixLen & ~3, len & ~3), scratch, len)
}
