import type { BusEvents } from '../../core/events'
import type { Logger } from '../../core/log'
import type { Metrics } from '../../core/metrics'
import type { Outbound } from '../../core/outbound'
import type { ProviderRegistry } from '../../core/plugin'
import { type Note, type SendOutcome, describe, sendChatbot, sendEmail, sendWebhook } from './channels'
import type { KeyName } from './keys'
import type { RoutedEvent, Routing } from './routing'
import { type Effective, type Message, type SiteStore, valuesOf } from './store'

/** Browsers following `/api/v1/site/messages/stream`: each new in-app message is pushed to all. */
export class MessageHub {
  private clients = new Map<(chunk: string) => void, () => void>()

  /** `end` closes the client's stream (a stopping server, `closeAll`). */
  subscribe(push: (chunk: string) => void, end: () => void = () => undefined): () => void {
    this.clients.set(push, end)
    return () => this.clients.delete(push)
  }

  /** Ends every stream: the server is draining. */
  closeAll(): void {
    const ends = [...this.clients.values()]
    this.clients.clear()
    for (const end of ends) end()
  }

  publish(m: Message): void {
    const chunk = `id: ${m.id}\nevent: message\ndata: ${JSON.stringify(m)}\n\n`
    for (const push of this.clients.keys()) push(chunk)
  }

  get size(): number {
    return this.clients.size
  }
}

export type Target = { id: string; send: (n: Note) => Promise<SendOutcome> }

/**
 * Routes platform events to channels, best effort (spec 3 section 6): every send is logged and
 * counted, a failure never reaches the emitter, and the emitter never waits for a send.
 */
export function dispatcher(d: {
  store: SiteStore
  hub: MessageHub
  providers: ProviderRegistry
  log: Logger
  /** Settings overridden through the API and the routing's channels go out under the policy. */
  outbound: Outbound
  metrics: Metrics
  timeoutMs: () => number
  /** Tells every instance a message was stored, so each pushes it to its own browsers. */
  announce: (m: Message) => Promise<void>
}) {
  const sent = d.metrics.counter('svc_site_notifications_total', 'Notifications sent to site channels', [
    'channel',
    'outcome',
  ])

  /**
   * The client for a channel whose destination is made of `keys`: trusted when the YAML (or the
   * default) gives all of them, under the outbound policy when any was set through the API.
   */
  const via = (e: Effective, ...keys: KeyName[]) =>
    keys.some((k) => e[k].origin === 'override') ? d.outbound : d.outbound.trusted

  /** A built-in channel when its switch is on and it is configured, else undefined. */
  const builtin = (id: string, e: Effective): Target | undefined => {
    const s = valuesOf(e)
    switch (id) {
      case 'inapp':
        return s.inAppEnabled
          ? {
              id,
              send: async (n) => {
                const m = await d.store.addMessage({
                  event: n.event,
                  level: n.level,
                  title: n.title,
                  body: n.body,
                  data: { id: n.id, ...n.payload },
                })
                await d.announce(m)
                return { ok: true }
              },
            }
          : undefined
      case 'chatbot':
        return s.chatbotUrl
          ? {
              id,
              send: (n) => sendChatbot(via(e, 'chatbotUrl'), s.chatbotUrl, s.chatbotSecret, n, d.timeoutMs()),
            }
          : undefined
      case 'webhook':
        return s.webhookUrl
          ? {
              id,
              send: (n) => sendWebhook(via(e, 'webhookUrl'), s.webhookUrl, s.webhookSecret, n, d.timeoutMs()),
            }
          : undefined
      case 'email':
        return s.emailEnabled ? { id, send: (n) => sendEmail(s, n, mail(e)) } : undefined
    }
    return undefined
  }

  /** What sendEmail needs, for the SMTP host and port of `e`. */
  const mail = (e: Effective) => ({
    providers: d.providers,
    log: d.log,
    outbound: via(e, 'smtpHost', 'smtpPort'),
  })

  /** A channel of the ops routing: always set through the API, so always under the policy. */
  const routed = (c: Routing['channels'][number], timeoutMs = d.timeoutMs()): Target =>
    c.type === 'chatbot'
      ? { id: c.id, send: (n) => sendChatbot(d.outbound, c.url, c.secret ?? '', n, timeoutMs) }
      : { id: c.id, send: (n) => sendWebhook(d.outbound, c.url, c.secret ?? '', n, timeoutMs) }

  const target = (id: string, e: Effective, r: Routing): Target | undefined => {
    const c = r.channels.find((x) => x.id === id)
    return c ? routed(c) : builtin(id, e)
  }

  /**
   * The channels an event goes to: the rules naming it (certificate rules only within their
   * thresholdDays), else every built-in channel that is on. A function invocation goes nowhere by
   * default unless one of its calls failed: every call of a busy fleet would flood the channels.
   */
  const targets = async <K extends RoutedEvent>(event: K, e: BusEvents[K]): Promise<Target[]> => {
    const [s, r] = await Promise.all([d.store.effective(), d.store.routing()])
    const rules = r.rules.filter(
      (rule) =>
        rule.event === event &&
        (rule.thresholdDays === undefined ||
          event !== 'certificate_expiring' ||
          (e as BusEvents['certificate_expiring']).days_left <= rule.thresholdDays),
    )
    const named = r.rules.some((rule) => rule.event === event)
    let ids: string[]
    if (named) ids = [...new Set(rules.flatMap((rule) => rule.channels))]
    else if (
      event === 'function.invoked' &&
      (e as BusEvents['function.invoked']).invocations.every((i) => i.outcome === 'success')
    )
      ids = []
    else ids = ['inapp', 'chatbot', 'webhook', 'email']
    return ids.map((id) => target(id, s, r)).filter((t): t is Target => !!t)
  }

  const deliver = async (t: Target, n: Note): Promise<SendOutcome> => {
    let out: SendOutcome
    try {
      out = await t.send(n)
    } catch (e) {
      out = { ok: false, error: (e as Error).message }
    }
    sent.inc({ channel: t.id, outcome: out.ok ? 'sent' : 'failed' })
    if (!out.ok)
      d.log.warn('notification send failed', { channel: t.id, event: n.event, id: n.id, error: out.error })
    return out
  }

  const note = <K extends RoutedEvent>(event: K, e: BusEvents[K]): Note => ({
    ...describe(event, e),
    id: Bun.randomUUIDv7(),
    at: new Date().toISOString(),
  })

  return {
    builtin,
    routed,
    mail,
    deliver,
    /** Sends in the background; resolves at once. `done` (tests) resolves when every send finished. */
    route<K extends RoutedEvent>(event: K, e: BusEvents[K], done?: (outcomes: SendOutcome[]) => void): void {
      void (async () => {
        try {
          const n = note(event, e)
          const outs = await Promise.all((await targets(event, e)).map((t) => deliver(t, n)))
          done?.(outs)
        } catch (err) {
          d.log.error('notification routing failed', { event, error: String(err) })
        }
      })()
    },
  }
}
export type Dispatcher = ReturnType<typeof dispatcher>
