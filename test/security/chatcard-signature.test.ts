import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { createHash, randomBytes } from 'node:crypto'
import { forEachEngine } from '../helpers'
import { larkEncrypt } from '../lark'
import { surfaceApp } from './surface-app'

/*
 * The card callback's encryption (AES-256-CBC) has no MAC: whoever captured one encrypted
 * callback could flip bits of its IV to rewrite the first block of what it decrypts to (the
 * operator's open_id, or the start of the body), and could send it again later with a new
 * X-Lark-Request-Timestamp and X-Lark-Request-Nonce, neither of which was covered by anything.
 * With an Encrypt Key, Lark signs its callbacks: X-Lark-Signature = hex SHA-256 of timestamp +
 * nonce + encrypt key + the raw body (a card request URL of the 1.0 protocol: hex SHA-1 of
 * timestamp + nonce + verification token + the raw body).
 */

const KEY = 'card-encrypt-key-5d90'
const TOKEN = 'vt-card-sig-71c2'

const encrypt = (body: unknown) => larkEncrypt(body, KEY)

/** A callback as Lark sends it: the raw body, its time and nonce, and their signature. */
function signed(
  body: unknown,
  o: { at?: number; nonce?: string; algorithm?: 'sha256' | 'sha1'; secret?: string } = {},
) {
  const raw = JSON.stringify(body)
  const timestamp = String(Math.floor((o.at ?? Date.now()) / 1000))
  const nonce = o.nonce ?? `n-${randomBytes(8).toString('hex')}`
  const signature = createHash(o.algorithm ?? 'sha256')
    .update(timestamp + nonce + (o.secret ?? KEY))
    .update(raw)
    .digest('hex')
  return {
    raw,
    headers: {
      'x-lark-request-timestamp': timestamp,
      'x-lark-request-nonce': nonce,
      'x-lark-signature': signature,
    } as Record<string, string>,
  }
}

/** A 1.0 confirm whose first AES block is `{"open_id":"ou_` + three letters (16 bytes). */
const confirm = (alert: string, who = 'amy') => ({
  open_id: `ou_${who}`,
  action: { value: { alert_id: alert, action: 'confirm' } },
})

/** Rewrites the first plaintext block of an encrypted body by XOR on its IV (CBC malleability). */
function rewriteFirstBlock(encrypted: string, from: string, to: string): string {
  const blob = Buffer.from(encrypted, 'base64')
  for (let i = 0; i < 16; i++) blob[i] ^= from.charCodeAt(i) ^ to.charCodeAt(i)
  return blob.toString('base64')
}

async function appWith(engine: Parameters<typeof surfaceApp>[0], chatcard: Record<string, unknown>) {
  const a = await surfaceApp(engine, {
    plugins: { notify: { channels: { pager: { type: 'log' } } }, rules: { chatcard } },
  })
  const admin = { 'x-admin-token': 'test-admin-token' }
  await a.req('POST', '/api/v1/rules', {
    headers: admin,
    body: { id: 'disk', match: 'type == "disk"', mode: 'active', route: [{ channels: ['pager'] }] },
  })
  const raise = (alert: string) =>
    a.req('POST', '/api/v1/notify', {
      headers: admin,
      body: { type: 'disk', level: 'error', title: `disk ${alert}`, params: { alert_id: alert } },
    })
  const ack = async (alert: string) =>
    (await a.req('GET', `/api/v1/alerts/${alert}`, { headers: admin })).body.data
  const send = (raw: string, headers: Record<string, string> = {}) =>
    a.req('POST', '/api/v1/callbacks/chatcard', {
      raw,
      headers: { 'content-type': 'application/json', ...headers },
    })
  return { a, raise, ack, send }
}

const UNPROVEN = { code: 401, message: 'the callback did not prove itself', data: null }

forEachEngine((engine) => {
  describe('with an encrypt key, X-Lark-Signature is verified over the raw body', () => {
    let t: Awaited<ReturnType<typeof appWith>>
    beforeAll(async () => {
      t = await appWith(engine, { encrypt_key: KEY })
    })
    afterAll(() => t.a.stop())

    test('a signed confirm acts; the same request again is a copy', async () => {
      await t.raise('sig-1')
      const cb = signed({ encrypt: encrypt(confirm('sig-1')) })
      const r = await t.send(cb.raw, cb.headers)
      expect(r.status).toBe(200)
      expect(r.body.data).toEqual({ alert_id: 'sig-1', acknowledged: true, acked_by: 'ou_amy' })
      expect((await t.send(cb.raw, cb.headers)).body.data).toEqual({ alert_id: 'sig-1', duplicate: true })
    })

    test('a captured callback rewritten (its IV, its time, its nonce) is 401 and acknowledges nothing', async () => {
      await t.raise('sig-2')
      const encrypted = encrypt(confirm('sig-2'))
      const cb = signed({ encrypt: encrypted })
      // The operator's open_id changed through the IV: it still decrypts, to another operator.
      const forged = JSON.stringify({
        encrypt: rewriteFirstBlock(encrypted, '{"open_id":"ou_a', '{"open_id":"ou_z'),
      })
      expect(await t.send(forged, cb.headers)).toMatchObject({ status: 401, body: UNPROVEN })
      // Sent again later under a new time and nonce.
      const later = {
        ...cb.headers,
        'x-lark-request-timestamp': String(Math.floor(Date.now() / 1000) + 1),
        'x-lark-request-nonce': 'n-fresh',
      }
      expect(await t.send(cb.raw, later)).toMatchObject({ status: 401, body: UNPROVEN })
      // The same bytes re-encoded (whitespace) are another body.
      expect((await t.send(` ${cb.raw}`, cb.headers)).status).toBe(401)
      expect((await t.ack('sig-2')).acknowledged).toBe(false)
    })

    test('a wrong or empty signature, or one made with another key, is 401', async () => {
      await t.raise('sig-3')
      const body = { encrypt: encrypt(confirm('sig-3')) }
      const good = signed(body)
      for (const signature of [
        '',
        '00',
        'f'.repeat(64),
        signed(body, { secret: 'other-key' }).headers['x-lark-signature'],
      ])
        expect(
          await t.send(good.raw, { ...good.headers, 'x-lark-signature': signature }),
          signature,
        ).toMatchObject({ status: 401, body: UNPROVEN })
      expect((await t.ack('sig-3')).acknowledged).toBe(false)
      // Upper-case hex is the same signature.
      const upper = { ...good.headers, 'x-lark-signature': good.headers['x-lark-signature'].toUpperCase() }
      expect((await t.send(good.raw, upper)).body.data).toMatchObject({ acknowledged: true })
    })

    test('an acting callback without a signature is 401 (require_signature defaults to true)', async () => {
      await t.raise('sig-4')
      const { 'x-lark-signature': _, ...unsigned } = signed({}).headers
      const r = await t.send(JSON.stringify({ encrypt: encrypt(confirm('sig-4')) }), unsigned)
      expect(r).toMatchObject({ status: 401, body: UNPROVEN })
      const v2 = await t.send(
        JSON.stringify({
          encrypt: encrypt({
            schema: '2.0',
            header: { create_time: String(Date.now()), event_id: 'ev-sig-4' },
            event: { operator: { open_id: 'ou_bo' }, action: { value: { alert_id: 'sig-4' } } },
          }),
        }),
      )
      expect(v2).toMatchObject({ status: 401, body: UNPROVEN })
      expect((await t.ack('sig-4')).acknowledged).toBe(false)
      // Lark signs no url_verification: the challenge still needs the key, and acts on nothing.
      const challenge = await t.send(
        JSON.stringify({ encrypt: encrypt({ type: 'url_verification', challenge: 'c-4' }) }),
      )
      expect(challenge.body.data).toEqual({ challenge: 'c-4' })
    })

    test('the replay and freshness rules still hold for signed callbacks', async () => {
      await t.raise('sig-5')
      const stale = signed({ encrypt: encrypt(confirm('sig-5')) }, { at: Date.now() - 6 * 60_000 })
      const old = await t.send(stale.raw, stale.headers)
      expect(old.status).toBe(401)
      expect(old.body.message).toContain('X-Lark-Request-Timestamp is more than 5 minutes')
      const body = { encrypt: encrypt(confirm('sig-5')) }
      const first = signed(body, { nonce: 'n-sig-5' })
      expect((await t.send(first.raw, first.headers)).body.data).toMatchObject({ acknowledged: true })
      // Signed anew by whoever holds the key, but the same nonce: a copy.
      const again = signed(body, { nonce: 'n-sig-5' })
      expect((await t.send(again.raw, again.headers)).body.data).toEqual({
        alert_id: 'sig-5',
        duplicate: true,
      })
    })
  })

  test('with a verification token too, a 1.0 card request URL signature (SHA-1, token) is taken', async () => {
    const t = await appWith(engine, { encrypt_key: KEY, verification_token: TOKEN })
    try {
      await t.raise('sig-6')
      const body = { encrypt: encrypt({ ...confirm('sig-6'), token: TOKEN }) }
      const wrongKey = signed(body, { algorithm: 'sha1', secret: KEY })
      expect(await t.send(wrongKey.raw, wrongKey.headers)).toMatchObject({ status: 401, body: UNPROVEN })
      const ok = signed(body, { algorithm: 'sha1', secret: TOKEN })
      expect((await t.send(ok.raw, ok.headers)).body.data).toMatchObject({ acknowledged: true })
    } finally {
      await t.a.stop()
    }
  })

  test('require_signature: false takes an unsigned callback, never a wrongly signed one', async () => {
    const t = await appWith(engine, { encrypt_key: KEY, require_signature: false })
    try {
      await t.raise('sig-7')
      const body = { encrypt: encrypt(confirm('sig-7')) }
      const cb = signed(body)
      expect(await t.send(cb.raw, { ...cb.headers, 'x-lark-signature': 'f'.repeat(64) })).toMatchObject({
        status: 401,
        body: UNPROVEN,
      })
      const { 'x-lark-signature': _, ...unsigned } = cb.headers
      expect((await t.send(cb.raw, unsigned)).body.data).toMatchObject({ acknowledged: true })
    } finally {
      await t.a.stop()
    }
  })
})
