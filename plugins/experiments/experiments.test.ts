import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { type TestApp, forEachEngine, makeApp } from '../../test/helpers'

const GAME = {
  name: 'Experiment Arena',
  genre: 'PUZZLE',
  platforms: ['ANDROID', 'IOS'],
  timezone: 'UTC',
  defaultCurrency: 'USD',
}
const CONFIG = {
  variants: [
    { name: 'control', weight: 50 },
    { name: 'treatment', weight: 50 },
  ],
  targeting: { platform: ['ios', 'ANDROID'], countries: ['us', 'DE'] },
  metrics: { primary: 'purchase', secondary: ['level_up'] },
}

forEachEngine((engine) => {
  let a: TestApp
  let admin: string
  let gameId: string
  let n = 0
  beforeAll(async () => {
    a = await makeApp(engine, { plugins: { games: {}, ingest: {}, experiments: {} } })
    admin = await a.token('admin')
    const g = await a.req('POST', '/api/games', { token: admin, body: GAME })
    expect(g.status).toBe(201)
    gameId = g.body.id
  })
  afterAll(() => a.stop())

  const body = (over: Record<string, unknown> = {}) => ({
    gameId,
    environment: 'prod',
    name: `exp ${++n}`,
    salt: `salt-${n}`,
    config: CONFIG,
    ...over,
  })
  const create = async (over: Record<string, unknown> = {}) => {
    const r = await a.req('POST', '/api/experiments', { token: admin, body: body(over) })
    expect(r.status).toBe(201)
    return r.body
  }

  describe('create and read', () => {
    test('create answers 201 with a draft holding every spec field; targeting codes are stored upper case', async () => {
      const e = await create({ name: 'Onboarding v2', description: 'shorter tutorial' })
      expect(e).toMatchObject({
        gameId,
        environment: 'prod',
        name: 'Onboarding v2',
        description: 'shorter tutorial',
        status: 'draft',
        config: { ...CONFIG, targeting: { platform: ['IOS', 'ANDROID'], countries: ['US', 'DE'] } },
      })
      expect(e.salt).toMatch(/^salt-/)
      expect(new Date(e.createdAt).toISOString()).toBe(e.createdAt)
      expect(e.publishedAt).toBeUndefined()
      const read = await a.req('GET', `/api/experiments/${e.id}`, { token: admin })
      expect(read.status).toBe(200)
      expect(read.body).toEqual(e)
    })

    test('a salt is generated when absent; a draft may have no variants yet', async () => {
      const e = await create({ salt: undefined, config: { variants: [] } })
      expect(e.salt).toMatch(/^[0-9a-f]{16}$/)
      expect(e.config).toEqual({ variants: [] })
    })

    test('bad input answers 400 naming the field, and nothing is stored', async () => {
      const before = (await a.req('GET', `/api/experiments?gameId=${gameId}&size=100`, { token: admin })).body
        .total
      const v = (variants: unknown) => ({ config: { ...CONFIG, variants } })
      const cases: Array<[Record<string, unknown>, string]> = [
        [{ name: undefined }, 'body.name'],
        [{ name: '   ' }, 'body.name'],
        [{ gameId: undefined }, 'body.gameId'],
        [{ config: undefined }, 'body.config'],
        [
          v([
            { name: 'a', weight: 50 },
            { name: 'b', weight: 40 },
          ]),
          'body.config.variants: weights must sum to 100, got 90',
        ],
        [
          v([
            { name: 'a', weight: 50 },
            { name: 'a', weight: 50 },
          ]),
          "body.config.variants[1].name: duplicate variant name 'a'",
        ],
        [
          v([
            { name: 'a', weight: 150 },
            { name: 'b', weight: -50 },
          ]),
          'body.config.variants[0].weight',
        ],
        [v([{ name: '', weight: 100 }]), 'body.config.variants[0].name'],
        [v([{ name: 'a' }]), 'body.config.variants[0].weight'],
        [{ config: { ...CONFIG, targeting: { countries: ['USA'] } } }, 'body.config.targeting.countries[0]'],
        [{ config: { ...CONFIG, targeting: { platform: ['i os'] } } }, 'body.config.targeting.platform[0]'],
        [
          { config: { ...CONFIG, targeting: { region: ['EU'] } } },
          'body.config.targeting.region: unknown field',
        ],
        [
          { config: { ...CONFIG, variants: [{ name: 'a', weight: 100, color: 'red' }] } },
          'body.config.variants[0].color: unknown field',
        ],
        [{ config: { ...CONFIG, metrics: { primary: 'has space' } } }, 'body.config.metrics.primary'],
        [{ config: { ...CONFIG, metrics: { secondary: 'level_up' } } }, 'body.config.metrics.secondary'],
        [{ status: 'running' }, 'body.status: unknown field'],
        [{ salt: 'with space' }, 'body.salt'],
        [{ gameId: 'no-such-game' }, "body.gameId: game 'no-such-game' not found"],
        [{ environment: 'qa' }, "body.environment: environment 'qa' not found"],
      ]
      for (const [over, field] of cases) {
        const r = await a.req('POST', '/api/experiments', { token: admin, body: body(over) })
        expect(r.status, JSON.stringify(over)).toBe(400)
        expect(r.body.error).toBe('bad_request')
        expect(r.body.message).toContain(field)
        expect(r.body.path).toBe('/api/experiments')
      }
      const bad = await a.req('POST', '/api/experiments', {
        token: admin,
        raw: '{"name":',
        headers: { 'content-type': 'application/json' },
      })
      expect(bad.status).toBe(400)
      expect(
        (await a.req('GET', `/api/experiments?gameId=${gameId}&size=100`, { token: admin })).body.total,
      ).toBe(before)
    })

    test('weights with binary fractions that sum to 100 are accepted', async () => {
      const e = await create({
        config: {
          variants: [
            { name: 'a', weight: 33.3 },
            { name: 'b', weight: 33.3 },
            { name: 'c', weight: 33.4 },
          ],
        },
      })
      expect(e.config.variants.map((x: { weight: number }) => x.weight)).toEqual([33.3, 33.3, 33.4])
    })

    test('a name already used in the same game and environment is a 409; another environment is fine', async () => {
      await create({ name: 'dup' })
      const r = await a.req('POST', '/api/experiments', { token: admin, body: body({ name: 'dup' }) })
      expect(r.status).toBe(409)
      expect(r.body.error).toBe('conflict')
      await create({ name: 'dup', environment: 'dev' })
    })

    test('list filters by gameId, environment and status, pages and sorts', async () => {
      const g2 = (await a.req('POST', '/api/games', { token: admin, body: { ...GAME, name: 'Other' } })).body
        .id
      const ids: string[] = []
      for (let i = 0; i < 3; i++)
        ids.push((await create({ gameId: g2, environment: 'staging', name: `list ${i}` })).id)
      await create({ gameId: g2, environment: 'dev', name: 'list dev' })
      const p0 = await a.req(
        'GET',
        `/api/experiments?gameId=${g2}&environment=staging&size=2&page=0&sort=name,asc`,
        { token: admin },
      )
      expect(p0.status).toBe(200)
      expect(p0.body).toMatchObject({ total: 3, page: 0, size: 2 })
      expect(p0.body.items.map((e: { name: string }) => e.name)).toEqual(['list 0', 'list 1'])
      const p1 = await a.req(
        'GET',
        `/api/experiments?gameId=${g2}&environment=staging&size=2&page=1&sort=name,asc`,
        { token: admin },
      )
      expect(p1.body.items.map((e: { name: string }) => e.name)).toEqual(['list 2'])
      expect((await a.req('GET', `/api/experiments?gameId=${g2}`, { token: admin })).body.items[0].name).toBe(
        'list dev',
      )
      await a.req('POST', `/api/experiments/${ids[1]}/publish`, { token: admin })
      const running = await a.req('GET', `/api/experiments?gameId=${g2}&status=running`, { token: admin })
      expect(running.body.items.map((e: { id: string }) => e.id)).toEqual([ids[1]])
      for (const [q, field] of [
        ['status=stopped', 'query.status'],
        ['sort=salt', 'query.sort'],
        ['size=0', 'query.size: Expected integer to be greater or equal to 1'],
        ['size=101', 'query.size: Expected integer to be less or equal to 100'],
        ['page=-1', 'query.page'],
        ['page=x', 'query.page:'],
      ]) {
        const r = await a.req('GET', `/api/experiments?${q}`, { token: admin })
        expect([q, r.status]).toEqual([q, 400])
        expect(r.body.message).toContain(field)
      }
    })
  })

  describe('update and delete', () => {
    test('update changes name, description and config; game and environment are fixed', async () => {
      const e = await create()
      const r = await a.req('PUT', `/api/experiments/${e.id}`, {
        token: admin,
        body: {
          gameId,
          environment: 'prod',
          name: 'renamed',
          description: 'd',
          config: { ...CONFIG, variants: [{ name: 'x', weight: 100 }] },
        },
      })
      expect(r.status).toBe(200)
      expect(r.body).toMatchObject({
        name: 'renamed',
        description: 'd',
        config: { variants: [{ name: 'x', weight: 100 }] },
      })
      expect(Date.parse(r.body.updatedAt)).toBeGreaterThan(Date.parse(e.updatedAt))
      const g = await a.req('PUT', `/api/experiments/${e.id}`, { token: admin, body: { gameId: 'other' } })
      expect(g.status).toBe(400)
      expect(g.body.message).toContain('body.gameId: is fixed after create')
      const env = await a.req('PUT', `/api/experiments/${e.id}`, {
        token: admin,
        body: { environment: 'dev' },
      })
      expect(env.body.message).toContain('body.environment: is fixed after create')
      const w = await a.req('PUT', `/api/experiments/${e.id}`, {
        token: admin,
        body: { config: { variants: [{ name: 'x', weight: 99 }] } },
      })
      expect(w.status).toBe(400)
      expect(w.body.message).toContain('body.config.variants')
      const status = await a.req('PUT', `/api/experiments/${e.id}`, {
        token: admin,
        body: { status: 'running' },
      })
      expect(status.status).toBe(400)
      expect(status.body.message).toContain('body.status: cannot change')
      expect((await a.req('GET', `/api/experiments/${e.id}`, { token: admin })).body.name).toBe('renamed')
    })

    test('delete answers 204 then 404; a running experiment must be paused first', async () => {
      const e = await create()
      await a.req('POST', `/api/experiments/${e.id}/publish`, { token: admin })
      const refused = await a.req('DELETE', `/api/experiments/${e.id}`, { token: admin })
      expect(refused.status).toBe(409)
      expect(refused.body.message).toContain('pause it')
      await a.req('POST', `/api/experiments/${e.id}/pause`, { token: admin })
      expect((await a.req('DELETE', `/api/experiments/${e.id}`, { token: admin })).status).toBe(204)
      expect((await a.req('GET', `/api/experiments/${e.id}`, { token: admin })).status).toBe(404)
      expect((await a.req('DELETE', `/api/experiments/${e.id}`, { token: admin })).status).toBe(404)
    })
  })

  describe('lifecycle', () => {
    test('draft -> publish -> running -> pause -> paused -> publish resumes', async () => {
      const e = await create()
      const p = await a.req('POST', `/api/experiments/${e.id}/publish`, { token: admin })
      expect(p.status).toBe(200)
      expect(p.body.status).toBe('running')
      expect(typeof p.body.publishedAt).toBe('string')
      const again = await a.req('POST', `/api/experiments/${e.id}/publish`, { token: admin })
      expect(again.status).toBe(409)
      expect(again.body.message).toContain('already running')
      const pause = await a.req('POST', `/api/experiments/${e.id}/pause`, { token: admin })
      expect(pause.body.status).toBe('paused')
      const pauseAgain = await a.req('POST', `/api/experiments/${e.id}/pause`, { token: admin })
      expect(pauseAgain.status).toBe(409)
      expect(pauseAgain.body.message).toContain('is paused, not running')
      const resume = await a.req('POST', `/api/experiments/${e.id}/publish`, { token: admin })
      expect(resume.body.status).toBe('running')
    })

    test('pause of a draft is a 409 with the reason', async () => {
      const e = await create()
      const r = await a.req('POST', `/api/experiments/${e.id}/pause`, { token: admin })
      expect(r.status).toBe(409)
      expect(r.body.message).toContain('is draft, not running')
    })

    test('publish refuses a config that cannot run with 409 and every reason', async () => {
      const one = await create({ config: { variants: [{ name: 'only', weight: 100 }] } })
      const r1 = await a.req('POST', `/api/experiments/${one.id}/publish`, { token: admin })
      expect(r1.status).toBe(409)
      expect(r1.body.message).toContain('at least two variants')
      expect(r1.body.details.reasons).toHaveLength(1)
      const none = await create({ config: { variants: [] } })
      expect(
        (await a.req('POST', `/api/experiments/${none.id}/publish`, { token: admin })).body.message,
      ).toContain('found 0')
      const zero = await create({
        config: {
          variants: [
            { name: 'a', weight: 100 },
            { name: 'b', weight: 0 },
          ],
        },
      })
      const r3 = await a.req('POST', `/api/experiments/${zero.id}/publish`, { token: admin })
      expect(r3.status).toBe(409)
      expect(r3.body.details.reasons).toEqual([
        "config.variants[1].weight: variant 'b' needs a positive weight to run",
      ])
      expect((await a.req('GET', `/api/experiments/${zero.id}`, { token: admin })).body.status).toBe('draft')
    })

    // Its experiments go with a deleted environment (a recreated one of that name starts without them).
    test('publish finds no experiment of an environment deleted since', async () => {
      const e = await create({ environment: 'staging', name: 'env-gone' })
      expect(
        (await a.req('DELETE', `/api/games/${gameId}/environments/staging`, { token: admin })).status,
      ).toBeLessThan(300)
      const r = await a.req('POST', `/api/experiments/${e.id}/publish`, { token: admin })
      expect(r.status).toBe(404)
    })

    test('changing the variants or salt of a running or paused experiment needs force=true', async () => {
      const e = await create()
      await a.req('POST', `/api/experiments/${e.id}/publish`, { token: admin })
      const newVariants = {
        ...CONFIG,
        variants: [
          { name: 'control', weight: 20 },
          { name: 'treatment', weight: 80 },
        ],
      }
      const refused = await a.req('PUT', `/api/experiments/${e.id}`, {
        token: admin,
        body: { config: newVariants },
      })
      expect(refused.status).toBe(409)
      expect(refused.body.message).toContain('re-buckets')
      expect(refused.body.details.field).toBe('body.config.variants')
      const salt = await a.req('PUT', `/api/experiments/${e.id}`, {
        token: admin,
        body: { salt: 'new-salt' },
      })
      expect(salt.status).toBe(409)
      expect(salt.body.details.field).toBe('body.salt')
      // Targeting and metrics do not move anyone between variants.
      const targeting = await a.req('PUT', `/api/experiments/${e.id}`, {
        token: admin,
        body: { config: { ...CONFIG, targeting: { countries: ['FR'] } } },
      })
      expect(targeting.status).toBe(200)
      const forced = await a.req('PUT', `/api/experiments/${e.id}?force=true`, {
        token: admin,
        body: { config: newVariants },
      })
      expect(forced.status).toBe(200)
      expect(forced.body.config.variants[0].weight).toBe(20)
      await a.req('POST', `/api/experiments/${e.id}/pause`, { token: admin })
      const paused = await a.req('PUT', `/api/experiments/${e.id}`, {
        token: admin,
        body: { config: CONFIG },
      })
      expect(paused.status).toBe(409)
      const unrunnable = await a.req('PUT', `/api/experiments/${e.id}?force=true`, {
        token: admin,
        body: { config: { variants: [{ name: 'a', weight: 100 }] } },
      })
      expect(unrunnable.status).toBe(200)
      await a
        .req('POST', `/api/experiments/${e.id}/publish`, { token: admin })
        .then((r) => expect(r.status).toBe(409))
    })

    test('a running experiment cannot be given a config that cannot run, even forced', async () => {
      const e = await create()
      await a.req('POST', `/api/experiments/${e.id}/publish`, { token: admin })
      const r = await a.req('PUT', `/api/experiments/${e.id}?force=true`, {
        token: admin,
        body: { config: { variants: [{ name: 'a', weight: 100 }] } },
      })
      expect(r.status).toBe(409)
      expect(r.body.details.reasons[0]).toContain('at least two variants')
    })

    test('concurrent publishes: exactly one wins, the other gets 409', async () => {
      const e = await create()
      const rs = await Promise.all(
        [1, 2, 3].map(() => a.req('POST', `/api/experiments/${e.id}/publish`, { token: admin })),
      )
      expect(rs.map((r) => r.status).sort()).toEqual([200, 409, 409])
      expect((await a.req('GET', `/api/experiments/${e.id}`, { token: admin })).body.status).toBe('running')
    })
  })
})
