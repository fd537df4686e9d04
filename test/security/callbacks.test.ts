import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { randomBytes } from 'node:crypto'
import { type TestApp, chunkedBody, forEachEngine, until } from '../helpers'
import { larkEncrypt, larkSigned } from '../lark'
import { surfaceApp } from './surface-app'

/*
 * Issue 34 point 4: the chat-card callback takes no Bearer token, so the chat platform proves
 * itself. Reported: an anonymous `{"action":{"value":{"alert_id":"disk-db1"}}}` acknowledged an
 * alert, even one not yet raised, which then never escalated.
 */

const TOKEN = 'vt-card-3c1f9'
const KEY = 'card-encrypt-key-77a2'
const ATTACK = { action: { value: { alert_id: 'disk-db1' } } }

const encrypt = (body: unknown, key = KEY) => larkEncrypt(body, key)

const callback = (a: TestApp, body: unknown, headers: Record<string, string> = {}) =>
  a.req('POST', '/api/v1/callbacks/chatcard', { body, headers: larkSigned(KEY, body, headers) })

/** The headers Lark sends with a card callback: the time in seconds and a nonce. */
const larkHeaders = (at = Date.now()) => ({
  'x-lark-request-timestamp': String(Math.floor(at / 1000)),
  'x-lark-request-nonce': `n-${randomBytes(8).toString('hex')}`,
})

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
        header: { token: TOKEN, create_time: String(Date.now()), event_id: 'ev-db2' },
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
      const ok = await callback(
        a,
        { encrypt: encrypt({ ...ATTACK, action: { value: { alert_id: 'disk-db3' } } }) },
        larkHeaders(),
      )
      expect(ok.status).toBe(200)
      expect(await acked('disk-db3')).toBe(true)
    } finally {
      await a.stop()
    }
  })

  describe('a captured confirm sent again (the rules audit: replay.sh)', () => {
    let t: Awaited<ReturnType<typeof appWith>>
    beforeAll(async () => {
      t = await appWith(engine, { verification_token: TOKEN, encrypt_key: KEY })
    })
    afterAll(() => t.a.stop())
    const incidents = async (alert: string) =>
      (await t.a.req('GET', `/api/v1/incidents?alert_id=${alert}`, { headers: t.admin })).body.data
        .incidents as Array<{ acked_at?: string; resolved_at?: string }>
    const resolve = (alert: string) =>
      t.a.req('POST', '/api/v1/notify', {
        headers: t.admin,
        body: { type: 'disk', level: 'error', title: 'ok', params: { alert_id: alert, status: 'resolved' } },
      })
    const confirm = (alert: string) => ({
      token: TOKEN,
      open_id: 'ou_alice',
      action: { value: { alert_id: alert, action: 'confirm' } },
    })

    test("the same request again acknowledges nothing: the alert's next occurrence stays open", async () => {
      await t.raise('disk-rp1')
      const captured = { body: confirm('disk-rp1'), headers: larkHeaders() }
      const first = await callback(t.a, captured.body, captured.headers)
      expect(first.body.data).toMatchObject({ acknowledged: true, acked_by: 'ou_alice' })
      await resolve('disk-rp1')
      await t.raise('disk-rp1')
      expect((await incidents('disk-rp1')).filter((i) => !i.resolved_at && !i.acked_at)).toHaveLength(1)
      const again = await callback(t.a, captured.body, captured.headers)
      expect(again.status).toBe(200)
      expect(again.body).toEqual({
        code: 0,
        message: 'already handled',
        data: { alert_id: 'disk-rp1', duplicate: true },
      })
      expect((await incidents('disk-rp1')).filter((i) => !i.resolved_at && !i.acked_at)).toHaveLength(1)
      expect(await t.acked('disk-rp1')).toBe(false)
    })

    test('a callback more than 5 minutes old, or a confirm with no time, is 401 naming why', async () => {
      await t.raise('disk-rp2')
      const old = await callback(t.a, confirm('disk-rp2'), larkHeaders(Date.now() - 6 * 60_000))
      expect(old.status).toBe(401)
      expect(old.body.message).toContain('X-Lark-Request-Timestamp is more than 5 minutes')
      const sealed = await callback(t.a, {
        encrypt: encrypt({
          schema: '2.0',
          header: { token: TOKEN, create_time: String(Date.now() - 3 * 86_400_000), event_id: 'ev-rp2' },
          event: { operator: { open_id: 'ou_bob' }, action: { value: { alert_id: 'disk-rp2' } } },
        }),
      })
      expect(sealed.status).toBe(401)
      expect(sealed.body.message).toContain('body.header.create_time is more than 5 minutes')
      const untimed = await callback(t.a, confirm('disk-rp2'))
      expect(untimed.status).toBe(401)
      expect(untimed.body.message).toContain('X-Lark-Request-Timestamp')
      const garbled = await callback(t.a, confirm('disk-rp2'), { 'x-lark-request-timestamp': 'soon' })
      expect(garbled.status).toBe(400)
      expect(garbled.body.message).toContain('X-Lark-Request-Timestamp')
      expect(await t.acked('disk-rp2')).toBe(false)
      // The URL check acts on nothing and needs no time.
      const challenge = await callback(t.a, { token: TOKEN, type: 'url_verification', challenge: 'c-rp' })
      expect(challenge.body.data).toEqual({ challenge: 'c-rp' })
    })

    test('an encrypted 2.0 confirm is taken once by its event id; a fresh one acts', async () => {
      await t.raise('disk-rp3')
      const body = (event_id: string) => ({
        encrypt: encrypt({
          schema: '2.0',
          header: { token: TOKEN, create_time: String(Date.now()), event_id },
          event: { operator: { open_id: 'ou_cy' }, action: { value: { alert_id: 'disk-rp3' } } },
        }),
      })
      const captured = body('ev-rp3')
      expect((await callback(t.a, captured)).body.data).toMatchObject({ acknowledged: true })
      await resolve('disk-rp3')
      await t.raise('disk-rp3')
      // Encrypted again with another IV: the same event, so still a copy.
      for (const copy of [captured, body('ev-rp3')])
        expect((await callback(t.a, copy)).body.data).toEqual({ alert_id: 'disk-rp3', duplicate: true })
      expect(await t.acked('disk-rp3')).toBe(false)
      expect((await callback(t.a, body('ev-rp3-next'))).body.data).toMatchObject({ acknowledged: true })
      expect(await t.acked('disk-rp3')).toBe(true)
    })
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
