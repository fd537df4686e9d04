import { requestPrincipal } from '../../core/auth/guard'
import type { AuthService } from '../../core/auth/service'
import { ok } from '../../core/http'
import type { ChannelManager } from './channels'

/**
 * `GET /api/v1/status` (spec 2: a public read): the service status and each channel. A channel in
 * error reads `error`; why (`error: <reason>`) only for callers who may read channels, as
 * `GET /config/{name}` allows them (a user with `channels:read` or the admin token, judged as
 * /healthz judges them whatever `auth.enabled` says; a `query` token or server key). The reason
 * names the channel's host, the address behind a `$VAR` URL, the outbound policy's refusal: it had
 * been shown to anonymous callers (audit 19).
 */
export function statusAnswer(channels: ChannelManager, auth: AuthService) {
  const readsChannels = async (request: Request, headers: Record<string, string | undefined>) => {
    const who = requestPrincipal(auth, request)
    if (who) return auth.permissions.allows(who.roles, 'channels:read')
    try {
      return !!(await auth.authenticateApp({ scope: 'query', permission: 'channels:read' }, headers))
    } catch {
      return false
    }
  }
  return async ({ request, headers }: { request: Request; headers: Record<string, string | undefined> }) => {
    const list = channels.list()
    const healthy = list.every((s) => !s.enabled || s.status === 'available')
    const detail = await readsChannels(request, headers)
    return ok({
      status: healthy ? 'ok' : 'degraded',
      providers: list.map((s) => ({
        name: s.name,
        type: s.type,
        status: detail || s.status === 'available' ? s.status : 'error',
        enabled: s.enabled,
      })),
    })
  }
}
