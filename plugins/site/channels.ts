import { createHmac } from 'node:crypto'
import type { Logger } from '../../core/log'
import { type Outbound, OutboundRefused, answerPrefix, outboundFailure } from '../../core/outbound'
import type { ProviderRegistry } from '../../core/plugin'
import { MAX_MAIL_RECIPIENTS, type Settings } from './keys'

/** One notification, whatever channel carries it. */
export interface Note {
  /** Stable per notification: the same on every channel, for receivers that drop repeats. */
  id: string
  event: string
  level: string
  title: string
  body: string
  at: string
  payload: Record<string, unknown>
}

/** `retryable`: whether sending again may help (a receiver that failed, not one that refused). */
export type SendOutcome = { ok: true } | { ok: false; retryable: boolean; error: string }

const fail = (error: string, retryable = true): SendOutcome => ({ ok: false, retryable, error })
/** 5xx, 408 and 429 may pass on a retry; another 4xx will not. */
const retryableStatus = (status: number) => status >= 500 || status === 408 || status === 429
/** A send that threw: one short line; the policy's refusal is final, no answer may pass later. */
const thrown = (what: string, e: unknown): SendOutcome =>
  fail(`${what}: ${outboundFailure(e)}`, !(e instanceof OutboundRefused))

/**
 * One POST through the outbound policy. Only a short prefix of the answer is read, and a failure
 * reads the same whether the port was closed, silent or reset (issue 34 point 5).
 */
async function post(
  outbound: Outbound,
  url: string,
  body: string,
  headers: Record<string, string>,
  timeoutMs: number,
) {
  const res = await outbound.fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body,
    signal: AbortSignal.timeout(timeoutMs),
  })
  return { status: res.status, text: await answerPrefix(res, 500) }
}

/**
 * Chat robot (DingTalk style, as the notes say): string to sign = timestamp + "\n" + secret,
 * HMAC-SHA256 keyed by the secret, base64, URL-encoded, sent as `&timestamp=..&sign=..`.
 */
export function chatbotUrl(url: string, secret: string, now = Date.now()): string {
  if (!secret) return url
  const sign = createHmac('sha256', secret).update(`${now}\n${secret}`).digest('base64')
  return `${url}${url.includes('?') ? '&' : '?'}timestamp=${now}&sign=${encodeURIComponent(sign)}`
}

export async function sendChatbot(
  outbound: Outbound,
  url: string,
  secret: string,
  n: Note,
  timeoutMs: number,
): Promise<SendOutcome> {
  const body = JSON.stringify({
    msgtype: 'markdown',
    markdown: { title: n.title, text: `### ${n.title}\n\n${n.body}` },
  })
  try {
    const r = await post(outbound, chatbotUrl(url, secret), body, {}, timeoutMs)
    if (r.status < 200 || r.status >= 300)
      return fail(`chat robot answered ${r.status}`, retryableStatus(r.status))
    // The robot answers 200 with {errcode, errmsg}; errcode 0 is success. The code is what an
    // operator needs; the robot's own words are not repeated.
    const errcode = /"errcode"\s*:\s*(-?\d{1,9})/.exec(r.text)?.[1]
    if (errcode && errcode !== '0') return fail(`chat robot refused: errcode ${errcode}`, false)
    return { ok: true }
  } catch (e) {
    return thrown('chat robot', e)
  }
}

/**
 * Custom webhook: a POST of the JSON event body. With a secret it is signed like Stripe's:
 * `X-Liveops-Signature: t=<unix ms>,v1=<hex HMAC-SHA256(secret, "<t>.<raw body>")>`.
 * `X-Liveops-Delivery` carries the notification id, so receivers can drop repeats.
 */
export function webhookHeaders(
  secret: string,
  raw: string,
  n: Note,
  now = Date.now(),
): Record<string, string> {
  const h: Record<string, string> = { 'x-liveops-event': n.event, 'x-liveops-delivery': n.id }
  if (secret)
    h['x-liveops-signature'] =
      `t=${now},v1=${createHmac('sha256', secret).update(`${now}.${raw}`).digest('hex')}`
  return h
}

export async function sendWebhook(
  outbound: Outbound,
  url: string,
  secret: string,
  n: Note,
  timeoutMs: number,
): Promise<SendOutcome> {
  const raw = JSON.stringify(n)
  try {
    const r = await post(outbound, url, raw, webhookHeaders(secret, raw, n), timeoutMs)
    return r.status >= 200 && r.status < 300
      ? { ok: true }
      : fail(`webhook answered ${r.status}`, retryableStatus(r.status))
  } catch (e) {
    return thrown('webhook', e)
  }
}

/** SMTP through the smtp provider's transport (its TLS modes and failures), with the site keys. */
export async function sendEmail(
  s: Settings,
  n: Note,
  env: { providers: ProviderRegistry; log: Logger; outbound: Outbound },
  to?: string[],
): Promise<SendOutcome> {
  const { providers, log, outbound } = env
  const def = providers.get('smtp')
  if (!def) return fail('email: the smtp-provider plugin is not enabled', false)
  const recipients = to?.length
    ? to
    : s.emailTo
        .split(',')
        .map((x) => x.trim())
        .filter(Boolean)
  if (!s.smtpHost) return fail('email: notification.smtpHost is not set', false)
  if (!s.smtpFrom) return fail('email: notification.smtpFrom is not set', false)
  if (!recipients.length) return fail('email: no recipients (notification.emailTo is empty)', false)
  if (recipients.length > MAX_MAIL_RECIPIENTS)
    return fail(
      `email: ${recipients.length} recipients, more than one mail carries (${MAX_MAIL_RECIPIENTS})`,
      false,
    )
  try {
    const provider = await def.create(
      {
        host: s.smtpHost,
        port: Number(s.smtpPort),
        security: s.smtpEncryption,
        username: s.smtpUser || undefined,
        password: s.smtpPassword || undefined,
        auth_method: s.smtpAuthType,
        from: s.smtpFrom,
        to: recipients,
        timeout_ms: 15_000,
        insecure_skip_verify: s.smtpInsecureSkipVerify,
        verify: false,
      },
      { log, outbound },
    )
    try {
      const r = await provider.send({
        id: n.id,
        provider: 'site-email',
        level: n.level,
        targets: [],
        recipients,
        timestamp: n.at,
        title: n.title,
        body: n.body,
        raw: n.payload,
      })
      return r.ok ? { ok: true } : fail(r.error, r.retryable)
    } finally {
      await provider.close?.()
    }
  } catch (e) {
    return thrown('email', e)
  }
}
