import { isIP } from 'node:net'
import { Type as T } from '@sinclair/typebox'
import { Elysia } from 'elysia'
import type { Transporter } from 'nodemailer'
import type SMTPTransport from 'nodemailer/lib/smtp-transport'
import { NO_ANSWER, OutboundRefused } from '../../core/outbound'
import { type SendResult, definePlugin, defineProvider } from '../../core/plugin'
import { Destination, Secret } from '../../core/secrets'

/**
 * One mail address, nothing else: no display name, group, list or line break. nodemailer reads
 * `a@x.io, b@y.io` as two recipients and `v@x.io\r\nBcc: e@y.io` as a group named after the first,
 * so one recipient entry could become others (security audit).
 */
const ADDRESS = '^[^\\s@,;:<>()\\[\\]"\\\\]+@[^\\s@,;:<>()\\[\\]"\\\\]+$'
const isAddress = (a: string) => new RegExp(ADDRESS).test(a)

export const SmtpSettings = T.Object(
  {
    /**
     * Where and how the password goes: a masked password sent back is kept only while the host,
     * port, transport security, certificate check, user and mechanism stay as stored (a `config`
     * token could otherwise switch TLS off and have the stored password sent in clear).
     */
    host: Destination(T.String({ minLength: 1 })),
    port: Destination(T.Integer({ minimum: 1, maximum: 65535, default: 587 })),
    /** ssl (implicit TLS), starttls (upgrade required), none; default from the port: 465 ssl, 587 starttls, else none. */
    security: Destination(T.Optional(T.Union([T.Literal('ssl'), T.Literal('starttls'), T.Literal('none')]))),
    username: Destination(T.Optional(T.String())),
    password: Secret(T.Optional(T.String())),
    /** SASL mechanism for the username and password; absent: the best the server offers. */
    auth_method: Destination(T.Optional(T.Union([T.Literal('plain'), T.Literal('login')]))),
    from: T.String({ minLength: 3 }),
    /** Used when a delivery names no recipients. */
    to: T.Array(T.String({ pattern: ADDRESS, description: 'one address each' }), { default: [] }),
    timeout_ms: T.Integer({ minimum: 100, default: 30_000 }),
    /** Accept self-signed server certificates (test relays only). */
    insecure_skip_verify: Destination(T.Boolean({ default: false })),
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

/**
 * `transportOptions` connecting to `address`, the outbound policy's checked address of the host,
 * while TLS still checks the certificate against the host's name.
 */
function pinnedOptions(s: Settings, address: string): SMTPTransport.Options {
  const o = transportOptions(s)
  return isIP(s.host)
    ? { ...o, host: address }
    : ({ ...o, host: address, servername: s.host } as SMTPTransport.Options)
}

const ESC: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' }
export const escapeHtml = (s: string) => s.replace(/[&<>"']/g, (c) => ESC[c])

/**
 * SMTP replies 4xx are temporary (retry), 5xx permanent; connection trouble is temporary. The
 * text is one short line: the reply code, never the server's words, and one text for every
 * connection failure (issue 34 point 5); a host the outbound policy refuses fails for good.
 */
function failure(e: unknown): SendResult & { ok: false } {
  if (e instanceof OutboundRefused) return { ok: false, retryable: false, error: `smtp: ${e.message}` }
  const err = e as { responseCode?: number }
  if (typeof err.responseCode === 'number')
    return {
      ok: false,
      retryable: err.responseCode < 500,
      error: `smtp: server answered ${err.responseCode}`,
    }
  return { ok: false, retryable: true, error: `smtp: ${NO_ANSWER}` }
}

export const smtpProvider = defineProvider({
  type: 'smtp',
  config: SmtpSettings,
  create(s, { outbound }) {
    // nodemailer and the Node modules it loads (~15 ms of the binary's start) are evaluated when
    // the first SMTP channel sends or verifies, not at start. The host is resolved and checked on
    // every use; the transport is kept while it resolves to the same address.
    let transport: { address: string; made: Promise<Transporter> } | undefined
    const open = async () => {
      const address = await outbound.address(s.host)
      if (transport?.address !== address) {
        const old = transport
        transport = {
          address,
          made: import('nodemailer').then((m) => m.default.createTransport(pinnedOptions(s, address))),
        }
        if (old) void old.made.then((t) => t.close()).catch(() => undefined)
      }
      return transport.made
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
        // Not echoed: the entry is the caller's text (it may hold line breaks).
        const bad = to.findIndex((a) => !isAddress(a))
        if (bad >= 0)
          return { ok: false, retryable: false, error: `smtp: recipient ${bad + 1} is not one mail address` }
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
      // A host the outbound policy refuses is refused when configured, with `verify: false` too
      // (it was stored and failed only at the first send); `verify` decides the connection test.
      async verify() {
        await outbound.refuseEarly(s.host)
        if (!s.verify) return
        try {
          await (await open()).verify()
        } catch (e) {
          throw new Error(failure(e).error)
        }
      },
      async close() {
        if (transport) (await transport.made).close()
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
