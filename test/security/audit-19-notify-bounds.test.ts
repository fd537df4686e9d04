import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { purgeLogs } from '../../plugins/notify/logs'
import { MAX_PARAMS_BYTES } from '../../plugins/notify/schema'
import { MAX_MESSAGE_DATA } from '../../plugins/site/dispatch'
import { siteStore } from '../../plugins/site/store'
import { type TestApp, forEachEngine, makeApp, until } from '../helpers'
import { surfaceApp } from './surface-app'

/*
 * The nineteenth session's notify audit, finding 1, replayed on every engine: a trigger token's
 * params and data had no bound (up to the 10 MB body limit), were stored in every delivery and in
 * the in-app inbox every role reads, and neither was ever purged; a config token's templates kept
 * 9 MB sample_params in every instance's copy. (The other findings: audit-19-notify.test.ts.)
 */

const DAY = 86_400_000

forEachEngine((engine) => {
  let a: TestApp
  let admin: string
  let viewer: string
  let trigger: string
  let config: string
  let query: string
  beforeAll(async () => {
    a = await surfaceApp(engine)
    admin = await a.token('admin')
    viewer = await a.token('viewer')
    const mint = async (scope: string) =>
      (await a.req('POST', '/api/v1/app-tokens', { token: admin, body: { name: scope, scopes: [scope] } }))
        .body.data.token as string
    trigger = await mint('trigger')
    config = await mint('config')
    query = await mint('query')
  })
  afterAll(() => a.stop())
  const app = (token: string) => ({ 'x-app-token': token })
  const deliveries = async () =>
    Number((await a.db.get<{ n: number }>('SELECT COUNT(*) AS n FROM notify_deliveries'))?.n ?? 0)

  describe('1. params, data and sample_params are bounded; the inbox and the delivery log are purged', () => {
    const notify = (body: Record<string, unknown>, q = '') =>
      a.req('POST', `/api/v1/notify${q}`, {
        headers: app(trigger),
        body: { type: 'keys', channels: ['site.inapp'], title: 'k', ...body },
      })

    test('more than 1,000 names, or more than 64 KB of JSON together: 400 naming the field, nothing stored', async () => {
      const before = await deliveries()
      const names = Object.fromEntries(Array.from({ length: 1_001 }, (_, i) => [i.toString(16), 1]))
      const big = 'A'.repeat(MAX_PARAMS_BYTES)
      const half = 'B'.repeat(MAX_PARAMS_BYTES / 2)
      for (const [body, field] of [
        [{ params: names }, 'body.params'],
        [{ data: names }, 'body.data'],
        [{ params: { blob: big } }, 'body.params'],
        [{ data: { blob: big } }, 'body.data'],
        // Each under the bound, together past it: the larger is named.
        [{ params: { a: half }, data: { b: `${half}BB` } }, 'body.data'],
      ] as const) {
        for (const q of ['', '?dry_run=true']) {
          const r = await notify(body, q)
          expect([r.status, r.body.data?.field, q]).toEqual([400, field, q])
        }
      }
      expect(await deliveries()).toBe(before)
      // Within the bound it is taken.
      const fits = await notify({ params: { blob: 'C'.repeat(MAX_PARAMS_BYTES - 100) } })
      expect([fits.status, fits.body.code]).toEqual([200, 0])
    })

    test("a template's sample_params, and the preview's params, are held to the same bound", async () => {
      const tpl = { name: 'big', title: 'hi {{.x}}' }
      const huge = { blob: 'A'.repeat(MAX_PARAMS_BYTES + 1) }
      const names = Object.fromEntries(Array.from({ length: 1_001 }, (_, i) => [`k${i}`, 1]))
      for (const sample_params of [huge, names]) {
        const r = await a.req('POST', '/api/v1/templates/create', {
          headers: app(config),
          body: { ...tpl, sample_params },
        })
        expect([r.status, r.body.data?.field]).toEqual([400, 'body.sample_params'])
      }
      const made = await a.req('POST', '/api/v1/templates/create', {
        headers: app(config),
        body: { ...tpl, id: 'bounded', sample_params: { x: 1 } },
      })
      expect(made.status).toBe(200)
      const put = await a.req('PUT', '/api/v1/templates/bounded', {
        headers: app(config),
        body: { ...tpl, sample_params: huge },
      })
      expect([put.status, put.body.data?.field]).toEqual([400, 'body.sample_params'])
      const preview = await a.req('POST', '/api/v1/templates/bounded/preview', {
        headers: app(trigger),
        body: { params: huge },
      })
      expect([preview.status, preview.body.data?.field]).toEqual([400, 'body.params'])
      const list = (await a.req('GET', '/api/v1/templates', { headers: app(query) })).body.data.templates
      expect(JSON.stringify(list).length).toBeLessThan(10_000)
    })

    test("an in-app message keeps at most 64 KB of a platform event's params", async () => {
      await a.bus.emit('alert.fired', {
        alert_id: 'big-labels',
        source: 'test',
        level: 'warning',
        title: 'labels of 300 KB',
        body: '',
        params: { small: 'kept', n: 7, blob: 'L'.repeat(100_000), ...{ more: 'M'.repeat(200_000) } },
        at: new Date().toISOString(),
      })
      const m = await until(async () =>
        (
          await a.req('GET', '/api/v1/site/messages?event=alert.fired', { token: viewer })
        ).body.data.items.find((x: { title: string }) => x.title === 'labels of 300 KB'),
      )
      expect(Buffer.byteLength(JSON.stringify(m.data))).toBeLessThanOrEqual(MAX_MESSAGE_DATA)
      expect(m.data).toMatchObject({ truncated: true, small: 'kept', n: 7, alert_id: 'big-labels' })
      expect((m.data.blob as string).length).toBe(1_000)
    })

    test('the retention purge takes finished deliveries, their attempts, notifications and in-app messages past their days', async () => {
      const r = await notify({ title: 'old one' })
      const id = r.body.data.task_ids[0] as string
      const nid = r.body.data.notification_id as string
      await until(
        async () =>
          (await a.req('GET', `/api/v1/logs/${id}`, { token: admin })).body.data?.status === 'success',
      )
      const msg = await until(async () =>
        (
          await a.req('GET', '/api/v1/site/messages?event=keys&size=500', { token: viewer })
        ).body.data.items.find((x: { title: string }) => x.title === 'old one'),
      )
      // A delivery still queued (a disabled channel's, one waiting for its retry) stays, whatever its age.
      const queued = (await notify({ title: 'queued' })).body.data.task_ids[0] as string
      await until(
        async () =>
          (await a.req('GET', `/api/v1/logs/${queued}`, { token: admin })).body.data?.status === 'success',
      )
      await a.db.run("UPDATE notify_deliveries SET status = 'pending', next_at = ? WHERE id = ?", [
        Date.now() + DAY,
        queued,
      ])
      const recent = (await notify({ title: 'recent' })).body.data.task_ids[0] as string
      // Sent 100 days ago.
      const old = Date.now() - 100 * DAY
      await a.db.run('UPDATE notify_deliveries SET created_at = ? WHERE id IN (?, ?)', [old, id, queued])
      await a.db.run('UPDATE notify_notifications SET created_at = ? WHERE id = ?', [old, nid])
      await a.db.run('UPDATE site_messages SET at = ? WHERE id = ?', [old, msg.id])
      const attempts = async () =>
        Number(
          (
            await a.db.get<{ n: number }>('SELECT COUNT(*) AS n FROM notify_attempts WHERE delivery_id = ?', [
              id,
            ])
          )?.n,
        )
      expect(await attempts()).toBeGreaterThan(0)

      const purged = await purgeLogs(a.db, Date.now() - 90 * DAY)
      expect(purged.deliveries).toBeGreaterThanOrEqual(1)
      expect(purged.notifications).toBeGreaterThanOrEqual(1)
      expect(await siteStore(a.db, () => ({})).purgeMessages(Date.now() - 90 * DAY)).toBe(1)

      expect((await a.req('GET', `/api/v1/logs/${id}`, { token: admin })).status).toBe(404)
      expect(await attempts()).toBe(0)
      expect(await a.db.get('SELECT id FROM notify_notifications WHERE id = ?', [nid])).toBeUndefined()
      expect(
        (
          await a.req('GET', '/api/v1/site/messages?event=keys&size=500', { token: viewer })
        ).body.data.items.map((x: { id: string }) => x.id),
      ).not.toContain(msg.id)
      // The queued delivery and the recent one stay.
      const kept = await a.req('GET', `/api/v1/logs/${queued}`, { token: admin })
      expect(kept.body.data.status).toBe('pending')
      expect((await a.req('GET', `/api/v1/logs/${recent}`, { token: admin })).status).toBe(200)
    })

    test('the purges are scheduled daily jobs (retention_days, message_retention_days: 90), run at start', async () => {
      const jobs = (await a.req('GET', '/healthz', { token: admin })).body.checks.schedule.jobs
      for (const name of ['notify.retention', 'site.message-retention'])
        expect([name, jobs[name]?.every_ms]).toEqual([name, DAY])
      const off = await makeApp(engine, {
        plugins: { notify: { retention_days: 0 }, site: { message_retention_days: 0 } },
      })
      try {
        const none = (await off.req('GET', '/healthz', { token: await off.token('admin') })).body.checks
          .schedule.jobs
        expect(Object.keys(none)).not.toContain('notify.retention')
        expect(Object.keys(none)).not.toContain('site.message-retention')
      } finally {
        await off.stop()
      }
    })
  })
})
