import type { Principal } from './auth/service'
import { clientIp } from './http'
import type { FastServer, PluginContext } from './plugin'

/** Who made a write and from where: what an audit entry records (issue #19 point 7). */
export interface AuditCaller {
  /** Absent for callers that proved themselves another way (a chat platform's callback): name them in `actor`. */
  principal?: Principal
  request: Request
  server: FastServer | null
}

/** Who acted when no principal says it: `{kind: 'chatcard', name: <open_id>}`. */
export interface AuditActor {
  kind: string
  id?: string
  name?: string
}

/**
 * Requests whose handler recorded its own entry: core's entry derived from the route (see
 * core/app.ts, `http.write`) is then not recorded again.
 */
const recorded = new WeakSet<Request>()
export const auditedByHandler = (request: Request) => recorded.has(request)

/**
 * The one way a plugin records an audit entry of its own, with details a route alone cannot
 * give (before and after): `audit(caller, 'backups.delete', id, details)` raises `audit` on the
 * bus (the audit plugin stores it). Details arrive already masked by the caller's schema
 * (`maskSecrets`); the audit plugin masks `sensitive_fields` again. Every other write is
 * recorded from its route without a call (core/app.ts).
 */
export function auditor(ctx: Pick<PluginContext<unknown>, 'bus' | 'core'>) {
  return (
    c: AuditCaller,
    action: string,
    target: string,
    details?: Record<string, unknown>,
    actor?: AuditActor,
  ) => {
    recorded.add(c.request)
    void ctx.bus.emit('audit', {
      actor_kind: actor?.kind ?? c.principal?.kind ?? 'anonymous',
      actor_id: actor ? actor.id : c.principal?.id,
      actor_name: actor ? actor.name : c.principal?.username,
      action,
      target,
      ip: clientIp(c.request, c.server, ctx.core.server.trust_forwarded_for),
      ok: true,
      details,
    })
  }
}
