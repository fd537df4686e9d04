import { createDecipheriv, createHash } from 'node:crypto'
import { HttpError, Invalid, ServiceUnavailable, Unauthorized, invalidField } from '../../core/http'
import type { AlertStore } from './alerts'

class NotImplemented extends HttpError {
  constructor(message: string) {
    super(501, 'not_implemented', message)
  }
}

/**
 * Decrypts a Lark/Feishu card callback `{"encrypt": base64}`: AES-256-CBC with key =
 * SHA-256(encrypt key) and IV = the first 16 bytes of the decoded blob, PKCS#7 padding.
 */
export function decrypt(encrypted: string, encryptKey: string): unknown {
  const blob = Buffer.from(encrypted, 'base64')
  if (blob.length < 32 || blob.length % 16 !== 0)
    throw invalidField('body.encrypt', 'not an AES-256-CBC payload')
  const key = createHash('sha256').update(encryptKey).digest()
  let text: string
  try {
    const d = createDecipheriv('aes-256-cbc', key, blob.subarray(0, 16))
    text = Buffer.concat([d.update(blob.subarray(16)), d.final()]).toString('utf8')
  } catch {
    throw invalidField('body.encrypt', 'cannot be decrypted with the configured key')
  }
  try {
    return JSON.parse(text)
  } catch {
    throw invalidField('body.encrypt', 'decrypts to something that is not JSON')
  }
}

type Obj = Record<string, unknown>
const obj = (v: unknown): Obj | undefined =>
  v && typeof v === 'object' && !Array.isArray(v) ? (v as Obj) : undefined
const str = (v: unknown): string | undefined => (typeof v === 'string' ? v : undefined)

/**
 * The card callback: url_verification echoes the challenge; a confirm action (a button whose
 * value carries `alert_id`, with `action` absent or `confirm`/`ack`) acknowledges the alert in
 * the same store as POST /alerts/{id}/ack, as the operator's open_id. Both the 1.0 shape
 * (`open_id`, `action` at the top) and the 2.0 shape (`event.operator`, `event.action`) are read.
 */
export function chatcard(opts: {
  encryptKey: string
  verificationToken: string
  alerts: () => AlertStore | undefined
}) {
  return async (raw: unknown) => {
    let body = obj(raw)
    if (!body) throw invalidField('body', 'must be a JSON object')
    if (body.encrypt !== undefined) {
      if (typeof body.encrypt !== 'string') throw invalidField('body.encrypt', 'must be a string')
      if (!opts.encryptKey)
        throw new NotImplemented('encrypted callback but no card encryption key is configured')
      body = obj(decrypt(body.encrypt, opts.encryptKey))
      if (!body) throw invalidField('body.encrypt', 'decrypts to something that is not an object')
    } else if (opts.verificationToken) {
      const token = str(body.token) ?? str(obj(body.header)?.token)
      if (token !== opts.verificationToken)
        throw new Unauthorized('callback verification token does not match')
    }
    if (body.type === 'url_verification') {
      const challenge = str(body.challenge)
      if (challenge === undefined) throw invalidField('body.challenge', 'required for url_verification')
      return { code: 0, message: 'ok', data: { challenge } }
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
    const operator = obj(event.operator)
    const by =
      str(event.open_id) ?? str(operator?.open_id) ?? str(event.user_id) ?? str(operator?.user_id) ?? ''
    const rec = await store.ack(String(alertId), by, 'chatcard')
    return {
      code: 0,
      message: 'ok',
      data: { alert_id: rec.alert_id, acknowledged: true, acked_by: rec.acked_by },
    }
  }
}
