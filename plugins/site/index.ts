import { definePlugin } from '../../core/plugin'
import { MessageHub, channelTargets } from './dispatch'
import { type Settings, SiteConfig } from './keys'
import m001 from './migrations/001_site.sql' with { type: 'text' }
import m002 from './migrations/002_site_revision.sql' with { type: 'text' }
import { channelName, siteProvider, siteRouting } from './notify'
import { siteRoutes } from './routes'
import { siteStore } from './store'

const TOPIC = 'site.message'
/** A write of the settings or the routing: every instance drops its copy. */
const SETTINGS = 'site.settings'
const DAY = 86_400_000

/**
 * The platform's notification channels (spec 3): the `notification.*` site settings (YAML
 * values, overridable at runtime through `/api/v1/site/{key}`, effective at once), the ops
 * notification routing, and the channels themselves: in-app messages (stored, listed, marked
 * read, pushed by server-sent events), the chat robot, a custom webhook and SMTP mail through the
 * smtp provider. They are notify channels (`site.inapp`, `site.chatbot`, `site.webhook`,
 * `site.email`, `site.<routing channel id>`) and the routing is one of notify's route sources:
 * platform events reach them as notifications, with notify's queue, retries, delivery ids, logs
 * and rules, routed once.
 */
export default definePlugin({
  name: 'site',
  dependsOn: ['notify'],
  config: SiteConfig,
  migrations: [
    { id: 1, name: 'site', sql: m001 },
    { id: 2, name: 'site_revision', sql: m002 },
  ],
  permissions: {
    // Channel settings hold credentials: operators and admins only, reads too.
    site: { write: ['operator'], read: ['operator'] },
    // Every role reads in-app messages; marking them read is a write, which the read-only viewer lacks.
    messages: { write: ['operator', 'analyst', 'developer'] },
  },
  setup(ctx) {
    const store = siteStore(
      ctx.db,
      () => ctx.config.notification as Partial<Settings>,
      () => void ctx.changes.publish(SETTINGS, {}),
    )
    // The copy of the settings the notifications use (store.current): another instance's write
    // drops it at its notice; the revision check catches a notice lost while a connection was down.
    ctx.changes.on(SETTINGS, (_d, origin) => {
      if (origin === 'remote') store.drop()
    })
    ctx.schedule('site.sync', ctx.config.sync_ms, () => store.sync(), { perInstance: true })
    const hub = new MessageHub()
    const targets = channelTargets({
      store,
      providers: ctx.providers,
      log: ctx.log,
      outbound: ctx.outbound,
      timeoutMs: () => ctx.config.send_timeout_ms,
      announce: (m) => ctx.changes.publish(TOPIC, { id: m.id }),
      sensitive: ctx.core.log.sensitive_fields,
    })
    ctx.providers.register(siteProvider(store, targets))
    const notify = ctx.service('notify')
    // The routing's channels (`site.<id>`) are this plugin's: a `config` token cannot take their names.
    notify.reserveChannels(channelName(''))
    const routing = siteRouting(store, targets, notify)
    notify.addRoutes((n) => routing.route(n))
    // After notify's start: its channel slots exist by then.
    ctx.onStart(() => routing.start())
    // Browsers follow one instance; a message stored by any instance reaches them all.
    ctx.changes.on(TOPIC, async ({ id }) => {
      const m = typeof id === 'string' ? await store.message(id) : undefined
      if (m) hub.publish(m)
    })
    const listeners = ctx.metrics.gauge(
      'svc_site_message_streams',
      'Browsers following the in-app message stream',
    )
    ctx.metrics.collect(() => listeners.set(hub.size))
    ctx.bus.on('server.draining', () => hub.closeAll())
    const keepDays = ctx.config.message_retention_days
    if (keepDays)
      ctx.schedule(
        'site.message-retention',
        DAY,
        async () => {
          const n = await store.purgeMessages(Date.now() - keepDays * DAY)
          if (n) ctx.log.info('in-app message retention purge', { deleted: n })
        },
        { runAtStart: true },
      )
    return siteRoutes(ctx as never, {
      store,
      hub,
      targets,
      maxStreams: () => ctx.config.max_streams_per_principal,
    })
  },
})
