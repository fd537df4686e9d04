import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { stringify } from 'yaml'
import { type LiveopsApp, createApp } from '../core/app'
import { loadConfig } from '../core/config'
import { createLogger } from '../core/log'
import { type MemoryState, createSharedState } from '../core/shared'
import { plugins } from '../plugins'
import { SECRET, game } from '../plugins/ingest/testing'
import { ownStore } from '../plugins/notify/testing'
import { signRequest } from '../sdk/sign'
import { forEachEngine, hashOnce, rawDb } from './helpers'

const quiet = createLogger(
  { level: 'error', format: 'json', max_size: 1, max_backups: 0, max_age: 0, sensitive_fields: [] },
  () => {},
)
const REDIS = process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379'
const unique = () => crypto.randomUUID()

describe('shared state: the contract every backend keeps', () => {
  const contract = (
    name: string,
    make: () => Promise<{
      state: Pick<MemoryState, never> & ReturnType<typeof createSharedState>
      done: () => Promise<void>
    }>,
  ) =>
    describe(name, () => {
      test('a claim succeeds once per window, for concurrent callers too, and again after the window', async () => {
        const { state, done } = await make()
        try {
          const k = unique()
          const results = await Promise.all(Array.from({ length: 20 }, () => state.claimOnce(k, 300)))
          expect(results.filter(Boolean)).toHaveLength(1)
          expect(await state.claimOnce(k, 300)).toBe(false)
          const deadline = Date.now() + 3000
          let again = false
          while (!again && Date.now() < deadline) {
            await Bun.sleep(50)
            again = await state.claimOnce(k, 300)
          }
          expect(again).toBe(true)
        } finally {
          await done()
        }
      })

      test('a counter adds within its window and starts over after it', async () => {
        const { state, done } = await make()
        try {
          const k = unique()
          expect(await state.add(k, 300)).toBe(1)
          expect(await state.add(k, 300, 4)).toBe(5)
          const sums = await Promise.all(Array.from({ length: 10 }, () => state.add(k, 300)))
          expect(Math.max(...sums)).toBe(15)
          // Every caller gets a total of its own, concurrent ones too (batched into one statement).
          expect(sums.sort((x, y) => x - y)).toEqual([6, 7, 8, 9, 10, 11, 12, 13, 14, 15])
          const deadline = Date.now() + 3000
          let fresh = 0
          while (fresh !== 1 && Date.now() < deadline) {
            await Bun.sleep(50)
            fresh = (await state.add(`${k}-probe`, 300)) === 1 ? await state.add(k, 300) : 0
          }
          expect(fresh).toBe(1)
        } finally {
          await done()
        }
      })

      test('several counters in one call; a sliding window lives a window past its last add', async () => {
        const { state, done } = await make()
        try {
          const [x, y] = [unique(), unique()]
          expect(
            await state.addAll([
              { key: x, windowMs: 60_000 },
              { key: y, windowMs: 60_000, by: 3 },
            ]),
          ).toEqual([1, 3])
          expect(
            await state.addAll([
              { key: x, windowMs: 60_000, by: -1 },
              { key: y, windowMs: 60_000 },
            ]),
          ).toEqual([0, 4])
          const z = unique()
          await state.addAll([{ key: z, windowMs: 400 }], { slide: true })
          // Each add restarts the window: adds every 150 ms keep it alive well past 400 ms.
          let total = 1
          for (let i = 0; i < 5; i++) {
            await Bun.sleep(150)
            total = (await state.addAll([{ key: z, windowMs: 400 }], { slide: true }))[0]!
          }
          expect(total).toBe(6)
        } finally {
          await done()
        }
      })

      test('values are put, read, removed, and expire', async () => {
        const { state, done } = await make()
        try {
          const [x, y, z] = [unique(), unique(), unique()]
          await state.put(x, 1_950_000_000_000, 60_000)
          await state.put(y, 7, 300)
          expect(await state.get([x, y, z])).toEqual([1_950_000_000_000, 7, undefined])
          await state.remove([x])
          expect(await state.get([x])).toEqual([undefined])
          const deadline = Date.now() + 3000
          while ((await state.get([y]))[0] !== undefined && Date.now() < deadline) await Bun.sleep(50)
          expect(await state.get([y])).toEqual([undefined])
        } finally {
          await done()
        }
      })

      test('a token bucket: the burst at once, concurrent takers share it, then refilled at the rate', async () => {
        const { state, done } = await make()
        try {
          const k = unique()
          // 600 per minute: one token back every 100 ms.
          const bucket = { requestsPerMinute: 600, burstSize: 5 }
          const takes = await Promise.all(Array.from({ length: 8 }, () => state.take(k, bucket)))
          expect(takes.filter((t) => t.allowed)).toHaveLength(5)
          expect(Math.min(...takes.map((t) => t.tokens))).toBeLessThan(1)
          const deadline = Date.now() + 3000
          let back = false
          while (!back && Date.now() < deadline) {
            await Bun.sleep(50)
            back = (await state.take(k, bucket)).allowed
          }
          expect(back).toBe(true)
          // Never past the capacity, however long the pause (another key, same settings).
          const fresh = await state.take(unique(), bucket)
          expect(fresh).toEqual({ allowed: true, tokens: 4 })
        } finally {
          await done()
        }
      })
    })

  for (const engine of ['sqlite', 'postgres'] as const)
    contract(`[${engine}] database`, async () => {
      const raw = await rawDb(engine)
      await raw.db.exec(
        'CREATE TABLE liveops_shared (key TEXT PRIMARY KEY, value BIGINT NOT NULL, expires_at BIGINT NOT NULL)',
      )
      const state = createSharedState({ db: raw.db, log: quiet })
      expect(state.backend).toBe('database')
      return { state, done: raw.done }
    })

  contract('redis', async () => {
    const raw = await rawDb('sqlite')
    const state = createSharedState({ db: raw.db, redisUrl: REDIS, log: quiet })
    return {
      state,
      done: async () => {
        expect(state.backend).toBe('redis')
        await state.close()
        await raw.done()
      },
    }
  })

  test('redis down: answers come from this process alone, never a refusal, and say so', async () => {
    const raw = await rawDb('sqlite')
    const warnings: string[] = []
    const log = createLogger(
      { level: 'warn', format: 'json', max_size: 1, max_backups: 0, max_age: 0, sensitive_fields: [] },
      (l) => warnings.push(l),
    )
    const state = createSharedState({ db: raw.db, redisUrl: 'redis://127.0.0.1:1', log })
    try {
      const k = unique()
      expect(await state.claimOnce(k, 60_000)).toBe(true)
      expect(await state.claimOnce(k, 60_000)).toBe(false)
      expect(await state.add(`${k}-count`, 60_000)).toBe(1)
      expect(await state.add(`${k}-count`, 60_000)).toBe(2)
      expect(await state.addAll([{ key: `${k}-count`, windowMs: 60_000 }])).toEqual([3])
      await state.put(`${k}-lock`, 5, 60_000)
      expect(await state.get([`${k}-lock`])).toEqual([5])
      await state.remove([`${k}-lock`])
      expect(await state.get([`${k}-lock`])).toEqual([undefined])
      const bucket = { requestsPerMinute: 1, burstSize: 1 }
      expect((await state.take(`${k}-b`, bucket)).allowed).toBe(true)
      expect((await state.take(`${k}-b`, bucket)).allowed).toBe(false)
      expect(state.backend).toBe('memory')
      expect(warnings.join('\n')).toContain('redis unavailable')
    } finally {
      await state.close()
      await raw.done()
    }
  })
})

/** Two instances on one store (and a restart): a signed request is accepted exactly once. */
forEachEngine((engine) => {
  let store: Awaited<ReturnType<typeof ownStore>>
  const apps: LiveopsApp[] = []
  const start = async (name: string) => {
    const yaml = stringify({
      data_dir: `${store.dataDir}/${name}`,
      database: { url: store.url, pool: 4 },
      auth: { jwt_secret: 'shared-jwt-secret-0001', admin_token: 'shared-admin-token-01' },
      admin: { email: 'admin@localhost', password: 'admin-password' },
      rate_limit: { requests_per_minute: 0, burst: 0 },
      log: { level: 'error' },
      plugins: { games: {}, ingest: { signing_secret: SECRET } },
    })
    const config = loadConfig(yaml, plugins, {})
    const app = await createApp(config, {
      plugins,
      pgSchema: store.schema,
      log: quiet,
      hashPassword: hashOnce,
    })
    apps.push(app)
    return app
  }
  /** A game made through `app` by the admin token; its id. */
  const createGame = async (app: LiveopsApp, name: string) => {
    const g = await app.app.handle(
      new Request('http://localhost/api/games', {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-admin-token': 'shared-admin-token-01' },
        body: JSON.stringify({ ...game, name }),
      }),
    )
    return ((await g.json()) as { id: string }).id
  }
  const post = (app: LiveopsApp, body: string, headers: object) =>
    app.app.handle(
      new Request('http://localhost/api/ingest/events', {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...(headers as Record<string, string>) },
        body,
      }),
    )
  beforeAll(async () => {
    store = await ownStore(engine)
  })
  afterAll(async () => {
    for (const a of apps) await a.stop()
    await store.drop()
  })

  test('a signed request accepted once is a replay on another instance (PostgreSQL, MySQL) and after a restart (all)', async () => {
    const a = await start('a')
    const b = await start('b')
    const gameId = await createGame(a, game.name)
    const body = JSON.stringify([
      { event: 'login', ts: String(Date.now()), game_id: gameId, env: 'prod', uid: 'p1' },
    ])
    const headers = await signRequest(SECRET, body)
    expect((await post(a, body, headers)).status).toBe(200)
    // One SQLite file serves one instance (docs/deploy.md): there the window lives in the event
    // store, written with the events; instances sharing PostgreSQL or MySQL claim it in the shared state.
    if (engine !== 'sqlite') {
      const onB = await post(b, body, headers)
      expect(onB.status).toBe(429)
      expect(((await onB.json()) as { error: string }).error).toBe('duplicate_nonce')
    } else {
      const kept = await a.db.get<{ n: number }>('SELECT COUNT(*) AS n FROM ingest_nonces WHERE nonce = ?', [
        headers['X-Nonce'],
      ])
      expect(Number(kept?.n)).toBe(1)
      await b.stop()
    }
    await a.stop()
    const a2 = await start('a')
    expect((await post(a2, body, headers)).status).toBe(429)
    // A new nonce is a new request.
    expect((await post(a2, body, await signRequest(SECRET, body))).status).toBe(200)
    const n = await a2.db.get<{ n: number | string }>(
      "SELECT COUNT(*) AS n FROM ingest_events WHERE user_id = 'p1'",
    )
    expect(Number(n?.n)).toBe(2)
  })

  if (engine === 'postgres')
    test('two instances storing events at the same moments: every request accepted, every event stored once', async () => {
      const a = await start('c')
      const b = await start('d')
      const gameId = await createGame(a, 'Both instances')
      // Both instances number their raw rows by receive time: commits in the same millisecond on
      // two instances must still get ids of their own.
      for (let round = 0; round < 5; round++) {
        const sends = await Promise.all(
          Array.from({ length: 8 }, async (_, i) => {
            const body = JSON.stringify(
              Array.from({ length: 20 }, (_, k) => ({
                event: 'login',
                ts: String(Date.now()),
                game_id: gameId,
                env: 'prod',
                uid: `both-${round}-${i}-${k}`,
              })),
            )
            return post(i % 2 ? b : a, body, await signRequest(SECRET, body))
          }),
        )
        expect(sends.map((r) => r.status)).toEqual(Array(8).fill(200))
      }
      const n = await a.db.get<{ n: number | string; ids: number | string }>(
        "SELECT COUNT(*) AS n, COUNT(DISTINCT id) AS ids FROM ingest_events WHERE user_id LIKE 'both-%'",
      )
      expect([Number(n?.n), Number(n?.ids)]).toEqual([800, 800])
    })
})
