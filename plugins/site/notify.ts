import { Type as T } from '@sinclair/typebox'
import { type Delivery, type Services, defineProvider } from '../../core/plugin'
import type { Note } from './channels'
import type { Targets } from './dispatch'
import { BUILTIN, EVENTS, type RoutedEvent } from './routing'
import type { SiteStore } from './store'

type NotifyService = Services['notify']
/** What notify shows a route of a notification that named no channel. */
type RoutingInput = Parameters<Parameters<NotifyService['addRoutes']>[0]>[0]

/** The notify channel of a site channel (`inapp`, `webhook`, a routing channel's id). */
export const channelName = (id: string) => `site.${id}`

/** A notify delivery as the site channels carry it: spec 3's event body, its id the delivery's. */
function noteOf(d: Delivery): Note {
  return {
    id: d.id,
    event: String(d.raw.type ?? ''),
    level: d.level,
    title: d.title,
    body: d.body,
    at: d.timestamp,
    payload: (d.raw.params as Record<string, unknown> | undefined) ?? {},
  }
}

/**
 * Provider type `site`: one site channel (`{channel: 'webhook'}`), sent with the site settings and
 * routing as they are at send time (the copy of the current revision, `store.current`), so a change
 * through `/api/v1/site/{key}` or `/api/v1/ops/notifications` applies to the next send, on every
 * instance once its notice arrives. A channel switched
 * off or unconfigured meanwhile fails without a retry; a receiver that failed is retried by
 * notify (4xx answers are not).
 */
export function siteProvider(store: SiteStore, targets: Targets) {
  return defineProvider({
    type: 'site',
    config: T.Object({ channel: T.String({ minLength: 1 }) }, { additionalProperties: false }),
    create: ({ channel }) => ({
      async send(d: Delivery) {
        const { effective: e, routing: r } = await store.current()
        const t = targets.target(channel, e, r)
        if (!t)
          return {
            ok: false,
            retryable: false,
            error: `site channel '${channel}' is switched off or not configured`,
          }
        const out = await targets.deliver(t, noteOf(d))
        return out.ok ? { ok: true } : { ok: false, retryable: out.retryable, error: out.error }
      },
    }),
  })
}

/**
 * The site's channels as notify channels and its ops notification routing as notify routes: a
 * platform event notify turns into a notification goes, when no rule decided, to the site
 * channels the routing names (or every built-in channel that is on), through notify's queue.
 */
export function siteRouting(store: SiteStore, targets: Targets, notify: NotifyService) {
  /** Routing channels given to notify on this instance; a new one is given when first routed to. */
  const provided = new Set<string>()
  const provide = async (id: string) => {
    if (provided.has(id)) return
    await notify.provideChannel(channelName(id), 'site', { channel: id })
    provided.add(id)
  }
  return {
    async start() {
      for (const id of BUILTIN) await provide(id)
      for (const c of (await store.routing()).channels) await provide(c.id)
    },
    /**
     * The rules naming the event (certificate rules only within their thresholdDays), else every
     * built-in channel that is on. A function invocation goes nowhere by default unless one of its
     * calls failed: every call of a busy fleet would flood the channels.
     */
    async route(n: RoutingInput): Promise<string[]> {
      if (!(EVENTS as readonly string[]).includes(n.type)) return []
      const event = n.type as RoutedEvent
      const { effective: s, routing: r } = await store.current()
      const named = r.rules.filter((rule) => rule.event === event)
      const days = Number(n.params.days_left)
      let ids: string[]
      if (named.length)
        ids = named
          .filter(
            (rule) =>
              rule.thresholdDays === undefined ||
              event !== 'certificate_expiring' ||
              days <= rule.thresholdDays,
          )
          .flatMap((rule) => rule.channels)
      else if (event === 'function.invoked' && !Number(n.params.failed)) ids = []
      else ids = [...BUILTIN]
      const on = [...new Set(ids)].filter((id) => targets.target(id, s, r))
      for (const id of on) await provide(id)
      return on.map(channelName)
    },
  }
}
