import { auditor } from '../../core/audit'
import { MIN_SECRET } from '../../core/config'
import { definePlugin } from '../../core/plugin'
import { channelManager } from './channels'
import { subscribePlatformEvents } from './events'
import { logProvider } from './log-provider'
import { logStore, purgeLogs } from './logs'
import m001 from './migrations/001_notify.sql' with { type: 'text' }
import m002 from './migrations/002_app_tokens_to_core.sql' with { type: 'text' }
import m003 from './migrations/003_idempotency.sql' with { type: 'text' }
import m004 from './migrations/004_retention.sql' with { type: 'text' }
import { notifyService } from './notify'
import { type Dispatcher, dispatcher } from './queue'
import { notifyRoutes } from './routes'
import { NotifyConfig } from './schema'
import { queueStore } from './store'
import { templateStore } from './templates'
import { workerHub, workerToken } from './workers'

export type { NotifyService } from './notify'

const DAY = 86_400_000

/**
 * The notification service (spec 2): notify, the durable queue and its workers, providers and
 * their runtime configuration, delivery logs, templates and application tokens.
 *
 * Provider plugins (webhook-provider, smtp-provider, third-party `module:` files) register their
 * types in their own setup; notify builds channels only in onStart, after every plugin is set
 * up, so neither side depends on the other's order.
 */
export default definePlugin({
  name: 'notify',
  config: NotifyConfig,
  env: { NOTIFY_WORKER_TOKEN: 'workers.remote.token' },
  // It receives every channel's secrets unmasked: as long as the admin token must be (a two-letter
  // one passed, and the worker port answered 50,000 guesses a second). Checked with the schema, so
  // `liveops check-config` says it too (it had passed a file the server then refused).
  check: ({ workers: { remote } }) =>
    remote.enabled && remote.token && remote.token.length < MIN_SECRET
      ? [
          `plugins.notify.workers.remote.token (NOTIFY_WORKER_TOKEN): at least ${MIN_SECRET} characters, got ${remote.token.length}`,
        ]
      : [],
  migrations: [
    { id: 1, name: 'notify', sql: m001 },
    { id: 2, name: 'app_tokens_to_core', sql: m002 },
    { id: 3, name: 'idempotency', sql: m003 },
    { id: 4, name: 'retention', sql: m004 },
  ],
  // Spec 2 is one notification service: rules, groups, rosters and incidents check users against it too.
  permissions: {
    notify: { write: ['operator'] },
    // A channel's settings hold its credentials (masked, yet a target and a shape): operators
    // and admins only, reads too, as the site plugin's channel settings.
    channels: { write: ['operator'], read: ['operator'] },
  },
  setup(ctx) {
    const config = ctx.config
    ctx.auth.anonymousAppScopes = !config.auth.enabled
    ctx.providers.register(logProvider)
    // The instance's claims survive its restart under the same id (core keeps it in DATA_DIR), so
    // it can release them at once.
    const id = config.queue.instance_id || ctx.instanceId
    const channels = channelManager({
      db: ctx.db,
      registry: ctx.providers,
      log: ctx.log,
      outbound: ctx.outbound,
      sensitive: ctx.core.log.sensitive_fields,
      yaml: config.channels,
      apiEnv: config.api_env,
      onLocalChange: (name) => void ctx.changes.publish('notify.channels', { name }),
    })
    // Other instances' changes apply at once when they say so; the sync timer is the safety net.
    ctx.changes.on('notify.channels', (_d, origin) => {
      if (origin === 'remote')
        return channels.sync().catch((e) => ctx.log.error('channel sync failed', { error: String(e) }))
    })
    const queue = queueStore(ctx.db, id, { idempotencyEntries: config.idempotency_entries })
    const templates = templateStore(ctx.db, (id) => void ctx.changes.publish('notify.templates', { id }))
    ctx.changes.on('notify.templates', (_d, origin) => {
      if (origin === 'remote') templates.forget()
    })
    let disp: Dispatcher | undefined
    const remote = config.workers.remote
    const hub = remote.enabled
      ? workerHub({
          host: remote.host,
          port: remote.port,
          heartbeatS: remote.heartbeat_s,
          missedHeartbeats: remote.missed_heartbeats,
          resultTimeoutMs: remote.result_timeout_ms,
          outbound: ctx.core.outbound,
          log: ctx.log.child('notify-workers'),
          // Workers receive channel settings, secrets unmasked: the configuration's own token only,
          // whatever auth.enabled says (no user or application token may read those secrets).
          authenticate: workerToken(remote.token),
          onCapacity: () => disp?.wake(),
        })
      : undefined
    const service = notifyService({ config, channels, templates, store: queue, dispatcher: () => disp })
    ctx.provide('notify', service)
    const queued = ctx.metrics.gauge('svc_notify_queue_size', 'Deliveries not yet finished')
    ctx.metrics.collect(async () => queued.set(await queue.size()))

    // Subscribed from the start: an event raised by another plugin's onStart is not lost.
    const unsubscribe = subscribePlatformEvents(ctx.bus, service, ctx.log)
    ctx.onStart(async () => {
      await channels.start()
      disp = dispatcher({
        store: queue,
        channels,
        config,
        hub,
        log: ctx.log,
        metrics: ctx.metrics,
        instanceId: id,
      })
      channels.onChange((name) => disp?.hint(name))
      if (hub) {
        const port = hub.start()
        ctx.log.info(`remote workers connect to ws://${remote.host}:${port}/api/v1/workers/connect`)
      }
      await disp.start()
    })
    // This instance's channel slots follow changes made through the others (the change notice's safety net).
    // The safety net of both: a lost notice of another instance's channel or template change.
    ctx.schedule(
      'notify.channel-sync',
      config.queue.sync_ms,
      () => {
        templates.forget()
        return channels.sync()
      },
      { perInstance: true },
    )
    if (config.retention_days)
      ctx.schedule(
        'notify.retention',
        DAY,
        async () => {
          const n = await purgeLogs(ctx.db, Date.now() - config.retention_days * DAY)
          if (n.deliveries || n.notifications) ctx.log.info('notify retention purge', n)
        },
        { runAtStart: true },
      )
    ctx.onStop(async () => {
      unsubscribe()
      await disp?.stop()
      await hub?.stop()
      await channels.stop()
    })

    return notifyRoutes({
      guard: ctx.guard,
      service,
      channels,
      queue,
      logs: logStore(ctx.db, ctx.core.log.sensitive_fields),
      templates,
      hub,
      audit: auditor(ctx),
      auth: ctx.auth,
    })
  },
})
