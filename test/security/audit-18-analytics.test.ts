import { afterAll, beforeAll, expect, spyOn, test } from 'bun:test'
import { Elysia } from 'elysia'
import { definePlugin } from '../../core/plugin'
import { SECRET, signed } from '../../plugins/ingest/testing'
import { type TestApp, forEachEngine, makeApp, until } from '../helpers'
import { GAME } from './lib'

/*
 * The eighteenth session's analytics audit, replayed as its attackers made it. Here: a flood of
 * signed events (or a rebuild) left a consumer a backlog it took step by step, and every analytics
 * read drove it to the head before answering (30 s on SQLite, reset at Bun's 10 s on PostgreSQL)
 * instead of waiting `read_wait_ms` and answering with what was derived.
 */

/** A consumer that takes one row a step, each step slow (`slow`) or held until released (`held`). */
const treadmill = {
  taken: 0,
  mode: 'slow' as 'slow' | 'held',
  holding: false,
  release: () => {},
}
const treadmillPlugin = definePlugin({
  name: 'treadmill',
  dependsOn: ['ingest'],
  setup(ctx) {
    ctx.events.consume({
      name: 'treadmill',
      batch: 1,
      async prepare(rows) {
        treadmill.taken += rows.length
        if (treadmill.mode === 'held') {
          treadmill.holding = true
          await new Promise<void>((resolve) => {
            treadmill.release = resolve
          })
          treadmill.holding = false
        } else await Bun.sleep(20)
      },
      async handle() {},
      async reset() {},
    })
    return new Elysia({ name: 'treadmill' })
  },
})

forEachEngine((engine) => {
  let a: TestApp
  let viewer: string
  let gameA: string
  let gameB: string
  beforeAll(async () => {
    Object.assign(treadmill, { taken: 0, mode: 'slow', holding: false })
    a = await makeApp(engine, {
      plugins: {
        games: {},
        ingest: { signing_secret: SECRET, purge_interval_minutes: 0 },
        analytics: { read_wait_ms: 200 },
        treadmill: {},
      },
      extraPlugins: { treadmill: treadmillPlugin },
    })
    const admin = await a.token('admin')
    viewer = await a.token('viewer')
    const made = async (name: string) =>
      String((await a.req('POST', '/api/games', { token: admin, body: { ...GAME, name } })).body.id)
    gameA = await made('Flooded')
    gameB = await made('Quiet')
  })
  afterAll(async () => {
    treadmill.mode = 'slow'
    treadmill.release()
    await a.stop()
  })

  const ROWS = 400
  const overview = () =>
    a.req('GET', `/api/v1/analytics/overview?gameId=${gameB}&env=prod`, { token: viewer })

  /** `n` events of game A, as the flood of signed events sent them. */
  const flood = (n: number) => {
    const now = Date.now()
    const events = Array.from({ length: n }, (_, i) => ({
      event: 'login',
      ts: String(now - i * 1000),
      game_id: gameA,
      env: 'prod',
      uid: `x${i}`,
    }))
    return signed(a, '/api/ingest/events', events)
  }

  test("a backlog that never runs dry: another game's read answers after read_wait_ms, its asOf saying so", async () => {
    treadmill.mode = 'held'
    expect((await flood(ROWS)).status).toBe(200)
    const acknowledged = Date.now()
    // The app's own consumers take the flood in; the treadmill is left its backlog alone.
    await until(() => treadmill.holding)
    for (const name of a.events.names()) if (name !== 'treadmill') await a.events.drain(name)
    treadmill.mode = 'slow'
    treadmill.release()
    const r = await overview()
    expect(r.status).toBe(200)
    // The read did not take the backlog in (a step each, ROWS of them): the consumer is still behind,
    // and the answer says it is complete only to before the flood.
    expect(treadmill.taken).toBeLessThan(ROWS)
    expect(Date.parse(r.headers.get('x-as-of') ?? '')).toBeLessThanOrEqual(acknowledged)
  }, 60_000)

  test('a step that does not end holds no read past read_wait_ms', async () => {
    treadmill.mode = 'held'
    expect((await flood(2)).status).toBe(200)
    await until(() => treadmill.holding)
    const taken = treadmill.taken
    const r = await overview()
    expect(r.status).toBe(200)
    expect(treadmill.taken).toBe(taken)
    expect(treadmill.holding).toBe(true)
    // Reads answered meanwhile share the one drain left running (a drain each, polling the cursors
    // behind every answered read, had doubled PostgreSQL's work a request in the ingest bench).
    const drain = spyOn(a.events, 'drain')
    try {
      for (const read of await Promise.all([overview(), overview(), overview()]))
        expect(read.status).toBe(200)
      expect(drain).toHaveBeenCalledTimes(0)
    } finally {
      drain.mockRestore()
    }
  }, 60_000)
})
