#!/usr/bin/env bun
import { coreMigrations } from '../../core/auth/migrations'
import { createChanges } from '../../core/changes'
/**
 * Change-notice propagation between two instances on one store: instance A publishes, instance B
 * hears it. PostgreSQL carries notices by LISTEN/NOTIFY, MySQL by the polled `liveops_changes`
 * table (core/db/mysql.ts), or by Redis pub/sub when REDIS_URL is set (`mysql+redis`,
 * core/changes-redis.ts). Prints the median and p90 over `--n` notices per engine.
 *
 *   bun scripts/bench/changes.ts [--n=200] [--engines=postgres,mysql,mysql+redis] [--redis=redis://127.0.0.1:6379]
 */
import { changeNamespace } from '../../core/changes'
import { openDb } from '../../core/db'
import { migrate } from '../../core/db/migrate'
import { createLogger } from '../../core/log'
import { PG_URL, freshMysqlDb, freshSchema } from '../../test/helpers'

const arg = (k: string, d: string) => process.argv.find((a) => a.startsWith(`--${k}=`))?.split('=')[1] ?? d
const n = Number(arg('n', '200'))
const log = createLogger({ level: 'error', format: 'json', sensitive_fields: [] } as never)

const redisUrl = arg('redis', 'redis://127.0.0.1:6379')
for (const engine of arg('engines', 'postgres,mysql,mysql+redis').split(',')) {
  const redis = engine === 'mysql+redis' ? redisUrl : undefined
  const store = engine.startsWith('mysql')
    ? await freshMysqlDb().then((f) => ({ url: f.url, schema: undefined, drop: f.drop }))
    : await freshSchema().then((f) => ({ url: PG_URL, schema: f.schema, drop: f.drop }))
  const a = openDb(store.url, '/tmp', { schema: store.schema, max: 2 })
  const b = openDb(store.url, '/tmp', { schema: store.schema, max: 2 })
  await migrate(a, [{ plugin: 'core', migrations: coreMigrations }])
  const ns = changeNamespace(store.url, store.schema)
  const ca = await createChanges(a, log, ns, redis)
  const cb = await createChanges(b, log, ns, redis)
  const times: number[] = []
  let heard: ((t: number) => void) | undefined
  cb.on('bench', () => heard?.(performance.now()))
  for (let i = 0; i < n; i++) {
    const got = new Promise<number>((r) => {
      heard = r
    })
    const t0 = performance.now()
    await ca.publish('bench', { i })
    times.push((await got) - t0)
    await Bun.sleep(Math.random() * 20)
  }
  times.sort((x, y) => x - y)
  const q = (p: number) => times[Math.min(times.length - 1, Math.floor(p * times.length))]!.toFixed(1)
  console.log(`${engine}: ${n} notices, median ${q(0.5)} ms, p90 ${q(0.9)} ms, max ${q(1)} ms`)
  await ca.close()
  await cb.close()
  await a.close()
  await b.close()
  await store.drop()
}
