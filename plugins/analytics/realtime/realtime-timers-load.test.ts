import { describe, expect, test } from 'bun:test'
import { forEachEngine, until } from '../../../test/helpers'
import { signed } from '../../ingest/testing'
import { realtimeApp, realtimeSuite } from './realtime-fixture'
import { SseReader, rawStream } from './realtime-testing'

// The hub on apps of their own (realtime-fixture.ts): 1,000 streams at once, and its own timers.
forEachEngine((engine) => {
  describe('1,000 streams at once', () => {
    const fx = realtimeSuite(engine, { max_clients: 2000, max_clients_per_principal: 2000 })

    test('every one of 1,000 clients receives a snapshot and the server still answers', async () => {
      const base = fx.a.listen()
      const socks = Array.from({ length: 1000 }, () =>
        rawStream(base, `/api/v1/analytics/realtime?gameId=${fx.gameId}&env=prod`, {
          authorization: `Bearer ${fx.admin}`,
        }),
      )
      try {
        await until(() => socks.every((s) => s.state.status === 200), {
          what: 'every stream answered 200',
          ms: 60_000,
        })
        await until(() => fx.hub.clients() === 1000, { what: '1,000 subscribers', ms: 60_000 })
        await fx.hub.tick()
        await until(() => socks.every((s) => s.state.snapshots >= 1), {
          what: 'a snapshot on every stream',
          ms: 60_000,
        })
        expect(socks.filter((s) => s.state.error || s.state.closed)).toHaveLength(0)
        const health = await fetch(`${base}/healthz`)
        expect(health.status).toBe(200)
        const ingest = await signed(fx.a, '/api/ingest/events', [
          { event: 'heartbeat', ts: String(Date.now()), game_id: fx.gameId, env: 'prod', uid: 'u1' },
        ])
        expect(ingest.status).toBe(200)
      } finally {
        for (const s of socks) s.close()
      }
      await until(() => fx.hub.clients() === 0, { what: 'every subscriber gone', ms: 60_000 })
    })
  })

  test('on its own timers a stream gets a snapshot every interval_ms and pings between', async () => {
    const { a, admin, gameId, hub } = await realtimeApp(engine, { interval_ms: 200, heartbeat_ms: 50 }, false)
    try {
      const res = await a.app.handle(
        new Request(`http://localhost/api/v1/analytics/realtime?gameId=${gameId}&env=prod`, {
          headers: { authorization: `Bearer ${admin}` },
        }),
      )
      const r = new SseReader(res.body!)
      const first = await r.snapshot()
      await r.next((f) => f.comments.includes('ping'))
      const second = await r.snapshot()
      expect(Number(second.id)).toBeGreaterThan(Number(first.id))
      await r.cancel()
      expect(hub.clients()).toBe(0)
    } finally {
      await a.stop()
    }
  })
})
