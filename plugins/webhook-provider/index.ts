import { Type as T } from '@sinclair/typebox'
import { Elysia } from 'elysia'
import { invalidField } from '../../core/http'
import { NO_ANSWER, OutboundRefused, answerPrefix } from '../../core/outbound'
import { type SendResult, definePlugin, defineProvider } from '../../core/plugin'
import { SecretUrl, SecretValues } from '../../core/secrets'

const Method = T.Union([T.Literal('POST'), T.Literal('PUT'), T.Literal('GET'), T.Literal('DELETE')])

/** Spec 2 "Webhook provider configuration". */
export const WebhookSettings = T.Object(
  {
    /**
     * Full target URL with scheme; `$VAR` reads it from the environment. Required (checked at
     * creation for the spec's message). Its credentials and query values are secret.
     */
    url: SecretUrl(T.Optional(T.String())),
    /** Only POST and PUT work; GET and DELETE fail each send with 'method X not yet implemented'. */
    method: T.Optional(T.Union([Method, T.String({ pattern: '^\\$' })])),
    /**
     * Sent on every request, overriding Content-Type when named; values are secret and never
     * `$`-expanded. `Host`, pseudo headers (`:authority`), `X-Forwarded-Host` and `Forwarded` are
     * refused: the destination is the url's alone.
     */
    headers: SecretValues(T.Optional(T.Record(T.String(), T.String()))),
    /** Request timeout; spec 2 says 30 seconds, lower it only for tests and benches. */
    timeout_ms: T.Optional(T.Integer({ minimum: 1, maximum: 300_000 })),
  },
  { additionalProperties: false },
)

/**
 * Headers that name the request's destination, which only `url` says: `Host`, HTTP/2 pseudo
 * headers (`:authority`) and the forwarding ones a proxy routes by. Set beside a stored secret
 * header, they moved it to another virtual host behind the same front (a `config` token sent the
 * masked read back with `Host: attacker-vhost`), past the rule that a masked secret is kept only
 * for its destination.
 */
const DESTINATION_HEADERS = new Set(['host', 'x-forwarded-host', 'forwarded'])
const namesDestination = (name: string) => {
  const n = name.trim().toLowerCase()
  return DESTINATION_HEADERS.has(n) || n.startsWith(':')
}

/** Spec 2 section 8: the webhook request timeout. */
export const DEFAULT_TIMEOUT_MS = 30_000

const RETRYABLE = (status: number) => status === 408 || status === 429 || status >= 500

/**
 * A target the outbound policy refuses fails at once and for good. Every other failure before an
 * answer (refused, reset, timed out, no such name) reads the same and is retried: spec 2's
 * separate 'connection refused' and 'context deadline exceeded' told a port scanner which ports
 * were open (issue 34 point 5).
 */
function failure(e: unknown): SendResult {
  if (e instanceof OutboundRefused) return { ok: false, retryable: false, error: e.message }
  return { ok: false, retryable: true, error: NO_ANSWER }
}

export const webhookProvider = defineProvider({
  type: 'webhook',
  config: WebhookSettings,
  expandEnv: true,
  create(s, { log, outbound }) {
    if (!s.url) throw new Error('webhook: url is required')
    let url: URL
    try {
      url = new URL(s.url)
    } catch {
      // The value is not repeated: it may have come from an environment variable.
      throw new Error('webhook: url is not a full URL with scheme (http:// or https://)')
    }
    if (url.protocol !== 'http:' && url.protocol !== 'https:')
      throw new Error('webhook: url scheme must be http or https')
    const method = (s.method || 'POST').toUpperCase()
    if (!['POST', 'PUT', 'GET', 'DELETE'].includes(method))
      throw new Error('webhook: method must be POST, PUT, GET or DELETE')
    const headers: Record<string, string> = { 'content-type': 'application/json' }
    for (const [k, v] of Object.entries(s.headers ?? {})) {
      if (namesDestination(k))
        throw invalidField(
          `headers.${k}`,
          'names where the request goes, which only url says (Host, :authority, X-Forwarded-Host and Forwarded are refused)',
        )
      headers[k.toLowerCase()] = v
    }
    const timeoutMs = s.timeout_ms ?? DEFAULT_TIMEOUT_MS
    return {
      // A target the outbound policy refuses is refused when configured, not at the first send;
      // a name that does not resolve yet is left to the sends (it may be created later).
      async verify() {
        await outbound.refuseEarly(url.hostname)
      },
      async send(d, signal) {
        if (method !== 'POST' && method !== 'PUT')
          return { ok: false, retryable: false, error: `method ${method} not yet implemented` }
        const payload = {
          id: d.id,
          provider: d.provider,
          level: d.level,
          targets: d.targets,
          timestamp: d.timestamp,
          title: d.title,
          body: d.body,
          raw: d.raw,
        }
        const timeout = AbortSignal.timeout(timeoutMs)
        try {
          const res = await outbound.fetch(url, {
            method,
            // The same on every retry of this delivery: receivers drop repeats by it (at-least-once).
            headers: { ...headers, 'x-liveops-delivery': d.id },
            body: JSON.stringify(payload),
            signal: signal ? AbortSignal.any([signal, timeout]) : timeout,
          })
          // Spec 2: the answer is only logged. Readers of the delivery log never see it.
          log.debug('webhook answered', { id: d.id, status: res.status, body: await answerPrefix(res) })
          if (res.ok) return { ok: true }
          return {
            ok: false,
            retryable: RETRYABLE(res.status),
            error: `unexpected status code: ${res.status}`,
          }
        } catch (e) {
          return failure(e)
        }
      },
    }
  },
})

/** Registers the `webhook` provider type; channels of that type are configured under plugins.notify.channels. */
export default definePlugin({
  name: 'webhook-provider',
  setup(ctx) {
    ctx.providers.register(webhookProvider)
    return new Elysia({ name: 'webhook-provider' })
  },
})
