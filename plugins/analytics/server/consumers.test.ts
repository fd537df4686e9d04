import { afterAll, beforeAll, expect, test } from 'bun:test'
import { type TestApp, forEachEngine } from '../../../test/helpers'
import { ingestApp, signed } from '../../ingest/testing'

// The event log's consumers through the API (issue 35 points 4 and 5): lag and completeness for
// readers, a rebuild for admins that recomputes the results from the raw events.
forEachEngine((engine) => {
  let a: TestApp
  let admin: string
  let gameId: string
  beforeAll(async () => {
    ;({ a, admin, gameId } = await ingestApp(engine))
  })
  afterAll(() => a.stop())

  const send = (users: string[]) =>
    signed(
      a,
      '/api/ingest/events',
      users.map((uid) => ({
        event: 'session_start',
        ts: String(Date.now()),
        game_id: gameId,
        env: 'prod',
        uid,
      })),
    )
  const dau = async () => {
    const r = await a.req('GET', `/api/v1/analytics/warehouse/dau?gameId=${gameId}&env=prod&days=1`, {
      token: admin,
    })
    expect(r.status).toBe(200)
    // Every analytics answer says how complete it is.
    expect(Date.parse(r.headers.get('x-as-of') ?? '')).toBeGreaterThan(Date.now() - 60_000)
    return r.body.points.at(-1).dau as number
  }

  test('every consumer listed with its lag and completeness; any reader of analytics may look', async () => {
    expect((await send(['c1', 'c2'])).status).toBe(200)
    await a.events.drain()
    const r = await a.req('GET', '/api/v1/analytics/consumers', { token: await a.token('viewer') })
    expect(r.status).toBe(200)
    expect(r.body.items.map((c: { name: string }) => c.name).sort()).toEqual([
      'analytics',
      'behavior',
      'realtime',
    ])
    for (const c of r.body.items) {
      expect(c).toMatchObject({ lagEvents: 0, lagSeconds: 0, rebuilding: false, lastError: null })
      expect(c.delivered).toBeGreaterThanOrEqual(2)
    }
    expect((await a.req('GET', '/api/v1/analytics/consumers')).status).toBe(401)
  })

  test('a whole rebuild recomputes the same numbers from the raw events while ingestion goes on', async () => {
    expect(await dau()).toBe(2)
    // A derived table damaged by hand (as a wrong definition would have): the rebuild repairs it.
    await a.db.run('DELETE FROM analytics_user_day WHERE game_id = ?', [gameId])
    await a.db.run('UPDATE analytics_daily SET dau = 99 WHERE game_id = ?', [gameId])
    const r = await a.req('POST', '/api/v1/analytics/consumers/analytics/rebuild', { token: admin, body: {} })
    expect(r.status).toBe(202)
    expect(r.body).toMatchObject({ name: 'analytics', rebuilding: true })
    expect((await send(['c3'])).status).toBe(200)
    await a.events.drain()
    expect(await dau()).toBe(3)
    const after = await a.req('GET', '/api/v1/analytics/consumers', { token: admin })
    expect(after.body.items.find((c: { name: string }) => c.name === 'analytics').rebuilding).toBe(false)
  })

  test('a rebuild from a date: every consumer takes one and recomputes the same numbers from it', async () => {
    const today = new Date().toISOString().slice(0, 10)
    // Today's day counter damaged by hand: a rebuild from today repairs it.
    await a.db.run('UPDATE analytics_daily SET dau = 99 WHERE game_id = ?', [gameId])
    for (const name of ['analytics', 'behavior', 'realtime']) {
      const r = await a.req('POST', `/api/v1/analytics/consumers/${name}/rebuild`, {
        token: admin,
        body: { from: today },
      })
      expect(r.status).toBe(202)
      expect(r.body).toMatchObject({ name, rebuilding: true })
    }
    await a.events.drain()
    expect(await dau()).toBe(3)
    const after = await a.req('GET', '/api/v1/analytics/consumers', { token: admin })
    for (const c of after.body.items) expect(c).toMatchObject({ rebuilding: false, lastError: null })
  })

  test('a malformed date or an unknown field is 400 naming it', async () => {
    const today = new Date().toISOString().slice(0, 10)
    const bad = await a.req('POST', '/api/v1/analytics/consumers/realtime/rebuild', {
      token: admin,
      body: { from: '2026-02-30' },
    })
    expect(bad.status).toBe(400)
    expect(JSON.stringify(bad.body)).toContain('body.from')
    const extra = await a.req('POST', '/api/v1/analytics/consumers/realtime/rebuild', {
      token: admin,
      body: { since: today },
    })
    expect(extra.status).toBe(400)
  })

  test('the rows a consumer set aside: listed newest first for readers, 404 for an unknown consumer, forgotten by a rebuild', async () => {
    // Set aside as the event log's parking does (core/event-log-park.ts, tested there with a
    // consumer that fails): one row each, its error, when.
    for (const [pos, at] of [
      [11, 1_000],
      [12, 2_000],
    ])
      await a.db.run(
        `INSERT INTO liveops_consumer_parked (consumer, seq, pos, event_id, game_id, env, event, ts, error, parked_at)
         VALUES ('behavior', 7, ?, ?, ?, 'prod', 'odd_event', ?, 'TypeError: cannot count it', ?)`,
        [pos, `ev-${pos}`, gameId, Date.UTC(2026, 0, 2), Date.UTC(2026, 0, 3) + at],
      )
    const viewer = await a.token('viewer')
    const r = await a.req('GET', '/api/v1/analytics/consumers/behavior/parked', { token: viewer })
    expect(r.status).toBe(200)
    expect(r.body.total).toBe(2)
    expect(r.body.items.map((p: { pos: number }) => p.pos)).toEqual([12, 11])
    expect(r.body.items[0]).toEqual({
      seq: 7,
      pos: 12,
      eventId: 'ev-12',
      gameId,
      env: 'prod',
      event: 'odd_event',
      ts: '2026-01-02T00:00:00.000Z',
      error: 'TypeError: cannot count it',
      parkedAt: '2026-01-03T00:00:02.000Z',
    })
    const one = await a.req('GET', '/api/v1/analytics/consumers/behavior/parked?limit=1', { token: viewer })
    expect([one.body.total, one.body.items.length]).toEqual([2, 1])
    const status = await a.req('GET', '/api/v1/analytics/consumers', { token: viewer })
    expect(status.body.items.find((c: { name: string }) => c.name === 'behavior').parked).toBe(2)
    expect(
      (await a.req('GET', '/api/v1/analytics/consumers/analytics/parked', { token: viewer })).body,
    ).toEqual({ total: 0, items: [] })
    for (const bad of ['0', '1001', 'x']) {
      const b = await a.req('GET', `/api/v1/analytics/consumers/behavior/parked?limit=${bad}`, {
        token: viewer,
      })
      expect(b.status).toBe(400)
      expect(JSON.stringify(b.body)).toContain('limit')
    }
    expect((await a.req('GET', '/api/v1/analytics/consumers/nope/parked', { token: viewer })).status).toBe(
      404,
    )
    expect((await a.req('GET', '/api/v1/analytics/consumers/behavior/parked')).status).toBe(401)
    // A rebuild delivers them again: no longer set aside.
    await a.req('POST', '/api/v1/analytics/consumers/behavior/rebuild', { token: admin, body: {} })
    await a.events.drain()
    const after = await a.req('GET', '/api/v1/analytics/consumers/behavior/parked', { token: viewer })
    expect(after.body).toEqual({ total: 0, items: [] })
  })

  test('only admins rebuild; an unknown consumer is 404', async () => {
    for (const role of ['operator', 'analyst', 'viewer']) {
      const r = await a.req('POST', '/api/v1/analytics/consumers/analytics/rebuild', {
        token: await a.token(role),
        body: {},
      })
      expect(r.status).toBe(403)
    }
    expect((await a.req('POST', '/api/v1/analytics/consumers/analytics/rebuild', { body: {} })).status).toBe(
      401,
    )
    const missing = await a.req('POST', '/api/v1/analytics/consumers/nope/rebuild', {
      token: admin,
      body: {},
    })
    expect(missing.status).toBe(404)
  })
})
