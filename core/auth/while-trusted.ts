import type { Permission } from './roles'
import type { AuthService } from './service'

type Headers = Record<string, string | undefined>

/** The last event of a stream whose caller's credential no longer holds (`whileTrusted`). */
export const REVOKED_END = `event: end\ndata: ${JSON.stringify({
  error: 'unauthorized',
  message:
    'the credential this stream was opened with no longer holds (expired, signed out, or the user changed)',
})}\n\n`

/**
 * For an answer that outlives its request (a server-sent event stream): a signal that fires once
 * the credential it was opened with no longer grants `permission`: the access token expired, its
 * user was disabled, deleted or lost the role, or the login was signed out. The credential is
 * checked again every `everyMs` (against memory, as every request's: docs/security.md "How a
 * change of trust propagates"), until `gone` fires (the client left). Before, a stream kept
 * sending to a disabled user's open tab (sixteenth session's audit).
 */
export function whileTrusted(
  auth: Pick<AuthService, 'identify' | 'authorize'>,
  request: { headers: Headers; query?: Record<string, unknown>; gone: AbortSignal },
  permission: Permission,
  everyMs = 2_000,
): AbortSignal {
  const ended = new AbortController()
  const stop = () => clearInterval(timer)
  const timer = setInterval(async () => {
    try {
      auth.authorize(await auth.identify(request.headers, request.query), permission)
    } catch {
      stop()
      ended.abort()
    }
  }, everyMs)
  timer.unref?.()
  request.gone.addEventListener('abort', stop, { once: true })
  return ended.signal
}
