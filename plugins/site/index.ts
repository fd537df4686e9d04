import { definePlugin } from '../../core/plugin'
import { MessageHub, dispatcher } from './dispatch'
import { type Settings, SiteConfig } from './keys'
import m001 from './migrations/001_site.sql' with { type: 'text' }
import { siteRoutes } from './routes'
import { EVENTS } from './routing'
import { siteStore } from './store'

const TOPIC = 'site.message'

/**
 * The platform's notification channels (spec 3): the `notification.*` site settings (YAML
 * values, overridable at runtime through `/api/v1/site/{key}`, effective at once), the ops
 * notification routing, and the channels themselves: in-app messages (stored, listed, marked
 * read, pushed by server-sent events), the chat robot, a custom webhook and SMTP mail through the
 * smtp provider. Platform events heard on the bus are routed best effort.
 */
export default definePlugin({
  name: 'site',
  config: SiteConfig,
  migrations: [{ id: 1, name: 'site', sql: m001 }],
  permissions: {
    // Channel settings hold credentials: operators and admins only, reads too.
    site: { write: ['operator'], read: ['operator'] },
    // Every role reads in-app messages; marking them read is a write, which the read-only viewer lacks.
    messages: { write: ['operator', 'analyst', 'developer'] },
  },
  setup(ctx) {
    const store = siteStore(ctx.db, () => ctx.config.notification as Partial<Settings>)
    const hub = new MessageHub()
    const dispatch = dispatcher({
      store,
      hub,
      providers: ctx.providers,
      log: ctx.log,
      outbound: ctx.outbound,
      metrics: ctx.metrics,
      timeoutMs: () => ctx.config.send_timeout_ms,
      announce: (m) => ctx.changes.publish(TOPIC, { id: m.id }),
    })
    // Browsers follow one instance; a message stored by any instance reaches them all.
    ctx.changes.on(TOPIC, async ({ id }) => {
      const m = typeof id === 'string' ? await store.message(id) : undefined
      if (m) hub.publish(m)
    })
    for (const event of EVENTS) ctx.bus.on(event, (e) => dispatch.route(event, e as never))
    const listeners = ctx.metrics.gauge(
      'svc_site_message_streams',
      'Browsers following the in-app message stream',
    )
    ctx.metrics.collect(() => listeners.set(hub.size))
    ctx.bus.on('server.draining', () => hub.closeAll())
    return siteRoutes(ctx as never, { store, hub, dispatch })
  },
})
