import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { stringify } from 'yaml'
import { type LiveopsApp, createApp } from '../core/app'
import { loadConfig } from '../core/config'
import { createLogger } from '../core/log'
import { plugins } from '../plugins'
import { ownStore } from '../plugins/notify/testing'
import { engines, hashOnce } from './helpers'

/**
 * Several instances on one PostgreSQL (or MySQL): a change made through one is seen by the others at once,
 * through LISTEN/NOTIFY, not by polling. Every poll here is set far beyond the test's deadline,
 * so only a notice can make these pass.
 */
const NO_POLLING = {
  games: { cache_ttl_ms: 3_600_000 },
  ingest: {},
  experiments: { refresh_ms: 0 },
  notify: { auth: { enabled: false }, queue: { sync_ms: 3_600_000 }, channels: { audit: { type: 'log' } } },
}

async function instance(store: Awaited<ReturnType<typeof ownStore>>, name: string) {
  const yaml = stringify({
    data_dir: `${store.dataDir}/${name}`,
    database: { url: store.url, pool: 4 },
    auth: { jwt_secret: 'shared-jwt-secret-0001', admin_token: 'shared-admin-token' },
    admin: { email: 'admin@localhost', password: 'admin-password' },
    rate_limit: { requests_per_minute: 0, burst: 0 },
    log: { level: 'error' },
    plugins: NO_POLLING,
  })
  const config = loadConfig(yaml, plugins, {})
  const app: LiveopsApp = await createApp(config, {
    plugins,
    pgSchema: store.schema,
    log: createLogger(config.core.log),
    hashPassword: hashOnce,
  })
  const req = async (method: string, path: string, body?: unknown) => {
    const res = await app.app.handle(
      new Request(`http://localhost${path}`, {
        method,
        headers: {
          'x-admin-token': 'shared-admin-token',
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        },
        body: body === undefined ? undefined : JSON.stringify(body),
      }),
    )
    const text = await res.text()
    return { status: res.status, body: text ? JSON.parse(text) : undefined }
  }
  return { app, req }
}

/** Polls `fn` until it holds, for at most `ms`. */
async function within<T>(ms: number, fn: () => Promise<T>): Promise<T> {
  const end = Date.now() + ms
  for (;;) {
    const v = await fn()
    if (v || Date.now() > end) return v
    await Bun.sleep(5)
  }
}

// MySQL carries the notices through its polled change table (core/db/mysql.ts), within 1 s too.
for (const engine of (['postgres', 'mysql'] as const).filter((e) => engines.includes(e)))
  describe(`[${engine}] three instances on one store`, () => {
    let store: Awaited<ReturnType<typeof ownStore>>
    let a: Awaited<ReturnType<typeof instance>>
    let b: Awaited<ReturnType<typeof instance>>
    let c: Awaited<ReturnType<typeof instance>>
    beforeAll(async () => {
      store = await ownStore(engine)
      a = await instance(store, 'a')
      b = await instance(store, 'b')
      c = await instance(store, 'c')
    })
    afterAll(async () => {
      for (const i of [a, b, c]) await i?.app.stop()
      await store.drop()
    })

    test('a game changed on one instance reads changed on the others (their caches hold it for an hour otherwise)', async () => {
      const g = await a.req('POST', '/api/games', {
        name: 'Shared Saga',
        genre: 'STRATEGY',
        platforms: ['WEB'],
        timezone: 'America/Sao_Paulo',
        defaultCurrency: 'BRL',
      })
      expect(g.status).toBe(201)
      for (const i of [b, c])
        expect((await i.req('GET', `/api/games/${g.body.id}`)).body.name).toBe('Shared Saga')
      expect((await a.req('PUT', `/api/games/${g.body.id}`, { name: 'Shared Saga II' })).status).toBe(200)
      for (const i of [b, c]) {
        const seen = await within(
          1000,
          async () => (await i.req('GET', `/api/games/${g.body.id}`)).body.name === 'Shared Saga II',
        )
        expect(seen).toBe(true)
      }
      expect((await b.req('DELETE', `/api/games/${g.body.id}`)).status).toBeLessThan(300)
      const gone = await within(
        1000,
        async () => (await c.req('GET', `/api/games/${g.body.id}`)).status === 404,
      )
      expect(gone).toBe(true)
    })

    test('an experiment started on one instance is in the public config every instance serves', async () => {
      const g = await a.req('POST', '/api/games', {
        name: 'Config Craft',
        genre: 'PUZZLE',
        platforms: ['IOS'],
        timezone: 'UTC',
        defaultCurrency: 'USD',
      })
      // Every instance has built (and cached) the empty answer first.
      for (const i of [a, b, c])
        expect((await i.req('GET', `/api/config/${g.body.id}/prod`)).body).toEqual([])
      const e = await a.req('POST', '/api/experiments', {
        gameId: g.body.id,
        environment: 'prod',
        name: 'shop-layout',
        config: {
          variants: [
            { name: 'grid', weight: 50 },
            { name: 'list', weight: 50 },
          ],
        },
      })
      expect(e.status).toBe(201)
      expect((await a.req('POST', `/api/experiments/${e.body.id}/publish`)).status).toBe(200)
      for (const i of [b, c]) {
        const seen = await within(
          1000,
          async () => (await i.req('GET', `/api/config/${g.body.id}/prod`)).body.length === 1,
        )
        expect(seen).toBe(true)
      }
    })

    test('a channel created at runtime on one instance is usable on the others at once', async () => {
      const put = await a.req('PUT', '/api/v1/config/pager', { type: 'log', config: {} })
      expect(put.status).toBe(200)
      for (const i of [b, c]) {
        const seen = await within(
          1000,
          async () => (await i.req('GET', '/api/v1/config/pager')).status === 200,
        )
        expect(seen).toBe(true)
      }
      expect(
        (await c.req('POST', '/api/v1/notify', { type: 'x', channel: 'pager', title: 'from c' })).body.code,
      ).toBe(0)
    })
  })
