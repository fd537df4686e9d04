import { afterAll, afterEach, beforeAll, expect, test } from 'bun:test'
import { TextTimelineBuilder, walkSlice } from '../../plugins/analytics/behavior/timeline'
import { SECRET, signed } from '../../plugins/ingest/testing'
import { type TestApp, forEachEngine, makeApp } from '../helpers'
import { GAME } from './lib'

/*
 * The eighteenth session's analytics audit, replayed as its attacker made it: a viewer's paths
 * read (`by=user&length=20`) over a day of a busy game held the event loop for seconds, /healthz
 * and every other request waiting, because the grouping of the walk per user and the counting of
 * its paths ran in one pass each with no turn of the loop. Here the walk takes a turn every slice
 * of rows; the slice is made one row so a small day has many turns, and /healthz is asked the
 * moment the walk's grouping begins (after the last page was read, so no read's wait lets it in):
 * it must be answered before the paths read is.
 */
forEachEngine((engine) => {
  let a: TestApp
  let viewer: string
  let gameId: string
  const USERS = 400
  const STEPS = 5
  const NAMES = 50
  const slice = walkSlice.rows
  const done = TextTimelineBuilder.prototype.done
  beforeAll(async () => {
    a = await makeApp(engine, {
      plugins: { games: {}, ingest: { signing_secret: SECRET, purge_interval_minutes: 0 }, analytics: {} },
    })
    const admin = await a.token('admin')
    viewer = await a.token('viewer')
    gameId = String(
      (await a.req('POST', '/api/games', { token: admin, body: { ...GAME, name: 'Busy' } })).body.id,
    )
    // User i's steps are e(i), e(i+1), ... (of 50 names), each a minute apart; sent last step
    // first, so each user's rows are stored out of time order and the walk sorts them.
    const base = Date.now() - 3_600_000
    for (let j = STEPS - 1; j >= 0; j--) {
      const events = Array.from({ length: USERS }, (_, i) => ({
        event: `e${(i + j) % NAMES}`,
        ts: String(base + j * 60_000 + i),
        game_id: gameId,
        env: 'prod',
        uid: `u${i}`,
      }))
      expect((await signed(a, '/api/ingest/events', events)).status).toBe(200)
    }
  })
  afterEach(() => {
    walkSlice.rows = slice
    TextTimelineBuilder.prototype.done = done
  })
  afterAll(() => a.stop())

  test("a viewer's paths read takes turns of the event loop: /healthz asked as its walk's grouping begins answers first", async () => {
    walkSlice.rows = 1
    const order: string[] = []
    TextTimelineBuilder.prototype.done = function (this: TextTimelineBuilder) {
      setImmediate(() => {
        a.req('GET', '/healthz').then((r) => order.push(`healthz ${r.status}`))
      })
      return done.call(this)
    }
    const r = await a.req(
      'GET',
      `/api/v1/analytics/behavior/paths?gameId=${gameId}&env=prod&by=user&length=20&top=100`,
      { token: viewer },
    )
    order.push(`paths ${r.status}`)
    expect(order).toEqual(['healthz 200', 'paths 200'])
    // The answer is the same as ever: a path per user, 50 distinct paths of 8 users each, ties in
    // the text order of their names.
    expect(r.body.total).toBe(USERS)
    expect(r.body.paths.length).toBe(NAMES)
    const i = 7
    const seven = Array.from({ length: STEPS }, (_, j) => `e${(i + j) % NAMES}`)
    expect(r.body.paths).toContainEqual({ path: seven, count: USERS / NAMES, share: 0.02 })
    const labels = r.body.paths.map((p: { path: string[] }) => p.path.join('\u0001'))
    expect(labels).toEqual([...labels].sort())
  }, 60_000)

  test('a strict funnel walks the same way: /healthz answers first, the funnel as ever', async () => {
    walkSlice.rows = 1
    const order: string[] = []
    TextTimelineBuilder.prototype.done = function (this: TextTimelineBuilder) {
      setImmediate(() => {
        a.req('GET', '/healthz').then((r) => order.push(`healthz ${r.status}`))
      })
      return done.call(this)
    }
    const r = await a.req('POST', `/api/v1/analytics/behavior/funnel?gameId=${gameId}&env=prod`, {
      token: viewer,
      body: { order: 'strict', steps: [{ event: 'e0' }, { event: 'e1' }] },
    })
    order.push(`funnel ${r.status}`)
    expect(order).toEqual(['healthz 200', 'funnel 200'])
    // e0 is among the five steps of users i with i % 50 in 46..49 or 0 (8 each), followed at
    // once by e1 unless it is their last step (i % 50 = 46).
    expect([r.body.users, r.body.converted]).toEqual([40, 32])
  }, 60_000)
})
