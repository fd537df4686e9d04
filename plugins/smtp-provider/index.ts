import { Type as T } from '@sinclair/typebox'
import { Elysia } from 'elysia'
import type { Transporter } from 'nodemailer'
import type SMTPTransport from 'nodemailer/lib/smtp-transport'
import { type SendResult, definePlugin, defineProvider } from '../../core/plugin'
import { Secret } from '../../core/secrets'

export const SmtpSettings = T.Object(
  {
    host: T.String({ minLength: 1 }),
    port: T.Integer({ minimum: 1, maximum: 65535, default: 587 }),
    /** ssl (implicit TLS), starttls (upgrade required), none; default from the port: 465 ssl, 587 starttls, else none. */
    security: T.Optional(T.Union([T.Literal('ssl'), T.Literal('starttls'), T.Literal('none')])),
    username: T.Optional(T.String()),
    password: Secret(T.Optional(T.String())),
    /** SASL mechanism for the username and password; absent: the best the server offers. */
    auth_method: T.Optional(T.Union([T.Literal('plain'), T.Literal('login')])),
    from: T.String({ minLength: 3 }),
    /** Used when a delivery names no recipients. */
    to: T.Array(T.String(), { default: [] }),
    timeout_ms: T.Integer({ minimum: 100, default: 30_000 }),
    /** Accept self-signed server certificates (test relays only). */
    insecure_skip_verify: T.Boolean({ default: false }),
    /** Connect and greet the server before a runtime swap. */
    verify: T.Boolean({ default: true }),
  },
  { additionalProperties: false },
)
type Settings = typeof SmtpSettings.static

export function securityOf(s: Pick<Settings, 'port' | 'security'>): 'ssl' | 'starttls' | 'none' {
  return s.security ?? (s.port === 465 ? 'ssl' : s.port === 587 ? 'starttls' : 'none')
}

/** nodemailer transport options: implicit TLS on 465, required STARTTLS on 587. */
export function transportOptions(s: Settings): SMTPTransport.Options {
  const mode = securityOf(s)
  return {
    host: s.host,
    port: s.port,
    secure: mode === 'ssl',
    requireTLS: mode === 'starttls',
    ignoreTLS: mode === 'none',
    auth: s.username ? { user: s.username, pass: s.password ?? '' } : undefined,
    authMethod: s.auth_method?.toUpperCase(),
    connectionTimeout: s.timeout_ms,
    greetingTimeout: s.timeout_ms,
    socketTimeout: s.timeout_ms,
    tls: { rejectUnauthorized: !s.insecure_skip_verify },
  }
}

const ESC: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' }
export const escapeHtml = (s: string) => s.replace(/[&<>"']/g, (c) => ESC[c])

/** SMTP replies 4xx are temporary (retry), 5xx permanent; connection trouble is temporary. */
function failure(e: unknown): SendResult {
  const err = e as { responseCode?: number; code?: string; message?: string }
  const message = err.message ?? String(e)
  if (typeof err.responseCode === 'number')
    return { ok: false, retryable: err.responseCode < 500, error: `smtp: ${message}` }
  return { ok: false, retryable: true, error: `smtp: ${message}` }
}

export const smtpProvider = defineProvider({
  type: 'smtp',
  config: SmtpSettings,
  create(s) {
    // nodemailer and the Node modules it loads (~15 ms of the binary's start) are evaluated when
    // the first SMTP channel sends or verifies, not at start.
    let transport: Promise<Transporter> | undefined
    const open = () => {
      transport ??= import('nodemailer').then((m) => m.default.createTransport(transportOptions(s)))
      return transport
    }
    return {
      async send(d) {
        const to = d.recipients.length ? d.recipients : s.to
        if (!to.length)
          return {
            ok: false,
            retryable: false,
            error: 'smtp: no recipients (none in the request, none configured in to)',
          }
        try {
          await (await open()).sendMail({
            from: s.from,
            to,
            subject: d.title,
            text: d.body,
            html: `<p>${escapeHtml(d.body).replace(/\r?\n/g, '<br>')}</p>`,
            headers: { 'X-Liveops-Delivery': d.id },
          })
          return { ok: true }
        } catch (e) {
          return failure(e)
        }
      },
      async verify() {
        if (s.verify) await (await open()).verify()
      },
      async close() {
        if (transport) (await transport).close()
      },
    }
  },
})

/** Registers the `smtp` provider type (nodemailer). */
export default definePlugin({
  name: 'smtp-provider',
  setup(ctx) {
    ctx.providers.register(smtpProvider)
    return new Elysia({ name: 'smtp-provider' })
  },
})
