import { Type as T } from '@sinclair/typebox'
import { outboundFailure } from '../../core/outbound'
import { defineProvider } from '../../core/plugin'
import { SecretUrl } from '../../core/secrets'

/**
 * The example third-party provider of docs/plugins.md: a file named by `module:` in the YAML
 * (the server) or `--module` (a remote worker), never imported by liveops itself. It posts each
 * delivery as a text message to a gateway URL.
 */
export default defineProvider({
  type: 'sms',
  config: T.Object(
    {
      /** The gateway; its credentials and query values are secret. */
      url: SecretUrl(T.String({ minLength: 1 })),
      sender: T.String({ default: 'LIVEOPS', maxLength: 11 }),
    },
    { additionalProperties: false },
  ),
  // Every request goes through `outbound`: the outbound policy for a channel configured through
  // the API, trusted for one the YAML names.
  create(settings, { outbound }) {
    return {
      async send(d, signal) {
        try {
          const res = await outbound.fetch(settings.url, {
            method: 'POST',
            headers: { 'content-type': 'application/json' },
            body: JSON.stringify({
              id: d.id,
              from: settings.sender,
              to: d.recipients,
              text: `${d.title}: ${d.body}`,
            }),
            signal,
          })
          if (res.ok) return { ok: true }
          return {
            ok: false,
            retryable: res.status >= 500 || res.status === 429,
            error: `gateway answered ${res.status}`,
          }
        } catch (e) {
          return { ok: false, retryable: true, error: outboundFailure(e) }
        }
      },
    }
  },
})
