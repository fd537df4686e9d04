import { createDecipheriv, createHash, timingSafeEqual } from 'node:crypto'
import { HttpError, Invalid, NotFound, ServiceUnavailable, Unauthorized, invalidField } from '../../core/http'
import { alertKey } from './alert-id'
import type { AlertStore } from './alerts'

class NotImplemented extends HttpError {
  constructor(message: string) {
    super(501, 'not_implemented', message)
  }
}

/** One answer to every caller that did not prove itself: a stranger learns nothing from it. */
const unproven = () => new Unauthorized('the callback did not prove itself', 'callback_unauthorized')

/**
 * Decrypts a Lark/Feishu card callback `{"encrypt": base64}`: AES-256-CBC with key =
 * SHA-256(encrypt key) and IV = the first 16 bytes of the decoded blob, PKCS#7 padding.
 * Undefined when it does not decrypt to a JSON object.
 */
export function decrypt(encrypted: string, encryptKey: string): Record<string, unknown> | undefined {
  const blob = Buffer.from(encrypted, 'base64')
  if (blob.length < 32 || blob.length % 16 !== 0) return undefined
  const key = createHash('sha256').update(encryptKey).digest()
  try {
    const d = createDecipheriv('aes-256-cbc', key, blob.subarray(0, 16))
    return obj(JSON.parse(Buffer.concat([d.update(blob.subarray(16)), d.final()]).toString('utf8')))
  } catch {
    return undefined
  }
}

type Obj = Record<string, unknown>
const obj = (v: unknown): Obj | undefined =>
  v && typeof v === 'object' && !Array.isArray(v) ? (v as Obj) : undefined
const str = (v: unknown): string | undefined => (typeof v === 'string' ? v : undefined)
const same = (a: string, b: string) => {
  const x = Buffer.from(a)
  const y = Buffer.from(b)
  return x.length === y.length && timingSafeEqual(x, y)
}

/** What a confirm action did: the audit entry names the operator and the alert. */
export interface CardAck {
  alert_id: string
  acked_by: string
}

/**
 * The card callback (spec 2: a chat platform's callback proves itself; issue 34 point 4).
 * Without an encrypt key or a verification token configured it answers 501 and changes nothing.
 * With them, the caller proves itself before anything is read: an encrypted body must decrypt
 * with the key, a plaintext one is taken only when a verification token is configured and it
 * carries it (`token`, or `header.token` in the 2.0 shape), and a decrypted one must carry it too
 * when one is configured; anything else is 401. Then url_verification echoes the challenge; a
 * confirm action (a button whose value carries `alert_id`, `action` absent or `confirm`/`ack`)
 * acknowledges an alert that exists (an incident or an escalation names it; 404 otherwise) in the
 * same store as POST /alerts/{id}/ack, as the operator's open_id.
 */
export function chatcard(opts: {
  encryptKey: string
  verificationToken: string
  alerts: () => AlertStore | undefined
}) {
  /** The answer, and the acknowledgement taken (for the audit entry). */
  return async (raw: unknown): Promise<{ answer: object; ack?: CardAck }> => {
    if (!opts.encryptKey && !opts.verificationToken)
      throw new NotImplemented(
        'the chat-card callback is not configured (plugins.rules.chatcard.encrypt_key or verification_token)',
      )
    let body = obj(raw)
    if (!body) throw unproven()
    if (body.encrypt !== undefined) {
      if (!opts.encryptKey)
        throw new NotImplemented('encrypted callback but no card encryption key is configured')
      body = typeof body.encrypt === 'string' ? decrypt(body.encrypt, opts.encryptKey) : undefined
      if (!body) throw unproven()
    } else if (!opts.verificationToken) throw unproven()
    if (opts.verificationToken) {
      const token = str(body.token) ?? str(obj(body.header)?.token)
      if (token === undefined || !same(token, opts.verificationToken)) throw unproven()
    }
    if (body.type === 'url_verification') {
      const challenge = str(body.challenge)
      if (challenge === undefined) throw invalidField('body.challenge', 'required for url_verification')
      return { answer: { code: 0, message: 'ok', data: { challenge } } }
    }
    const event = obj(body.event) ?? body
    const action = obj(event.action)
    const value = obj(action?.value)
    const alertId = value?.alert_id
    const kind = str(value?.action)
    if (
      !action ||
      !value ||
      (typeof alertId !== 'string' && typeof alertId !== 'number') ||
      String(alertId) === ''
    )
      throw invalidField(
        'body.action.value.alert_id',
        'a confirm action needs the alert id in the button value',
      )
    if (kind !== undefined && kind !== 'confirm' && kind !== 'ack')
      throw new Invalid(`body.action.value.action: unsupported action '${kind}'`, {
        field: 'body.action.value.action',
        reason: 'unsupported',
      })
    const store = opts.alerts()
    if (!store) throw new ServiceUnavailable('acknowledgement store is not configured')
    const id = alertKey(String(alertId))
    // An alert never raised cannot be acknowledged ahead of time: that would silence its escalation.
    if (!(await store.exists(id))) throw new NotFound(`alert '${id}' not found`)
    const operator = obj(event.operator)
    const by =
      str(event.open_id) ?? str(operator?.open_id) ?? str(event.user_id) ?? str(operator?.user_id) ?? ''
    const rec = await store.ack(id, by, 'chatcard')
    return {
      answer: {
        code: 0,
        message: 'ok',
        data: { alert_id: rec.alert_id, acknowledged: true, acked_by: rec.acked_by },
      },
      ack: { alert_id: rec.alert_id, acked_by: by },
    }
  }
}
