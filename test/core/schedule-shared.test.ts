import { afterAll, beforeAll, expect, test } from 'bun:test'
import { stringify } from 'yaml'
import { type LiveopsApp, createApp } from '../../core/app'
import { loadConfig } from '../../core/config'
import { createLogger } from '../../core/log'
import { type PluginManifest, definePlugin } from '../../core/plugin'
import type { ScheduleOptions, ScheduledJob } from '../../core/schedule'
import { ownStore } from '../../plugins/notify/testing'
import { forEachEngine, hashOnce, until } from '../helpers'

/**
 * Issue 36 point 3: `ctx.schedule` is one run per tick across the instances sharing a store, on
 * both engines (two apps on one SQLite file stand in for two processes on it; on PostgreSQL two
 * instances of a fleet). The jobs come from a plugin of the test's own.
 */
type Job = { name: string; every: number; job: ScheduledJob; opts?: ScheduleOptions }

function probe(jobs: Job[]): PluginManifest {
  return definePlugin({
    name: 'probe',
    setup(ctx) {
      for (const j of jobs) ctx.schedule(j.name, j.every, j.job, j.opts)
      return undefined as never
    },
  }) as PluginManifest
}

const HOUR = 3_600_000

forEachEngine((engine) => {
  let store: Awaited<ReturnType<typeof ownStore>>
  const apps: LiveopsApp[] = []
  beforeAll(async () => {
    store = await ownStore(engine)
  })
  afterAll(async () => {
    for (const a of apps.splice(0)) await a.stop()
    await store.drop()
  })

  const start = async (name: string, jobs: Job[]) => {
    const yaml = stringify({
      data_dir: `${store.dataDir}/${name}`,
      instance_id: name,
      database: { url: store.url, pool: 3 },
      auth: { jwt_secret: 'shared-jwt-secret-0001', admin_token: 'shared-admin-token-01' },
      admin: { email: 'admin@localhost', password: 'admin-password' },
      rate_limit: { requests_per_minute: 0, burst: 0 },
      log: { level: 'error' },
      telemetry: { prometheus: { enabled: true } },
      plugins: { probe: {} },
    })
    const plugins = { probe: probe(jobs) }
    const app = await createApp(loadConfig(yaml, plugins, {}), {
      plugins,
      pgSchema: store.schema,
      log: createLogger({ level: 'error', sensitive_fields: [] } as never, () => undefined),
      hashPassword: hashOnce,
    })
    apps.push(app)
    return app
  }
  // As an operator reads it: /healthz shows the jobs' error texts to credentials only.
  const get = async (app: LiveopsApp, path: string) => {
    const res = await app.app.handle(
      new Request(`http://localhost${path}`, { headers: { 'x-admin-token': 'shared-admin-token-01' } }),
    )
    return res.headers.get('content-type')?.includes('json') ? res.json() : res.text()
  }
  /** Moves a job's due time (what downtime or another instance's claim would leave behind). */
  const setRow = async (name: string, set: string, params: Array<string | number>) => {
    const sql = `UPDATE liveops_schedule SET ${set} WHERE name = ?`
    await apps[0]!.db.run(sql, [...params, name])
  }

  test('one run per tick across instances: two instances starting with a new job run it once', async () => {
    const runs: string[] = []
    const job = (who: string) => () => {
      runs.push(who)
    }
    const a = await start('a', [
      { name: 'once.tick', every: HOUR, job: job('a'), opts: { runAtStart: true } },
    ])
    const b = await start('b', [
      { name: 'once.tick', every: HOUR, job: job('b'), opts: { runAtStart: true } },
    ])
    await until(() => runs.length >= 1)
    // The other instance's timer has fired as well (its claim came back empty) by the time the
    // health detail shows the finished run.
    const h = await until(async () => {
      const body = await get(b, '/healthz')
      return body.checks.schedule.jobs?.['once.tick']?.runs === 1 && body
    })
    expect(runs).toHaveLength(1)
    expect(h.checks.schedule).toMatchObject({ status: 'up', instance: 'b' })
    expect(h.checks.schedule.jobs['once.tick']).toMatchObject({
      every_ms: HOUR,
      scope: 'cluster',
      last_instance: runs[0],
      last_error: null,
      running_on: null,
    })
    expect(Date.parse(h.checks.schedule.jobs['once.tick'].next_run_at)).toBeGreaterThan(
      Date.now() + HOUR - 60_000,
    )
    for (const app of [a, b]) await app.stop()
    apps.splice(0)
  })

  test('a tick missed while every instance was down runs once at the next start, not once per missed period', async () => {
    const runs: number[] = []
    const job: Job = { name: 'missed.tick', every: HOUR, job: () => void runs.push(Date.now()) }
    const a = await start('a', [job])
    // Five periods of downtime: the job was due five hours ago.
    await setRow('missed.tick', 'next_at = ?', [Date.now() - 5 * HOUR])
    await a.stop()
    apps.splice(0)
    await start('a', [job])
    await start('b', [job])
    await until(async () => (await get(apps[1]!, '/healthz')).checks.schedule.jobs['missed.tick']?.runs === 1)
    expect(runs).toHaveLength(1)
    for (const app of apps.splice(0)) await app.stop()
  })

  test('a run leased by an instance that died is taken over once its lease ran out, not before; failures show in /healthz and the metrics', async () => {
    const runs: string[] = []
    let witnessed = 0
    const jobs: Job[] = [
      { name: 'leased.tick', every: 50, job: () => void runs.push('leased') },
      // Ticks at the same pace: once it ran a few times, so would the leased job have.
      { name: 'witness.tick', every: 50, job: () => void witnessed++ },
      {
        name: 'failing.tick',
        every: HOUR,
        job: () => {
          throw new Error('the sink is down')
        },
        opts: { runAtStart: true },
      },
    ]
    // A dead instance holds the tick for another hour, from before this one starts: nobody runs it.
    const seed = await start('seed', [])
    await seed.db.run(
      `INSERT INTO liveops_schedule (name, every_ms, next_at, lease_owner, lease_until) VALUES ('leased.tick', 50, 0, 'ghost', ?)
       ON CONFLICT (name) DO UPDATE SET next_at = 0, lease_owner = 'ghost', lease_until = excluded.lease_until`,
      [Date.now() + HOUR],
    )
    await seed.stop()
    apps.splice(0)
    const a = await start('a', jobs)
    const h = await until(async () => {
      const body = await get(a, '/healthz')
      return body.checks.schedule.jobs?.['failing.tick']?.runs === 1 && body
    })
    await until(() => witnessed >= 4)
    expect(runs).toEqual([])
    expect(h.checks.schedule.status).toBe('down')
    expect(h.checks.schedule.error).toBe('last run failed: failing.tick')
    expect(h.checks.schedule.jobs['failing.tick']).toMatchObject({
      last_error: 'the sink is down',
      last_instance: 'a',
      last_success_at: null,
    })
    expect(h.checks.schedule.jobs['leased.tick'].running_on).toBe('ghost')
    // Not critical: the instance stays ready.
    expect((await a.app.handle(new Request('http://localhost/readyz'))).status).toBe(200)
    const text = (await get(a, '/metrics/prometheus')) as string
    expect(text).toContain('svc_schedule_last_failed{job="failing.tick"} 1')
    expect(text).toMatch(/svc_schedule_last_run_timestamp_seconds\{job="failing.tick"\} \d/)
    expect(text).toContain('svc_schedule_runs_total{job="failing.tick",outcome="failed"} 1')

    // The lease runs out: this instance takes the job over and keeps running it.
    await setRow('leased.tick', 'lease_until = ?', [Date.now() - 1])
    await until(() => runs.length >= 3)
    for (const app of apps.splice(0)) await app.stop()
  })

  test('perInstance jobs run on every instance', async () => {
    const runs = new Set<string>()
    const job = (who: string): Job => ({
      name: 'cache.refresh',
      every: 20,
      job: () => void runs.add(who),
      opts: { perInstance: true },
    })
    await start('a', [job('a')])
    await start('b', [job('b')])
    await until(() => runs.size === 2)
    for (const app of apps.splice(0)) await app.stop()
  })
})
