import type { Logger } from '../../core/log'
import type { ProviderRegistry } from '../../core/plugin'
import { type Note, type SendOutcome, sendChatbot, sendEmail, sendWebhook } from './channels'
import type { Settings } from './keys'
import type { Routing } from './routing'
import type { Message, SiteStore } from './store'

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
 * The site channels as senders: the built-in ones (in-app, chat robot, webhook, mail) when their
 * switch is on and they are configured, and the routing's own channels. Notify's `site` provider
 * sends through them (plugins/site/notify.ts), and the test route sends one at once.
 */
export function channelTargets(d: {
  store: SiteStore
  providers: ProviderRegistry
  log: Logger
  timeoutMs: () => number
  /** Tells every instance a message was stored, so each pushes it to its own browsers. */
  announce: (m: Message) => Promise<void>
}) {
  /** A built-in channel when its switch is on and it is configured, else undefined. */
  const builtin = (id: string, s: Settings): Target | undefined => {
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
          ? { id, send: (n) => sendChatbot(s.chatbotUrl, s.chatbotSecret, n, d.timeoutMs()) }
          : undefined
      case 'webhook':
        return s.webhookUrl
          ? { id, send: (n) => sendWebhook(s.webhookUrl, s.webhookSecret, n, d.timeoutMs()) }
          : undefined
      case 'email':
        return s.emailEnabled ? { id, send: (n) => sendEmail(s, n, d.providers, d.log) } : undefined
    }
    return undefined
  }

  return {
    builtin,
    /** A built-in channel (when on) or a routing channel by id; undefined when there is none. */
    target(id: string, s: Settings, r: Routing): Target | undefined {
      const c = r.channels.find((x) => x.id === id)
      if (!c) return builtin(id, s)
      return c.type === 'chatbot'
        ? { id, send: (n) => sendChatbot(c.url, c.secret ?? '', n, d.timeoutMs()) }
        : { id, send: (n) => sendWebhook(c.url, c.secret ?? '', n, d.timeoutMs()) }
    },
    /** One send; a throw becomes a failure worth retrying, and every failure is logged. */
    async deliver(t: Target, n: Note): Promise<SendOutcome> {
      let out: SendOutcome
      try {
        out = await t.send(n)
      } catch (e) {
        out = { ok: false, retryable: true, error: (e as Error).message }
      }
      if (!out.ok)
        d.log.warn('notification send failed', { channel: t.id, event: n.event, id: n.id, error: out.error })
      return out
    },
  }
}
export type Targets = ReturnType<typeof channelTargets>
