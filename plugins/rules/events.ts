import type { Bus } from '../../core/bus'
import type { Logger } from '../../core/log'
import type { NotifyBody } from '../notify/schema'

type Level = NonNullable<NotifyBody['level']>

/**
 * Platform events become notifications without named channels, so the rules (and, past them, the
 * static routes) decide where they go. Each carries a stable `params.alert_id`, so repeats fold
 * into one incident, an acknowledgement covers them, and escalation keys on it.
 */
export function subscribe(
  bus: Bus,
  send: (n: NotifyBody) => Promise<{ code: number; message: string }>,
  log: Logger,
) {
  const deliver = async (n: NotifyBody) => {
    const r = await send(n)
    if (r.code !== 0) log.warn('platform event not delivered', { type: n.type, error: r.message })
  }
  const drift: Record<string, Level> = { medium: 'warning', high: 'error', critical: 'critical' }
  return [
    bus.on('alert.fired', (e) =>
      deliver({
        type: 'alert.fired',
        level: e.level,
        title: e.title,
        body: e.body,
        params: { ...e.params, alert_id: e.alert_id, source: e.source, at: e.at },
      }),
    ),
    bus.on('certificate_expiring', (e) =>
      deliver({
        type: 'certificate_expiring',
        level: e.days_left <= 7 ? 'critical' : 'warning',
        title: `Certificate for ${e.domain}:${e.port} expires in ${e.days_left} days`,
        body: `Valid until ${e.valid_to}.`,
        params: { ...e, alert_id: `certificate:${e.id}` },
      }),
    ),
    bus.on('certificate_expired', (e) =>
      deliver({
        type: 'certificate_expired',
        level: 'critical',
        title: `Certificate for ${e.domain}:${e.port} has expired`,
        body: `Expired at ${e.valid_to}.`,
        params: { ...e, alert_id: `certificate:${e.id}` },
      }),
    ),
    bus.on('model_drift', (e) =>
      deliver({
        type: 'model_drift',
        level: drift[e.severity] ?? 'warning',
        title: `Model ${e.model_id} drifted (${e.severity})`,
        body:
          e.accuracy_drop !== undefined
            ? `Accuracy dropped by ${(e.accuracy_drop * 100).toFixed(1)}%.`
            : 'Input distribution shifted.',
        params: { ...e, alert_id: `model_drift:${e.model_id}` },
      }),
    ),
    bus.on('experiment_srm', (e) =>
      deliver({
        type: 'experiment_srm',
        level: 'warning',
        title: `Sample ratio mismatch in experiment ${e.experiment_id}`,
        body: `p = ${e.p_value}`,
        params: { ...e, alert_id: `experiment_srm:${e.experiment_id}` },
      }),
    ),
  ]
}
