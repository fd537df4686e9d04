import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { createCipheriv, createHash, randomBytes } from 'node:crypto'
import { type TestApp, chunkedBody, forEachEngine, until } from '../helpers'
import { surfaceApp } from './surface-app'

/*
 * Issue 34 point 4: the chat-card callback takes no Bearer token, so the chat platform proves
 * itself. Reported: an anonymous `{"action":{"value":{"alert_id":"disk-db1"}}}` acknowledged an
 * alert, even one not yet raised, which then never escalated.
 */

const TOKEN = 'vt-card-3c1f9'
const KEY = 'card-encrypt-key-77a2'
const ATTACK = { action: { value: { alert_id: 'disk-db1' } } }

/** A callback body as Lark encrypts it: AES-256-CBC, key SHA-256(encrypt key), random IV first. */
function encrypt(body: unknown, key = KEY): string {
  const iv = randomBytes(16)
  const c = createCipheriv('aes-256-cbc', createHash('sha256').update(key).digest(), iv)
  return Buffer.concat([iv, c.update(JSON.stringify(body), 'utf8'), c.final()]).toString('base64')
}

const callback = (a: TestApp, body: unknown) => a.req('POST', '/api/v1/callbacks/chatcard', { body })

/** An app whose rule opens an incident for every `disk` notification with params.alert_id. */
async function appWith(engine: Parameters<typeof surfaceApp>[0], chatcard: Record<string, string>) {
  const a = await surfaceApp(engine, {
    plugins: { notify: { channels: { pager: { type: 'log' } } }, rules: { chatcard } },
  })
  const admin = { 'x-admin-token': 'test-admin-token' }
  await a.req('POST', '/api/v1/rules', {
    headers: admin,
    body: {
      id: 'disk',
      match: 'type == "disk"',
      mode: 'active',
      route: [{ channels: ['pager'] }],
      escalation: { ack_timeout: '1h', to: ['pager'] },
    },
  })
  const raise = (alert: string) =>
    a.req('POST', '/api/v1/notify', {
      headers: admin,
      body: { type: 'disk', level: 'error', title: `disk ${alert}`, params: { alert_id: alert } },
    })
  const acked = async (alert: string) =>
    (await a.req('GET', `/api/v1/alerts/${alert}`, { headers: admin })).body.data.acknowledged as boolean
  return { a, raise, acked, admin }
}

forEachEngine((engine) => {
  test('not configured: 501 for every callback, and nothing changes', async () => {
    const { a, raise, acked } = await appWith(engine, {})
    try {
      await raise('disk-db1')
      for (const body of [
        ATTACK,
        { type: 'url_verification', challenge: 'c' },
        { encrypt: encrypt(ATTACK) },
      ]) {
        const r = await callback(a, body)
        expect(r.status).toBe(501)
        expect(r.body.code).toBe(501)
      }
      expect(await acked('disk-db1')).toBe(false)
    } finally {
      await a.stop()
    }
  })

  describe('with a verification token', () => {
    let t: Awaited<ReturnType<typeof appWith>>
    beforeAll(async () => {
      t = await appWith(engine, { verification_token: TOKEN })
    })
    afterAll(() => t.a.stop())

    test('a callback without the token, or with another, is 401 and acknowledges nothing', async () => {
      await t.raise('disk-db1')
      for (const body of [
        ATTACK,
        { ...ATTACK, token: 'guess' },
        { header: { token: `${TOKEN}x` }, event: ATTACK },
        { encrypt: encrypt(ATTACK) },
        'disk-db1',
      ]) {
        const r = await callback(t.a, body)
        expect(r.status, JSON.stringify(body)).toBeOneOf([401, 501])
      }
      expect((await callback(t.a, ATTACK)).body).toEqual({
        code: 401,
        message: 'the callback did not prove itself',
        data: null,
      })
      expect(await t.acked('disk-db1')).toBe(false)
    })

    test('with the token: an alert never raised is 404 and stays unacknowledged', async () => {
      const r = await callback(t.a, {
        ...ATTACK,
        token: TOKEN,
        action: { value: { alert_id: 'not-raised' } },
      })
      expect(r.status).toBe(404)
      expect(await t.acked('not-raised')).toBe(false)
    })

    test('with the token, an alert that exists is acknowledged, and the audit log names the operator', async () => {
      await t.raise('disk-db2')
      const r = await callback(t.a, {
        schema: '2.0',
        header: { token: TOKEN },
        event: { operator: { open_id: 'ou_mia' }, action: { value: { alert_id: 'disk-db2' } } },
      })
      expect(r.status).toBe(200)
      expect(r.body.data).toEqual({ alert_id: 'disk-db2', acknowledged: true, acked_by: 'ou_mia' })
      const entry = await until(async () => {
        const list = await t.a.req('GET', '/api/v1/audit?action=alert.ack', { headers: t.admin })
        return list.body.data.items.find((e: { target: string }) => e.target === 'alert:disk-db2')
      })
      expect(entry).toMatchObject({
        actor: { kind: 'chatcard', name: 'ou_mia' },
        details: { source: 'chatcard' },
      })
    })
  })

  test('with an encrypt key: it must decrypt; plaintext and another key are 401', async () => {
    const { a, raise, acked } = await appWith(engine, { encrypt_key: KEY })
    try {
      await raise('disk-db3')
      for (const body of [
        ATTACK,
        { encrypt: encrypt(ATTACK, 'another-key') },
        { encrypt: 'bm90IGEgY2lwaGVy' },
        { encrypt: 7 },
      ])
        expect((await callback(a, body)).status, JSON.stringify(body)).toBe(401)
      expect(await acked('disk-db3')).toBe(false)
      const ok = await callback(a, {
        encrypt: encrypt({ ...ATTACK, action: { value: { alert_id: 'disk-db3' } } }),
      })
      expect(ok.status).toBe(200)
      expect(await acked('disk-db3')).toBe(true)
    } finally {
      await a.stop()
    }
  })

  test('the anonymous route takes 64 KB: larger bodies are refused before they are read', async () => {
    const { a } = await appWith(engine, { verification_token: TOKEN })
    try {
      const base = a.listen()
      const big = JSON.stringify({ token: TOKEN, pad: 'x'.repeat(200 * 1024) })
      const declared = await fetch(`${base}/api/v1/callbacks/chatcard`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: big,
      })
      expect(declared.status).toBe(413)
      const chunked = await fetch(`${base}/api/v1/callbacks/chatcard`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: chunkedBody(big, 16 * 1024),
      })
      expect(chunked.status).toBe(413)
      expect((await chunked.json()).data).toEqual({ limit: 64 * 1024 })
      // A body within the limit is taken.
      const small = await fetch(`${base}/api/v1/callbacks/chatcard`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ token: TOKEN, type: 'url_verification', challenge: 'c-9' }),
      })
      expect(await small.json()).toEqual({ code: 0, message: 'ok', data: { challenge: 'c-9' } })
    } finally {
      await a.stop()
    }
  })
})
