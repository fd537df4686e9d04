import { afterAll, expect, test } from 'bun:test'
import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { httpSink } from '../plugins/notify/testing'
import { engines, scratchDatabase } from './helpers'
import { type Running, startServer } from './process'

/**
 * Two server processes on one PostgreSQL database; one is killed with SIGKILL while deliveries
 * are in flight. Every accepted notification is delivered (none lost), repeats are bounded by
 * what was truly in flight, and each repeat carries the same X-Liveops-Delivery id, so the
 * receiver can drop it.
 */
const root = join(import.meta.dir, '..')
const running: Running[] = []
// A database of this run's own: other runs of this test may use the same server right now.
let db: Awaited<ReturnType<typeof scratchDatabase>> | undefined

afterAll(async () => {
  for (const r of running) r.proc.kill('SIGKILL')
  await Promise.all(running.map((r) => r.proc.exited))
  await db?.drop()
}, 30_000)

test.if(engines.includes('postgres'))(
  'kill -9 of one instance with deliveries in flight: none lost, repeats bounded and carrying the delivery id',
  async () => {
    db = await scratchDatabase('liveops_test_instances')
    const dbUrl = db.url
    // Each answer takes a while, so a good share of the deliveries is in flight at the kill.
    const sink = httpSink(async () => {
      await Bun.sleep(50)
      return new Response('ok')
    })
    const start = async (name: string) => {
      const dir = mkdtempSync(join(tmpdir(), `liveops-kill-${name}-`))
      const config = join(dir, 'liveops.yaml')
      await Bun.write(
        config,
        `data_dir: ${dir}
log: { level: info }
rate_limit: { requests_per_minute: 0, burst: 0 }
plugins:
  webhook-provider: {}
  notify:
    auth: { enabled: false }
    channels: { hook: { type: webhook, url: "${sink.url}" } }
    queue: { poll_ms: 50, lease_ms: 1500, batch: 50, instance_id: ${name} }
    workers: { local: true, concurrency: 8 }
`,
      )
      const s = await startServer(
        [process.execPath, 'core/main.ts', '--config', config],
        {
          DATABASE_URL: dbUrl,
          JWT_SECRET: 'kill-test-jwt-secret-01',
          ADMIN_PASSWORD: 'kill-test-password',
        },
        { cwd: root },
      )
      running.push(s)
      return s
    }
    const a = await start('a')
    const b = await start('b')
    try {
      const ids: string[] = []
      for (let i = 0; i < 120; i++) {
        const r = await fetch(`${(i % 3 ? a : b).base}/api/v1/notify`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ type: 'x', channel: 'hook', title: `m${i}` }),
        })
        ids.push(...((await r.json()) as { data: { task_ids: string[] } }).data.task_ids)
      }
      // Kill A while it is sending.
      const deadline = Date.now() + 10_000
      while (sink.hits.length < 20 && Date.now() < deadline) await Bun.sleep(5)
      a.proc.kill('SIGKILL')
      await a.proc.exited

      const all = Date.now() + 30_000
      while (!ids.every((id) => sink.hits.some((h) => h.body.id === id)) && Date.now() < all)
        await Bun.sleep(20)
      const missing = ids.filter((id) => !sink.hits.some((h) => h.body.id === id))
      expect(missing).toEqual([])
      for (const h of sink.hits) expect(h.headers['x-liveops-delivery']).toBe(String(h.body.id))
      const repeats = sink.hits.length - new Set(sink.hits.map((h) => h.body.id)).size
      // At most A's sends in flight (its concurrency) come again.
      expect(repeats).toBeLessThanOrEqual(8)
    } finally {
      b.proc.kill('SIGTERM')
      await b.proc.exited
      sink.stop()
    }
  },
  60_000,
)
