import type { Bus } from '../../core/bus'
import type { Logger } from '../../core/log'
import type { NotifyService } from './notify'
import type { NotifyBody } from './schema'

/**
 * Platform events become notifications: the notification's `type` is the event's name, so the
 * static routes (`routes: [{ type: 'certificate_*', channels: [...] }]`) and the rules plugin's
 * router decide where each goes, exactly as for `POST /api/v1/notify`. A platform event that no
 * route or rule takes is dropped with a debug line: raising it never fails its producer.
 */
export function subscribePlatformEvents(bus: Bus, service: NotifyService, log: Logger): () => void {
  const send = async (body: NotifyBody) => {
    const r = await service.notify(body)
    if (r.code !== 0) log.debug('platform event not routed', { type: body.type, reason: r.message })
  }
  const offs = [
    bus.on('alert.fired', (e) =>
      send({
        type: 'alert.fired',
        level: e.level,
        title: e.title,
        body: e.body,
        params: { ...e.params, alert_id: e.alert_id, source: e.source },
        idempotency_key: `alert:${e.alert_id}:${e.at}`,
      }),
    ),
    bus.on('certificate_expiring', (e) =>
      send({
        type: 'certificate_expiring',
        level: 'warning',
        title: `Certificate for ${e.domain}:${e.port} expires in ${e.days_left} days`,
        body: `It is valid until ${e.valid_to}.`,
        params: { ...e, alert_id: `certificate:${e.id}` },
      }),
    ),
    bus.on('certificate_expired', (e) =>
      send({
        type: 'certificate_expired',
        level: 'critical',
        title: `Certificate for ${e.domain}:${e.port} has expired`,
        body: `It was valid until ${e.valid_to}.`,
        params: { ...e, alert_id: `certificate:${e.id}` },
      }),
    ),
    bus.on('model_drift', (e) =>
      send({
        type: 'model_drift',
        level: e.severity === 'medium' ? 'warning' : e.severity === 'high' ? 'error' : 'critical',
        title: `Model ${e.model_id} is drifting (${e.severity})`,
        body:
          e.accuracy_drop !== undefined
            ? `Feedback accuracy dropped by ${(e.accuracy_drop * 100).toFixed(1)} points.`
            : 'Its input distribution shifted.',
        params: {
          model_id: e.model_id,
          game_id: e.game_id,
          severity: e.severity,
          alert_id: `model:${e.model_id}`,
        },
      }),
    ),
    bus.on('experiment_srm', (e) =>
      send({
        type: 'experiment_srm',
        level: 'warning',
        title: `Experiment ${e.experiment_id}: sample ratio mismatch`,
        body: `The observed split differs from the configured weights (p = ${e.p_value}).`,
        params: { ...e, alert_id: `experiment:${e.experiment_id}` },
        // The check runs whenever results are read: one notification per experiment and day.
        idempotency_key: `experiment_srm:${e.experiment_id}:${new Date().toISOString().slice(0, 10)}`,
      }),
    ),
    bus.on('function.invoked', (e) => {
      const failed = e.invocations.filter((i) => i.outcome !== 'success')
      const fns = [...new Set(e.invocations.map((i) => i.function_id))].join(', ')
      const minute = new Date().toISOString().slice(0, 16)
      return send({
        type: 'function.invoked',
        level: failed.length ? 'error' : 'info',
        title: `${e.invocations.length} invocations of ${fns} on ${e.agent_id}${failed.length ? `, ${failed.length} failed` : ''}`,
        body: `Game ${e.game_id}, environment ${e.env}: ${e.invocations
          .slice(0, 10)
          .map(
            (i) =>
              `${i.function_id} ${i.outcome}${i.duration_ms !== undefined ? ` in ${i.duration_ms} ms` : ''}`,
          )
          .join(
            '; ',
          )}${failed.length ? `. Later failed reports of ${e.agent_id} this minute (${minute} UTC) are not notified again: the invocation analytics list them.` : ''}`,
        params: {
          agent_id: e.agent_id,
          game_id: e.game_id,
          env: e.env,
          failed: failed.length,
          invocations: e.invocations.slice(0, 100),
        },
        // A report with a failure reaches every built-in channel (in-app, mail, chat): one agent
        // reporting 1,000 failures had put 1,000 messages in the admin's inbox. The first such
        // report of an agent in a minute is notified; the rest recall its answer.
        ...(failed.length ? { idempotency_key: `function.invoked:failed:${e.agent_id}:${minute}` } : {}),
      })
    }),
  ]
  return () => {
    for (const off of offs) off()
  }
}
