import { Type as T } from '@sinclair/typebox'
import { definePlugin } from '../../core/plugin'
import m001 from './migrations/001_certificates.sql' with { type: 'text' }
import { certRoutes } from './routes'
import { type CertService, certService } from './service'
import { certStore } from './store'

declare module '../../core/plugin' {
  interface Services {
    certificates: CertService
  }
}

/**
 * Spec 3 certificate monitoring: a ledger of TLS certificates (from a PEM or a live probe),
 * status checks, alert rules raising `certificate_expiring` / `certificate_expired` on the bus,
 * a scheduled check-all and the `svc_certificate_expiry_seconds{domain}` gauge.
 */
export default definePlugin({
  name: 'certificates',
  config: T.Object(
    {
      /** Seconds between scheduled check-alls; 0 turns the schedule off. Daily by default. */
      check_interval_s: T.Integer({ minimum: 0, default: 86_400 }),
      /** Probes in flight at once during a check-all. */
      check_concurrency: T.Integer({ minimum: 1, maximum: 1000, default: 32 }),
      /** TLS handshake timeout (spec 3: 10 seconds). */
      probe_timeout_ms: T.Integer({ minimum: 100, maximum: 120_000, default: 10_000 }),
      /** Expiring window of a certificate registered without thresholdDays (spec 3: 30). */
      default_threshold_days: T.Integer({ minimum: 1, maximum: 3650, default: 30 }),
    },
    { additionalProperties: false, default: {} },
  ),
  migrations: [{ id: 1, name: 'certificates', sql: m001 }],
  permissions: { certificates: { write: ['operator'] } },
  setup(ctx) {
    const cfg = ctx.config
    const store = certStore(ctx.db)
    const svc = certService(store, ctx.bus, ctx.log, {
      timeoutMs: cfg.probe_timeout_ms,
      concurrency: cfg.check_concurrency,
      outbound: ctx.outbound,
    })
    ctx.provide('certificates', svc)
    // Reports, never fails readiness: an expiring certificate is an alert, not an outage.
    ctx.health(
      'certificates',
      async () => {
        const c = await store.counts()
        return { status: 'up', total: c.active + c.expiring + c.expired + c.unknown, ...c }
      },
      { critical: false },
    )

    // Computed when read (spec 3: no background sampling); a domain's soonest expiry wins.
    const expiry = ctx.metrics.gauge(
      'svc_certificate_expiry_seconds',
      'Seconds until the soonest stored certificate of the domain expires (negative once expired)',
      ['domain'],
    )
    ctx.metrics.collect(async () => {
      const now = Date.now()
      expiry.reset()
      for (const r of await store.expiryByDomain())
        expiry.set({ domain: r.domain }, Math.round((Number(r.valid_to) - now) / 1000))
    })

    // One instance checks every certificate per tick (core's schedule), so an expiry alert is
    // raised once, not once per instance.
    if (cfg.check_interval_s > 0)
      ctx.schedule('certificates.check-all', cfg.check_interval_s * 1000, async () => {
        const r = await svc.checkAll()
        ctx.log.info('scheduled certificate check', { checked: r.checked, duration_ms: r.durationMs })
      })
    return certRoutes(ctx, cfg, store, svc)
  },
})
