/*
 * Reading a request beyond what Elysia gives: who sent it (for the audit log and the throttles)
 * and its body up to a limit. core/http.ts re-exports both.
 */

/**
 * The client's address for the audit log: with `trustForwardedFor` (a reverse proxy in front,
 * `server.trust_forwarded_for`) the last `X-Forwarded-For` entry, the one the proxy added, as
 * the login throttle reads it; else the socket's peer; undefined through `app.handle` without a
 * server.
 */
export function clientIp(
  request: Request,
  server: { requestIP(r: Request): { address: string } | null } | null | undefined,
  trustForwardedFor: boolean,
): string | undefined {
  if (trustForwardedFor) {
    const last = request.headers.get('x-forwarded-for')?.split(',').pop()?.trim()
    if (last) return last
  }
  return server?.requestIP(request)?.address ?? undefined
}

/**
 * Reads a body of unknown length up to `limit` bytes and stops at the first chunk past it (then
 * the answer is longer than `limit`, and the rest is never read): what Bun's own cap would do,
 * without its empty 413.
 */
export async function readBounded(request: Request, limit: number): Promise<Uint8Array> {
  if (!request.body) return new Uint8Array(0)
  const reader = request.body.getReader()
  const parts: Uint8Array[] = []
  let total = 0
  for (;;) {
    const { done, value } = await reader.read()
    if (done) break
    total += value.byteLength
    parts.push(value)
    if (total > limit) {
      reader.cancel().catch(() => undefined)
      break
    }
  }
  return parts.length === 1 ? parts[0] : Buffer.concat(parts)
}
