import { createHmac } from 'node:crypto'
import type { BusEvents } from '../../core/events'
import type { Logger } from '../../core/log'
import { type Outbound, answerPrefix, outboundFailure } from '../../core/outbound'
import type { ProviderRegistry } from '../../core/plugin'
import type { Settings } from './keys'

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

export type SendOutcome = { ok: true } | { ok: false; error: string }

const fail = (error: string): SendOutcome => ({ ok: false, error })

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
    if (r.status < 200 || r.status >= 300) return fail(`chat robot answered ${r.status}`)
    // The robot answers 200 with {errcode, errmsg}; errcode 0 is success. The code is what an
    // operator needs; the robot's own words are not repeated.
    const errcode = /"errcode"\s*:\s*(-?\d{1,9})/.exec(r.text)?.[1]
    if (errcode && errcode !== '0') return fail(`chat robot refused: errcode ${errcode}`)
    return { ok: true }
  } catch (e) {
    return fail(`chat robot: ${outboundFailure(e)}`)
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
    return r.status >= 200 && r.status < 300 ? { ok: true } : fail(`webhook answered ${r.status}`)
  } catch (e) {
    return fail(`webhook: ${outboundFailure(e)}`)
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
  if (!def) return fail('email: the smtp-provider plugin is not enabled')
  const recipients = to?.length
    ? to
    : s.emailTo
        .split(',')
        .map((x) => x.trim())
        .filter(Boolean)
  if (!s.smtpHost) return fail('email: notification.smtpHost is not set')
  if (!s.smtpFrom) return fail('email: notification.smtpFrom is not set')
  if (!recipients.length) return fail('email: no recipients (notification.emailTo is empty)')
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
      return r.ok ? { ok: true } : fail(r.error)
    } finally {
      await provider.close?.()
    }
  } catch (e) {
    return fail(`email: ${outboundFailure(e)}`)
  }
}

const LEVEL: Record<string, string> = { pending: 'info', approved: 'info', rejected: 'warning' }

/** The words of each routed event. */
export function describe<K extends keyof BusEvents>(event: K, e: BusEvents[K]): Omit<Note, 'id' | 'at'> {
  const payload = e as unknown as Record<string, unknown>
  switch (event) {
    case 'alert.fired': {
      const a = e as BusEvents['alert.fired']
      return { event, level: a.level, title: `[${a.level.toUpperCase()}] ${a.title}`, body: a.body, payload }
    }
    case 'certificate_expiring': {
      const c = e as BusEvents['certificate_expiring']
      return {
        event,
        level: 'warning',
        title: `Certificate ${c.domain}:${c.port} expires in ${c.days_left} days`,
        body: `The certificate of ${c.domain}:${c.port} is valid until ${c.valid_to}.`,
        payload,
      }
    }
    case 'certificate_expired': {
      const c = e as BusEvents['certificate_expired']
      return {
        event,
        level: 'critical',
        title: `Certificate ${c.domain}:${c.port} has expired`,
        body: `The certificate of ${c.domain}:${c.port} expired at ${c.valid_to}.`,
        payload,
      }
    }
    case 'function.invoked': {
      const f = e as BusEvents['function.invoked']
      const failed = f.invocations.filter((i) => i.outcome !== 'success')
      const fns = [...new Set(f.invocations.map((i) => i.function_id))].join(', ')
      return {
        event,
        level: failed.length ? 'error' : 'info',
        title: `${f.invocations.length} invocations of ${fns} on ${f.agent_id}${failed.length ? `, ${failed.length} failed` : ''}`,
        body: `Game ${f.game_id}, environment ${f.env}: ${f.invocations
          .slice(0, 10)
          .map(
            (i) =>
              `${i.function_id} ${i.outcome}${i.duration_ms !== undefined ? ` in ${i.duration_ms} ms` : ''}`,
          )
          .join('; ')}`,
        payload,
      }
    }
    default: {
      const a = e as BusEvents['approval']
      return {
        event,
        level: LEVEL[a.status] ?? 'info',
        title: `Approval ${a.status}: ${a.title}`,
        body: [
          a.requested_by && `Requested by ${a.requested_by}.`,
          a.decided_by && `Decided by ${a.decided_by}.`,
          a.comment,
        ]
          .filter(Boolean)
          .join(' '),
        payload,
      }
    }
  }
}
