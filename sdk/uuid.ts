/**
 * UUIDv7 (RFC 9562): 48 bits of Unix time in ms, then random bits. The SDK stamps one on each
 * event as its `event_id`, so a batch sent again by a retry is stored once (the server keeps ids
 * for its dedup window), and ids of one client arrive in time order, which keeps the server's
 * index of them compact. Within one millisecond, a counter in the 12 bits after the version keeps
 * a client's ids increasing.
 */
let lastMs = -1
let seq = 0

export function uuidv7(now = Date.now()): string {
  const b = new Uint8Array(16)
  crypto.getRandomValues(b)
  if (now === lastMs) seq = (seq + 1) & 0xfff
  else {
    lastMs = now
    seq = ((b[6] & 0x07) << 8) | b[7]
  }
  let ms = now
  for (let i = 5; i >= 0; i--) {
    b[i] = ms % 256
    ms = Math.floor(ms / 256)
  }
  b[6] = 0x70 | (seq >> 8)
  b[7] = seq & 0xff
  b[8] = 0x80 | (b[8] & 0x3f)
  const h = Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('')
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`
}
