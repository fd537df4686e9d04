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
import { forEachEngine, rawDb } from './helpers'

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
      auth: { jwt_secret: 'shared', admin_token: 'shared-admin' },
      admin: { email: 'admin@localhost', password: 'admin-password' },
      rate_limit: { requests_per_minute: 0, burst: 0 },
      log: { level: 'error' },
      plugins: { games: {}, ingest: { signing_secret: SECRET } },
    })
    const config = loadConfig(yaml, plugins, {})
    const app = await createApp(config, { plugins, pgSchema: store.schema, log: quiet })
    apps.push(app)
    return app
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

  test('a signed request accepted once is a replay on another instance (PostgreSQL) and after a restart (both)', async () => {
    const a = await start('a')
    const b = await start('b')
    const g = await a.app.handle(
      new Request('http://localhost/api/games', {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-admin-token': 'shared-admin' },
        body: JSON.stringify(game),
      }),
    )
    const gameId = ((await g.json()) as { id: string }).id
    const body = JSON.stringify([
      { event: 'login', ts: String(Date.now()), game_id: gameId, env: 'prod', uid: 'p1' },
    ])
    const headers = await signRequest(SECRET, body)
    expect((await post(a, body, headers)).status).toBe(200)
    // One SQLite file serves one instance (docs/deploy.md): there the window lives in the event
    // store, written with the events; instances sharing PostgreSQL claim it in the shared state.
    if (engine === 'postgres') {
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
})
