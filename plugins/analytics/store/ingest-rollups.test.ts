import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { type TestApp, forEachEngine } from '../../../test/helpers'
import { ingestApp, signed } from '../../ingest/testing'

// Rollups kept at ingest and the server-side writes (moved from ingest's tests, issue 16).
forEachEngine((engine) => {
  let a: TestApp
  let admin: string
  let gameId: string
  const ev = (event: string, extra: Record<string, unknown> = {}) => ({
    event,
    ts: String(Date.now()),
    game_id: gameId,
    env: 'prod',
    ...extra,
  })

  beforeAll(async () => {
    ;({ a, admin, gameId } = await ingestApp(engine))
  })
  afterAll(() => a.stop())

  describe('online sketches', () => {
    test('repeat visitors who change no register leave the stored sketch alone; new ones update it', async () => {
      // A minute of its own, an hour back, so no other test's heartbeats land in it.
      const minute = Math.floor((Date.now() - 3_600_000) / 60_000) * 60_000
      const beat = (user: string) => ({
        ...ev('heartbeat', { uid: user }),
        env: 'dev',
        ts: String(minute + 1),
      })
      const users = Array.from({ length: 3000 }, (_, i) => `visitor-${i}`)
      const row = async () =>
        (await a.events.drain()) ??
        (await a.db.get<{ online: number; version: number }>(
          'SELECT online, version FROM analytics_online WHERE game_id = ? AND env = ? AND minute = ?',
          [gameId, 'dev', minute],
        ))!
      expect((await signed(a, '/api/ingest/events', users.map(beat))).status).toBe(200)
      const first = await row()
      expect(Math.abs(first.online - 3000) / 3000).toBeLessThan(0.05)
      // The same visitors again: every register already holds their rank.
      expect((await signed(a, '/api/ingest/events', users.slice(0, 500).map(beat))).status).toBe(200)
      expect(await row()).toEqual(first)
      const more = Array.from({ length: 2000 }, (_, i) => `visitor-new-${i}`)
      expect((await signed(a, '/api/ingest/events', more.map(beat))).status).toBe(200)
      const after = await row()
      expect(after.version).toBeGreaterThan(first.version)
      expect(Math.abs(after.online - 5000) / 5000).toBeLessThan(0.05)
    })
  })

  describe('server-side writes', () => {
    test('analytics:write writes events and payments; viewer 403; no token 401; bad events 400', async () => {
      const ok = await a.req('POST', '/api/v1/analytics/ingest', { token: admin, body: [ev('server_evt')] })
      expect(ok.status).toBe(200)
      expect(ok.body).toEqual({ ok: true, accepted: 1 })
      const pay = await a.req('POST', '/api/v1/analytics/payments/ingest', {
        token: admin,
        body: [ev('payment', { order_id: 'srv-1', status: 'success', amount_cents: 1 })],
      })
      expect(pay.status).toBe(200)
      const viewer = await a.req('POST', '/api/v1/analytics/ingest', {
        token: await a.token('viewer'),
        body: [ev('x')],
      })
      expect(viewer.status).toBe(403)
      const anon = await a.req('POST', '/api/v1/analytics/ingest', { body: [ev('x')] })
      expect(anon.status).toBe(401)
      const bad = await a.req('POST', '/api/v1/analytics/ingest', { token: admin, body: [{ event: 'x' }] })
      expect(bad.status).toBe(400)
      expect(bad.body).toMatchObject({ error: 'invalid_events', details: { errors: expect.any(Array) } })
      expect(Object.keys(bad.body).sort()).toEqual(['details', 'error', 'message'])
    })
  })
})
