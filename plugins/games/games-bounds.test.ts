import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { newId } from '../../core/db'
import { insertMany } from '../../core/db/bulk'
import { type TestApp, forEachEngine, makeApp } from '../../test/helpers'
import { SECRET } from '../ingest/testing'
import { newGame } from './games-fixture'
import { MISSES_KEPT } from './read-cache'
import { MAX_ENVIRONMENTS } from './rows'

// Nineteenth session's identity audit: M1 (made-up ids grew the games cache for good, from an
// anonymous read) and L3 (an environment list read the keys once per environment; no cap on
// environments or keys, no paging of the key lists).
forEachEngine((engine) => {
  let a: TestApp
  let admin: string
  beforeAll(async () => {
    a = await makeApp(engine, {
      plugins: { games: {}, ingest: { signing_secret: SECRET, purge_interval_minutes: 0 }, experiments: {} },
    })
    admin = await a.token('admin')
  })
  afterAll(() => a.stop())
  const create = async () =>
    (await a.req('POST', '/api/games', { token: admin, body: newGame })).body.id as string
  /** `svc_games_cache_entries` of one cache and kind. */
  const cached = async (cache: string, kind: string) =>
    Number(
      (await a.metrics.text()).match(
        new RegExp(`^svc_games_cache_entries\\{cache="${cache}",kind="${kind}"\\} (\\d+)$`, 'm'),
      )?.[1] ?? -1,
    )
  /** `n` requests, 50 at a time. */
  const flood = async (n: number, send: (i: number) => Promise<{ status: number }>) => {
    const statuses = new Set<number>()
    for (let i = 0; i < n; i += 50)
      for (const r of await Promise.all(Array.from({ length: Math.min(50, n - i) }, (_, j) => send(i + j))))
        statuses.add(r.status)
    return [...statuses]
  }

  describe('made-up ids (M1)', () => {
    test('anonymous reads of many missing environments and a viewer reads of many missing games keep the cache bounded', async () => {
      const viewer = await a.token('viewer')
      const made = (i: number) => `${Bun.randomUUIDv7()}${i}`.slice(0, 40)
      expect(await flood(MISSES_KEPT + 150, (i) => a.req('GET', `/api/config/${made(i)}/dev`))).toEqual([404])
      expect(
        await flood(MISSES_KEPT + 150, (i) => a.req('GET', `/api/games/${made(i)}`, { token: viewer })),
      ).toEqual([404])
      expect(await cached('environments', 'misses')).toBe(MISSES_KEPT)
      expect(await cached('games', 'misses')).toBe(MISSES_KEPT)
      // A real game is read and answered as before.
      const gameId = await create()
      expect((await a.req('GET', `/api/config/${gameId}/dev`)).status).toBe(200)
      expect((await a.req('GET', `/api/games/${gameId}`, { token: viewer })).status).toBe(200)
    })

    test('an id or name longer than any there is answers 404 at once, on the fast route and on Elysia, and is not remembered', async () => {
      const gameId = await create()
      const base = a.listen()
      const before = [await cached('environments', 'misses'), await cached('games', 'misses')]
      const long = `${'a'.repeat(7000)}`
      for (let i = 0; i < 3; i++) {
        expect((await fetch(`${base}/api/config/${long}${i}/dev`)).status).toBe(404)
        expect((await a.req('GET', `/api/config/${long}${i}/dev`)).status).toBe(404)
        expect((await a.req('GET', `/api/config/${gameId}/${'e'.repeat(33)}${i}`)).status).toBe(404)
        expect((await a.req('GET', `/api/games/${long}${i}`, { token: admin })).status).toBe(404)
      }
      expect([await cached('environments', 'misses'), await cached('games', 'misses')]).toEqual(before)
    })
  })

  describe('environments and keys (L3)', () => {
    test(`a game holds at most ${MAX_ENVIRONMENTS} environments; its list shows each one's active keys`, async () => {
      const gameId = await create()
      const dev = await a.token('developer')
      const key = async (environment: string) =>
        (
          await a.req('POST', '/api/api-keys', {
            token: dev,
            body: { name: `k-${environment}`, gameId, environment },
          })
        ).body
      const [k1, k1b, k2, gone] = [await key('dev'), await key('dev'), await key('prod'), await key('prod')]
      expect((await a.req('DELETE', `/api/api-keys/${gone.id}`, { token: dev })).status).toBe(200)
      // The rest of the cap made at once (3 environments came with the game).
      const settings = (
        await a.db.get<{ settings: string }>(
          "SELECT settings FROM environments WHERE game_id = ? AND name = 'dev'",
          [gameId],
        )
      )?.settings
      const now = Date.now()
      const rows: (string | number)[] = []
      for (let i = 0; i < MAX_ENVIRONMENTS - 4; i++)
        rows.push(newId(), gameId, `filler-${i}`, 'STAGING', `filler ${i}`, '', settings!, now, now)
      await insertMany(
        a.db,
        'environments',
        [
          'id',
          'game_id',
          'name',
          'type',
          'display_name',
          'description',
          'settings',
          'created_at',
          'updated_at',
        ],
        rows,
      )
      const made = (name: string) =>
        a.req('POST', `/api/games/${gameId}/environments`, { token: admin, body: { name, type: 'STAGING' } })
      expect((await made('last')).status).toBe(201)
      const refused = await made('one-more')
      expect(refused.status).toBe(409)
      expect(refused.body.message).toContain(`${MAX_ENVIRONMENTS} environments`)
      const list = await a.req('GET', `/api/games/${gameId}/environments`, { token: await a.token('viewer') })
      expect(list.status).toBe(200)
      expect(list.body).toHaveLength(MAX_ENVIRONMENTS)
      const keysOf = (name: string) =>
        list.body.find((e: { name: string }) => e.name === name).apiKeys.map((k: { id: string }) => k.id)
      expect(keysOf('dev')).toEqual([k1.id, k1b.id])
      expect(keysOf('prod')).toEqual([k2.id])
      expect(keysOf('staging')).toEqual([])
      // Deleting one makes room.
      expect(
        (await a.req('DELETE', `/api/games/${gameId}/environments/filler-0`, { token: admin })).status,
      ).toBe(204)
      expect((await made('one-more')).status).toBe(201)
    })

    test('a game holds at most 1,000 active SDK keys; a revoked one makes room', async () => {
      const gameId = await create()
      const dev = await a.token('developer')
      const now = Date.now()
      const rows: (string | number)[] = []
      for (let i = 0; i < 999; i++)
        rows.push(newId(), `filler ${i}`, `hash-${gameId}-${i}`, 'lok_fill', gameId, 'prod', now)
      await insertMany(
        a.db,
        'api_keys',
        ['id', 'name', 'key_hash', 'prefix', 'game_id', 'environment', 'created_at'],
        rows,
      )
      const make = () =>
        a.req('POST', '/api/api-keys', { token: dev, body: { name: 'k', gameId, environment: 'dev' } })
      const last = await make()
      expect(last.status).toBe(201)
      const refused = await make()
      expect(refused.status).toBe(409)
      expect(refused.body.message).toContain('1000 active API keys')
      expect((await a.req('DELETE', `/api/api-keys/${last.body.id}`, { token: dev })).status).toBe(200)
      expect((await make()).status).toBe(201)
    })

    test('the key lists page by id with limit and after; without limit, all of them', async () => {
      const gameId = await create()
      const dev = await a.token('developer')
      const ids: string[] = []
      for (let i = 0; i < 5; i++)
        ids.push(
          (
            await a.req('POST', '/api/api-keys', {
              token: dev,
              body: { name: `k${i}`, gameId, environment: 'dev' },
            })
          ).body.id,
        )
      const page = (q: string) => a.req('GET', `/api/api-keys?gameId=${gameId}${q}`, { token: dev })
      const first = await page('&limit=2')
      expect(first.body.map((k: { id: string }) => k.id)).toEqual(ids.slice(0, 2))
      expect(first.headers.get('x-next-after')).toBe(ids[1])
      const next = await page(`&limit=3&after=${ids[1]}`)
      expect(next.body.map((k: { id: string }) => k.id)).toEqual(ids.slice(2))
      expect(next.headers.get('x-next-after')).toBeNull()
      expect((await page('')).body.map((k: { id: string }) => k.id)).toEqual(ids)
      expect((await page('&limit=0')).status).toBe(400)
      expect((await page('&limit=1001')).status).toBe(400)

      for (const [path, field] of [
        ['/api/v1/server-keys', 'keys'],
        ['/api/v1/app-tokens', 'tokens'],
      ] as const) {
        const made: string[] = []
        for (let i = 0; i < 3; i++)
          made.push(
            (await a.req('POST', path, { token: admin, body: { name: `t${i}`, scopes: ['query'] } })).body
              .data.id,
          )
        const all = (await a.req('GET', path, { token: admin })).body.data
        expect(all.next_after).toBeUndefined()
        const mine = all[field].map((t: { id: string }) => t.id).filter((id: string) => made.includes(id))
        expect(mine).toEqual(made)
        const p1 = (await a.req('GET', `${path}?limit=1&after=${made[0]}`, { token: admin })).body.data
        expect(p1[field].map((t: { id: string }) => t.id)).toEqual([made[1]])
        expect(p1.count).toBe(1)
        expect(p1.next_after).toBe(made[1])
        const p2 = (await a.req('GET', `${path}?limit=5&after=${made[1]}`, { token: admin })).body.data
        expect(p2[field].map((t: { id: string }) => t.id)).toEqual([made[2]])
        expect(p2.next_after).toBeUndefined()
        expect((await a.req('GET', `${path}?limit=0`, { token: admin })).status).toBe(400)
      }
    })
  })
})
