import type { WriteAudit } from './audit'

/**
 * The platform events, in one place. Producers emit them on the app's bus (`ctx.bus.emit`);
 * consumers subscribe (`ctx.bus.on`). A producer never imports its consumers: the notification
 * service (and the rules plugin) route what they hear here to channels.
 *
 * Add an event here with its payload type and a line on who raises it and when. Names follow
 * the spec where it names them (spec 3 section 6: `alert.fired`, `certificate_expiring`,
 * `certificate_expired`).
 */

/** Severity of an alert, from the notification service's levels. */
export type AlertLevel = 'info' | 'warning' | 'error' | 'critical'

export interface AlertFired {
  /** Stable per alert source: repeats of one alert carry the same id (deduplication, acknowledgement). */
  alert_id: string
  /** Who raised it: `ops-alerts`, `certificates`, `ml`, `experiments`, ... */
  source: string
  level: AlertLevel
  title: string
  body: string
  /** Labels for routing and grouping (game_id, env, metric, domain, ...). */
  params: Record<string, string | number | boolean>
  /** RFC 3339. */
  at: string
}

/** Payload of `certificate_expired` (and, with days_left always set, of `certificate_expiring`). */
export interface CertificateEvent {
  /** The certificate record. */
  id: string
  domain: string
  port: number
  /** RFC 3339 expiry. */
  valid_to: string
  /** Whole days to expiry, rounded toward zero; negative once expired. */
  days_left?: number
  issuer?: string
  subject?: string
  /** The certificate alert rule that fired (table certificate_alerts) and its window in days. */
  rule_id?: string
  threshold_days?: number
}

/** One entry of the audit log: who did what, when and from where. */
export interface AuditEntry {
  /** Who: `user`, `apiKey`, `admin` (the admin token), `agent` or `system`. */
  actor_kind: string
  actor_id?: string
  actor_name?: string
  /** What, as `area.verb`: `site.set`, `rate_limits.put`, `auth.login`, ... */
  action: string
  /** What it acted on (a key, an id, a user name). */
  target?: string
  /** The client's address when the action came through HTTP. */
  ip?: string
  /** Whether it succeeded (a refused login is recorded too). */
  ok?: boolean
  /** Before and after, already masked by the producer (`maskSecrets` with its schema). */
  details?: Record<string, unknown>
  /** Epoch ms; the time it is heard when absent. */
  at?: number
}

export interface BusEvents {
  /** An alert rule's condition held (ops alert rules, any plugin's own checks). */
  'alert.fired': AlertFired
  /** Certificate monitoring: a certificate entered an alert rule's threshold window (once per certificate and rule). */
  certificate_expiring: CertificateEvent & { days_left: number }
  /** Certificate monitoring: a certificate is past its expiry (once per certificate and rule). */
  certificate_expired: CertificateEvent
  /** ML monitoring: a deployed model's accuracy dropped or its inputs shifted (PSI). */
  model_drift: {
    model_id: string
    game_id: string
    severity: 'medium' | 'high' | 'critical'
    accuracy_drop?: number
    psi?: Record<string, number>
    /** What drifted: feedback accuracy, or the input distribution (PSI of the worst feature). */
    kind?: 'accuracy' | 'feature'
    name?: string
    version?: number
    /** The stored alert (`GET /api/ml-models/{id}/stats` lists them). */
    alert_id?: string
    at?: string
  }
  /** Experiments: the observed split differs from the configured weights (sample ratio mismatch). */
  experiment_srm: { experiment_id: string; game_id: string; p_value: number }
  /** Any plugin, and core's login routes (`auth.login`, refused ones too): an action worth an audit entry. */
  audit: AuditEntry
  /**
   * Core: a write request (any method but GET, HEAD, OPTIONS) through the Elysia routes was
   * answered; the fast routes (signed ingestion) are not reported. `audit` says what the audit
   * log records of it (core/audit.ts `writeAuditor`): absent for writes that record nothing
   * (SDK and data-plane routes, `audit: false`) or whose handler recorded its own entry. It
   * carries the body only as its schema declares it, secrets masked.
   */
  'http.write': {
    method: string
    path: string
    /** The route template (`/api/v1/config/:name`). */
    route: string
    status: number
    ip?: string
    principal?: { kind: string; id: string; username: string }
    audit?: WriteAudit
  }
  /**
   * Core (`serve`): a signal arrived and the server stops taking connections. Responses that
   * never end on their own (server-sent event streams) close now, so the requests in flight can
   * finish within `server.shutdown_grace_s` instead of holding it to the end.
   */
  'server.draining': { signal: string }
  /** Agents: invocations an agent reported (one event per report, with every invocation in it). */
  'function.invoked': {
    agent_id: string
    game_id: string
    env: string
    invocations: Array<{
      function_id: string
      ts: number
      duration_ms?: number
      outcome: string
      trace_id?: string
    }>
  }
}
