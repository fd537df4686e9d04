import { afterAll, beforeAll, expect, test } from 'bun:test'
import { KEY_MAX } from '../../../core/event-bounds'
import { type TestApp, forEachEngine, makeApp } from '../../../test/helpers'
import { persist } from '../../ingest/persist/persist'
import { gatherRows } from '../../ingest/persist/writer-rows'
import { normalize } from '../../ingest/signed/validate'
import { SECRET, game, signed } from '../../ingest/testing'

// Names and labels longer than MySQL's VARCHAR(191) key columns (audit-sec2 H1): one such event
// stopped the behavior or analytics consumer for every game. Ingestion refuses long names and
// ids; the consumers cut the rest (and rows stored before the rule) the same on every engine.
forEachEngine((engine) => {
  let a: TestApp
  let admin: string
  let gameId: string
  let other: string
  let key: string
  const long = (c: string, n = 300) => c.repeat(n)
  beforeAll(async () => {
    a = await makeApp(engine, {
      plugins: {
        games: {},
        ingest: { signing_secret: SECRET, purge_interval_minutes: 0 },
        experiments: {},
        analytics: {},
      },
    })
    admin = await a.token('admin')
    gameId = (await a.req('POST', '/api/games', { token: admin, body: game })).body.id
    other = (await a.req('POST', '/api/games', { token: admin, body: { ...game, name: 'Other' } })).body.id
    const k = await a.req('POST', '/api/api-keys', {
      token: admin,
      body: { name: 'sdk', gameId, environment: 'prod' },
    })
    key = k.body.key
  })
  afterAll(() => a.stop())

  const batch = (items: unknown[]) =>
    a.req('POST', '/v1/batch', {
      raw: JSON.stringify(items),
      headers: { 'x-api-key': key, 'content-type': 'application/json' },
    })
  const ev = (event: string, extra: Record<string, unknown> = {}, g = gameId) => ({
    event,
    ts: String(Date.now()),
    game_id: g,
    env: 'prod',
    uid: 'p1',
    ...extra,
  })
  /** Every consumer (analytics, behavior, realtime, exposures) caught up without an error. */
  const healthy = async () => {
    await a.events.drain()
    for (const c of await a.events.status()) expect(c).toMatchObject({ lagEvents: 0, lastError: null })
  }
  const names = async (g: string, kind: string) =>
    (
      await a.db.all<{ name: string }>(
        'SELECT DISTINCT name FROM analytics_behavior_day WHERE game_id = ? AND kind = ? ORDER BY name',
        [g, kind],
      )
    ).map((r) => r.name)

  test('/v1/batch refuses an event name or id past 128 characters, naming the field', async () => {
    const r = await batch([
      { event_id: 'n192', event: long('e', 192), uid: 'p1' },
      { event_id: 'u', event: 'tap', uid: long('u', 129) },
      { event_id: 's', event: 'tap', attrs: { session_id: long('s', 200) } },
      { event_id: 'd', event: 'tap', device_id: long('d', 129) },
      { event_id: 'n128', event: long('e', KEY_MAX), user_id: long('u', KEY_MAX) },
    ])
    expect(r.status).toBe(200)
    expect(r.body.accepted).toEqual(['n128'])
    expect(r.body.rejected).toEqual([
      { event_id: 'n192', reason: 'event_name: must be at most 128 characters' },
      { event_id: 'u', reason: 'uid: must be at most 128 characters' },
      { event_id: 's', reason: 'session_id: must be at most 128 characters' },
      { event_id: 'd', reason: 'device_id: must be at most 128 characters' },
    ])
    await healthy()
    expect(await names(gameId, 'event')).toContain(long('e', KEY_MAX))
  })

  test('signed ingestion lists each long name or id by index and field, and stores none', async () => {
    const r = await signed(a, '/api/ingest/events', [
      ev(long('e', 129)),
      ev('tap', { user_id: long('u', 129) }),
      ev('purchase', { order_id: long('o', 129), status: 'success', amount_cents: 100 }),
    ])
    expect(r.status).toBe(400)
    expect(JSON.stringify(r.body)).toContain(
      '"index":0,"field":"event","reason":"must be at most 128 characters"',
    )
    expect(JSON.stringify(r.body)).toContain(
      '"index":1,"field":"user_id","reason":"must be at most 128 characters"',
    )
    const p = await signed(a, '/api/ingest/payments', [
      ev('purchase', { order_id: long('o', 129), status: 'success', amount_cents: 100 }),
    ])
    expect(p.status).toBe(400)
    expect(JSON.stringify(p.body)).toContain('"field":"order_id","reason":"must be at most 128 characters"')
  })

  test('long labels are derived cut to 128 characters; no consumer fails; another game is derived', async () => {
    const L = long('q')
    const r = await signed(a, '/api/ingest/events', [
      ev('ad_impression', { attrs: { network: L, platform: L, country: L, revenue: 0.01 } }),
      ev('ad_request', { network: L }),
      ev('feature_use', { attrs: { feature: L, platform: L, country: L, app_version: L } }),
      ev('level_complete', { level: L, episode: L, duration_ms: 1000 }),
      ev('level_fail', { level: L, map: L, x: 1, y: 2 }),
      ev('experiment_exposure', { attrs: { exp: L, variant: L } }),
      ev('crash', { crashHash: L }),
      ev('function.invoke', { function_id: L, duration_ms: 5 }),
      ev('feature_use', { attrs: { feature: 'shop', platform: 'ios' } }, other),
    ])
    expect(r.status).toBe(200)
    await healthy()
    expect(await names(gameId, 'feature')).toEqual([long('q', KEY_MAX)])
    // A two-part name (feature and its platform) fits the narrowest key column: 191 characters.
    expect((await names(gameId, 'feature.platform')).map((n) => n.length)).toEqual([191])
    expect(await names(other, 'feature')).toEqual(['shop'])
    const dims = await a.db.all<{ dim: string }>(
      "SELECT DISTINCT dim FROM analytics_game_day WHERE game_id = ? AND metric = 'ad_imp'",
      [gameId],
    )
    expect(dims.map((d) => d.dim)).toEqual([long('q', KEY_MAX)])
  })

  test('rows stored before the bound (a long name, player and session) are derived cut, not retried forever', async () => {
    const stored = [ev(long('x')), ev('session_start', { uid: long('u'), session_id: long('s') })]
    const es = stored.map((raw) => normalize(raw, { gameId, env: 'prod', event: raw.event, ts: Date.now() }))
    // As an older version stored them: straight into the log, past ingestion's checks.
    const { ev: events, payments, invocations } = gatherRows(es, Date.now() + 5_000, { last: 0 })
    await persist(a.db, { events, payments, invocations })
    await healthy()
    expect(await names(gameId, 'event')).toContain(long('x', KEY_MAX))
    const users = await a.db.all<{ user_id: string }>(
      'SELECT DISTINCT user_id FROM analytics_user_day WHERE game_id = ? AND user_id LIKE ?',
      [gameId, 'uuu%'],
    )
    expect(users.map((u) => u.user_id)).toEqual([long('u', KEY_MAX)])
  })
})
