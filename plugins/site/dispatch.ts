import { type Logger, maskNamed, setOnly } from '../../core/log'
import type { Outbound } from '../../core/outbound'
import type { ProviderRegistry } from '../../core/plugin'
import { type Note, type SendOutcome, sendChatbot, sendEmail, sendWebhook } from './channels'
import type { KeyName } from './keys'
import type { Routing } from './routing'
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
 * The most an in-app message keeps of its notification's params (`data`, as JSON, bytes): every
 * role reads each message in every page of the inbox (up to 500 a page) and on the stream. Notify
 * bounds what a request sends to as much; a larger payload (a platform event's) keeps its
 * top-level numbers, booleans and texts (each cut to MAX_MESSAGE_TEXT characters) while they fit,
 * and `truncated: true`. A trigger token's 9 MB params had made one inbox page 108 MB.
 */
export const MAX_MESSAGE_DATA = 65_536
const MAX_MESSAGE_TEXT = 1_000

export function messageData(id: string, payload: Record<string, unknown>): Record<string, unknown> {
  const data = { id, ...payload }
  if (Buffer.byteLength(JSON.stringify(data)) <= MAX_MESSAGE_DATA) return data
  const out: Record<string, unknown> = { id, truncated: true }
  let size = Buffer.byteLength(JSON.stringify(out))
  for (const [k, v] of Object.entries(payload)) {
    if (k === 'id' || k === 'truncated' || (v !== null && typeof v === 'object')) continue
    const kept = typeof v === 'string' && v.length > MAX_MESSAGE_TEXT ? v.slice(0, MAX_MESSAGE_TEXT) : v
    size += Buffer.byteLength(JSON.stringify({ [k]: kept })) - 1
    if (size > MAX_MESSAGE_DATA) break
    out[k] = kept
  }
  return out
}

/**
 * The site channels as senders: the built-in ones (in-app, chat robot, webhook, mail) when their
 * switch is on and they are configured, and the routing's own channels. Notify's `site` provider
 * sends through them (plugins/site/notify.ts), and the test route sends one at once.
 */
export function channelTargets(d: {
  store: SiteStore
  providers: ProviderRegistry
  log: Logger
  /** Settings overridden through the API and the routing's channels go out under the policy. */
  outbound: Outbound
  timeoutMs: () => number
  /** Tells every instance a message was stored, so each pushes it to its own browsers. */
  announce: (m: Message) => Promise<void>
  /** Names whose values an in-app message keeps masked (`log.sensitive_fields`): every role reads the messages. */
  sensitive?: readonly string[]
}) {
  const masked = new Set((d.sensitive ?? []).map((f) => f.toLowerCase()))
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
                  data: messageData(n.id, maskNamed(n.payload, masked, setOnly) as Record<string, unknown>),
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

  return {
    mail,
    routed,
    /** A built-in channel (when on) or a routing channel by id; undefined when there is none. */
    target(id: string, e: Effective, r: Routing): Target | undefined {
      const c = r.channels.find((x) => x.id === id)
      return c ? routed(c) : builtin(id, e)
    },
    /** One send; a throw becomes a failure worth retrying, and every failure is logged. */
    async deliver(t: Target, n: Note): Promise<SendOutcome> {
      let out: SendOutcome
      try {
        out = await t.send(n)
      } catch (e) {
        // Only the in-app store throws (the senders answer their failures): a store fault.
        out = { ok: false, retryable: true, error: (e as Error).message }
      }
      if (!out.ok)
        d.log.warn('notification send failed', { channel: t.id, event: n.event, id: n.id, error: out.error })
      return out
    },
  }
}
export type Targets = ReturnType<typeof channelTargets>
