import type { Principal } from './auth/service'
import { clientIp } from './http'
import type { FastServer, PluginContext } from './plugin'

/** Who made a write and from where: what an audit entry records (issue #19 point 7). */
export interface AuditCaller {
  principal: Principal
  request: Request
  server: FastServer | null
}

/**
 * The one way a plugin records an audit entry: `audit(caller, 'backups.delete', id, details)`
 * raises `audit` on the bus (the audit plugin stores it). Details arrive already masked by the
 * caller's schema (`maskSecrets`); the audit plugin masks `sensitive_fields` again.
 */
export function auditor(ctx: Pick<PluginContext<unknown>, 'bus' | 'core'>) {
  return (c: AuditCaller, action: string, target: string, details?: Record<string, unknown>) =>
    void ctx.bus.emit('audit', {
      actor_kind: c.principal.kind,
      actor_id: c.principal.id,
      actor_name: c.principal.username,
      action,
      target,
      ip: clientIp(c.request, c.server, ctx.core.server.trust_forwarded_for),
      ok: true,
      details,
    })
}
