import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { coreMigrations } from '../../core/auth/migrations'
import { type ChangeDetail, changeNamespace, createChanges } from '../../core/changes'
import { type Db, migrate, openDb } from '../../core/db'
import { createLogger } from '../../core/log'
import { engines, freshMysqlDb } from '../helpers'

// Issue 39 point 2: on MySQL, change notices travel through Redis pub/sub when REDIS_URL is set,
// through the polled liveops_changes table otherwise; two instances on one database hear each other.

const REDIS = process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379'
const quiet = createLogger(
  { level: 'error', format: 'json', max_size: 1, max_backups: 0, max_age: 0, sensitive_fields: [] },
  () => {},
)

describe.if(engines.includes('mysql'))('[mysql] change notices between two instances', () => {
  let a: Db
  let b: Db
  let store: Awaited<ReturnType<typeof freshMysqlDb>>
  beforeAll(async () => {
    store = await freshMysqlDb()
    a = openDb(store.url, '/tmp', { max: 2 })
    b = openDb(store.url, '/tmp', { max: 2 })
    await migrate(a, [{ plugin: 'core', migrations: coreMigrations }])
  })
  afterAll(async () => {
    await a.close()
    await b.close()
    await store.drop()
  })

  const heard = async (redisUrl: string | undefined) => {
    const ns = changeNamespace(store.url, undefined)
    const ca = await createChanges(a, quiet, ns, redisUrl)
    const cb = await createChanges(b, quiet, ns, redisUrl)
    try {
      const got = new Promise<[ChangeDetail, string]>((resolve) =>
        cb.on('game', (d, origin) => resolve([d, origin])),
      )
      const before = Number((await a.get<{ n: number }>('SELECT COUNT(*) AS n FROM liveops_changes'))?.n)
      await ca.publish('game', { id: 'g1' })
      const [detail, origin] = await got
      const after = Number((await a.get<{ n: number }>('SELECT COUNT(*) AS n FROM liveops_changes'))?.n)
      return { detail, origin, rows: after - before }
    } finally {
      await ca.close()
      await cb.close()
    }
  }

  test('without Redis: through the polled table (a row a notice)', async () => {
    expect(await heard(undefined)).toEqual({ detail: { id: 'g1' }, origin: 'remote', rows: 1 })
  })

  test('with REDIS_URL: through Redis pub/sub, no row written', async () => {
    expect(await heard(REDIS)).toEqual({ detail: { id: 'g1' }, origin: 'remote', rows: 0 })
  })

  test('instances on other databases of the same server and Redis do not hear each other', () => {
    const u = new URL(store.url)
    u.pathname = '/other_db'
    expect(changeNamespace(u.toString(), undefined)).not.toBe(changeNamespace(store.url, undefined))
  })
})
