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
 * it must be answered before the paths read is. And one viewer's four reads at once shared the
 * loop, each answering after 10 s: one walk per caller runs at a time, the next is 429.
 */
forEachEngine((engine) => {
  let a: TestApp
  let viewer: string
  let analyst: string
  let gameId: string
  const USERS = 4_000
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
    analyst = await a.token('analyst')
    gameId = String(
      (await a.req('POST', '/api/games', { token: admin, body: { ...GAME, name: 'Busy' } })).body.id,
    )
    // User i's steps are e(i), e(i+1), ... (of 50 names), each a minute apart; sent last step
    // first, so each user's rows are stored out of time order and the walk sorts them.
    const base = Date.now() - 3_600_000
    for (let j = STEPS - 1; j >= 0; j--) {
      for (let from = 0; from < USERS; from += 1_000) {
        const events = Array.from({ length: 1_000 }, (_, k) => ({
          event: `e${(from + k + j) % NAMES}`,
          ts: String(base + j * 60_000 + from + k),
          game_id: gameId,
          env: 'prod',
          uid: `u${from + k}`,
        }))
        expect((await signed(a, '/api/ingest/events', events)).status).toBe(200)
      }
    }
  })
  afterEach(() => {
    walkSlice.rows = slice
    TextTimelineBuilder.prototype.done = done
  })
  afterAll(() => a.stop())

  /** Walks in slices of one row, `/healthz` asked as a walk's grouping begins: what answers, in order. */
  const healthAsGroupingBegins = (): string[] => {
    walkSlice.rows = 1
    const order: string[] = []
    TextTimelineBuilder.prototype.done = function (this: TextTimelineBuilder) {
      setImmediate(() => {
        a.req('GET', '/healthz').then((r) => order.push(`healthz ${r.status}`))
      })
      return done.call(this)
    }
    return order
  }

  test("a viewer's paths read takes turns of the event loop: /healthz asked as its walk's grouping begins answers first", async () => {
    const order = healthAsGroupingBegins()
    const r = await a.req(
      'GET',
      `/api/v1/analytics/behavior/paths?gameId=${gameId}&env=prod&by=user&length=20&top=100`,
      { token: viewer },
    )
    order.push(`paths ${r.status}`)
    expect(order).toEqual(['healthz 200', 'paths 200'])
    // The answer is the same as ever: a path per user, 50 distinct paths of 80 users each, ties in
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
    const order = healthAsGroupingBegins()
    const r = await a.req('POST', `/api/v1/analytics/behavior/funnel?gameId=${gameId}&env=prod`, {
      token: viewer,
      body: { order: 'strict', steps: [{ event: 'e0' }, { event: 'e1' }] },
    })
    order.push(`funnel ${r.status}`)
    expect(order).toEqual(['healthz 200', 'funnel 200'])
    // e0 is among the five steps of users i with i % 50 in 46..49 or 0 (80 each), followed at
    // once by e1 unless it is their last step (i % 50 = 46).
    expect([r.body.users, r.body.converted]).toEqual([400, 320])
  }, 60_000)

  test("one walk per caller at a time: a viewer's second paths or funnel read while one runs is 429 naming it; others' and later reads answer", async () => {
    // The viewer's first walk is held where its grouping begins, as a long walk would be.
    let release = () => {}
    let held = false
    TextTimelineBuilder.prototype.done = function (this: TextTimelineBuilder) {
      if (held) return done.call(this)
      held = true
      return new Promise<void>((r) => {
        release = r
      }).then(() => done.call(this))
    }
    const paths = (token: string) =>
      a.req('GET', `/api/v1/analytics/behavior/paths?gameId=${gameId}&env=prod&by=user&length=20`, { token })
    const first = paths(viewer)
    while (!held) await Bun.sleep(5)
    const again = await paths(viewer)
    expect([again.status, again.body.error]).toEqual([429, 'too_many_walks'])
    const funnel = await a.req('POST', `/api/v1/analytics/behavior/funnel?gameId=${gameId}&env=prod`, {
      token: viewer,
      body: { steps: [{ event: 'e0' }, { event: 'e1' }] },
    })
    expect([funnel.status, funnel.body.error]).toEqual([429, 'too_many_walks'])
    expect((await paths(analyst)).status).toBe(200)
    release()
    expect((await first).status).toBe(200)
    expect((await paths(viewer)).status).toBe(200)
  }, 60_000)
})
