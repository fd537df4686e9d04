import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { migrate } from '../../core/db'
import { insertMany } from '../../core/db/bulk'
import { type TestApp, forEachEngine, makeApp, rawDb } from '../../test/helpers'
import { ingestMigrations } from '../ingest/migrations'
import { SECRET, forgotten, game, signed } from '../ingest/testing'
import { ExposureRollup, UNEXPECTED_SHOWN } from './exposures'
import experiments from './index'

// Nineteenth session's ml audit: finding 3 (made-up users of a real experiment, sent with the
// public SDK key, were kept in memory for good; made-up variant names made a results answer
// 10 MB) and finding 6 (a variant named after an Object.prototype member made results a 500, and
// `__proto__` exposures vanished from the unexpected variants).
const KEPT = 5

forEachEngine((engine) => {
  let a: TestApp
  let admin: string
  let gameId: string
  beforeAll(async () => {
    a = await makeApp(engine, {
      plugins: {
        games: {},
        ingest: { signing_secret: SECRET, purge_interval_minutes: 0 },
        experiments: { exposed_users_in_memory: KEPT },
      },
    })
    admin = await a.token('admin')
    gameId = (await a.req('POST', '/api/games', { token: admin, body: game })).body.id
  })
  afterAll(() => a.stop())

  const t0 = Date.now() - 60_000
  let tick = 0
  const ev = (event: string, uid: string, env = 'prod', attrs?: Record<string, unknown>) => ({
    event,
    ts: String(t0 + tick++),
    game_id: gameId,
    env,
    uid,
    ...(attrs ? { attrs } : {}),
  })
  const exposure = (exp: string, variant: string, uid: string, env = 'prod') =>
    ev('experiment_exposure', uid, env, { exp, variant })
  const send = async (events: unknown[]) => {
    expect((await signed(a, '/api/ingest/events', events)).status).toBe(200)
    await a.events.drain()
  }
  /** A running experiment of `env` with these variants (weights: the first takes what the others leave). */
  const experiment = async (name: string, variants: string[], env = 'prod') => {
    const each = Math.floor(100 / variants.length)
    const config = {
      variants: variants.map((v, i) => ({ name: v, weight: i ? each : 100 - each * (variants.length - 1) })),
      metrics: { primary: 'buy' },
    }
    const e = await a.req('POST', '/api/experiments', {
      token: admin,
      body: { gameId, environment: env, name, config },
    })
    expect(e.status).toBe(201)
    expect((await a.req('POST', `/api/experiments/${e.body.id}/publish`, { token: admin })).status).toBe(200)
    return e.body.id as string
  }
  const results = async (id: string) => {
    const r = await a.req('GET', `/api/experiments/${id}/results`, { token: admin })
    expect(r.status).toBe(200)
    return r.body
  }
  const gauge = async (name: string) =>
    Number((await a.metrics.text()).match(new RegExp(`^${name} (\\d+)$`, 'm'))?.[1] ?? -1)

  describe('variant names (finding 6)', () => {
    test('variants named after Object.prototype members are counted like any other', async () => {
      const names = ['control', 'toString', 'constructor', 'valueOf', 'hasOwnProperty', '__proto__']
      const id = await experiment('prototype names', names, 'dev')
      const events = names.flatMap((v, i) => [exposure(id, v, `p${i}`, 'dev'), ev('buy', `p${i}`, 'dev')])
      // Two more in toString: its count is its own, not Object.prototype.toString's.
      events.push(exposure(id, 'toString', 'p-extra', 'dev'), exposure(id, 'toString', 'p-extra2', 'dev'))
      await send(events)
      const r = await results(id)
      expect(r.exposures.map((e: { name: string; exposures: number }) => [e.name, e.exposures])).toEqual(
        names.map((n) => [n, n === 'toString' ? 3 : 1]),
      )
      expect(r.primary.variants.map((v: { conversions: number }) => v.conversions)).toEqual([
        1, 1, 1, 1, 1, 1,
      ])
      expect(r.unexpectedVariants).toEqual([])
    })

    test('unexpected variants named __proto__ or constructor are listed', async () => {
      const id = await experiment('unexpected prototype names', ['a', 'b'], 'dev')
      await send([
        exposure(id, 'a', 'q0', 'dev'),
        exposure(id, '__proto__', 'q1', 'dev'),
        exposure(id, '__proto__', 'q2', 'dev'),
        exposure(id, 'constructor', 'q3', 'dev'),
      ])
      const r = await results(id)
      expect(r.unexpectedVariants).toEqual([
        { name: '__proto__', exposures: 2 },
        { name: 'constructor', exposures: 1 },
      ])
      expect(r.totalExposures).toBe(1)
    })
  })

  describe('made-up variants and users (finding 3)', () => {
    test(`results list the ${UNEXPECTED_SHOWN} unexpected variants with most exposures, then one line counting the rest`, async () => {
      const id = await experiment('many names', ['a', 'b'], 'dev')
      const events: unknown[] = []
      const name = (i: number) => `v${String(i).padStart(2, '0')}`
      for (let i = 0; i < 25; i++)
        for (let u = 0; u < (i < 5 ? 3 : 1); u++) events.push(exposure(id, name(i), `m${i}-${u}`, 'dev'))
      await send(events)
      const r = await results(id)
      expect(r.unexpectedVariants).toHaveLength(UNEXPECTED_SHOWN + 1)
      expect(r.unexpectedVariants.slice(0, UNEXPECTED_SHOWN)).toEqual(
        Array.from({ length: UNEXPECTED_SHOWN }, (_, i) => ({ name: name(i), exposures: i < 5 ? 3 : 1 })),
      )
      expect(r.unexpectedVariants[UNEXPECTED_SHOWN]).toEqual({
        name: '5 other names',
        exposures: 5,
        others: 5,
      })
    })

    test(`past ${KEPT} exposed users in memory, the largest environment is looked up in the store, and conversions still count`, async () => {
      const id = await experiment('many users', ['a', 'b'])
      const users = Array.from({ length: 8 }, (_, i) => `u${i}`)
      // dev's users (the tests above) are too many already; prod's were none.
      const inStore = await gauge('svc_experiments_exposed_envs_in_store')
      // 8 users of prod exposed: more than are kept, so prod's go to the store too.
      await send(users.map((u, i) => exposure(id, i % 2 ? 'b' : 'a', u)))
      expect(await gauge('svc_experiments_exposed_envs_in_store')).toBe(inStore + 1)
      expect(await gauge('svc_experiments_exposed_users')).toBeLessThanOrEqual(KEPT)
      // Conversions of exposed users count from the store; a user never exposed feeds nothing.
      await send([...users.slice(0, 6).map((u) => ev('buy', u)), ev('buy', 'stranger'), ev('buy', 'u0')])
      const counted = async () =>
        (await results(id)).primary.variants.map((v: { exposures: number; conversions: number }) => [
          v.exposures,
          v.conversions,
        ])
      expect(await counted()).toEqual([
        [4, 3],
        [4, 3],
      ])
      const rows = await a.db.all<{ user_id: string }>(
        "SELECT DISTINCT user_id FROM experiments_user_events WHERE game_id = ? AND env = 'prod' ORDER BY user_id",
        [gameId],
      )
      expect(rows.map((r) => r.user_id)).toEqual(users)
      // The consumer reads its users again (a deleted environment's exposures went): prod's are
      // still too many and stay in the store; an exposure and a conversion in one batch count.
      expect(
        (await a.req('DELETE', `/api/games/${gameId}/environments/staging`, { token: admin })).status,
      ).toBe(204)
      await forgotten(a)
      await send([ev('buy', 'u6'), exposure(id, 'a', 'u8'), ev('buy', 'u8'), ev('buy', 'u7')])
      expect(await gauge('svc_experiments_exposed_envs_in_store')).toBe(inStore + 1)
      expect(await gauge('svc_experiments_exposed_users')).toBeLessThanOrEqual(KEPT)
      expect(await counted()).toEqual([
        [5, 5],
        [4, 4],
      ])
    })

    test('at start, the environments with the fewest exposed users are read while they fit; the others stay in the store', async () => {
      const { db, done } = await rawDb(engine)
      try {
        await migrate(db, [
          { plugin: 'ingest', migrations: ingestMigrations },
          { plugin: 'experiments', migrations: experiments.migrations ?? [] },
        ])
        const rows: (string | number)[] = []
        for (const [g, env, n] of [
          ['g1', 'prod', 6],
          ['g1', 'dev', 3],
          ['g2', 'prod', 2],
        ] as const)
          for (let i = 0; i < n; i++) rows.push(g, env, 'e1', `u${i}`, 'a', 1000 + i)
        await insertMany(
          db,
          'experiments_exposures',
          ['game_id', 'env', 'experiment_id', 'user_id', 'variant', 'ts'],
          rows,
        )
        const rollup = new ExposureRollup(async () => new Map(), KEPT)
        await rollup.init(db)
        expect(rollup.held()).toEqual({ users: 5, inStore: 1 })
      } finally {
        await done()
      }
    })
  })
})
