import { afterAll, beforeAll, expect, test } from 'bun:test'
import { join } from 'node:path'
import { type TestApp, forEachEngine, makeApp, until } from '../../test/helpers'
import { freePort } from '../../test/own-postgres'
import { httpSink } from './testing'
import { workerToken } from './workers'

const root = join(import.meta.dir, '..', '..')
const WORKER_TOKEN = 'wk-Heron-Basalt-4417'

forEachEngine((engine) => {
  let t: TestApp
  let port: number
  const sink = httpSink()
  let worker: ReturnType<typeof Bun.spawn> | undefined
  beforeAll(async () => {
    port = freePort()
    t = await makeApp(engine, {
      plugins: {
        'webhook-provider': {},
        notify: {
          auth: { enabled: false },
          channels: {
            hook: { type: 'webhook', url: sink.url },
            // A third-party provider: the server loads the file, and so must the remote worker.
            sms: { type: 'sms', module: './test/example/sms-provider.ts', url: sink.url, sender: 'QUESTS' },
          },
          workers: {
            local: false,
            remote: { enabled: true, port, heartbeat_s: 0.2, missed_heartbeats: 2, token: WORKER_TOKEN },
          },
        },
      },
    })
  })
  afterAll(async () => {
    worker?.kill('SIGKILL')
    await t.stop()
    sink.stop()
  })

  test('GET /workers is empty with count 0 before any remote worker attaches', async () => {
    const r = await t.req('GET', '/api/v1/workers')
    expect(r.body).toEqual({ code: 0, message: 'ok', data: { count: 0, workers: [] } })
  }, 30_000)

  test('the worker endpoint takes the configured worker token alone, whatever auth.enabled says', async () => {
    const url = `http://127.0.0.1:${port}/api/v1/workers/connect`
    expect((await fetch(url)).status).toBe(401)
    expect((await fetch(url, { headers: { authorization: 'Bearer lat_wrong' } })).status).toBe(401)
    // Deliveries carry the channels' secrets unmasked: no user and no application token, of any
    // scope, connects (an operator's or a config token's connection read them, sixteenth audit).
    const admin = await t.token('admin')
    const config = (
      await t.req('POST', '/api/v1/app-tokens', { token: admin, body: { name: 'c', scopes: ['config'] } })
    ).body.data.token
    for (const bearer of [config, admin, await t.token('operator'), `${WORKER_TOKEN}x`]) {
      const r = await fetch(url, { headers: { authorization: `Bearer ${bearer}` } })
      expect(r.status).toBe(401)
      expect(await r.text()).not.toContain(WORKER_TOKEN)
    }
    // The right token passes the check (a plain GET is then no WebSocket upgrade: 426).
    expect((await fetch(url, { headers: { authorization: `Bearer ${WORKER_TOKEN}` } })).status).toBe(426)
    // The right token in the URL is refused (it had passed): a URL lands in proxy and access logs,
    // and this token receives every channel's secrets. The answer says where it goes, not what it was.
    for (const headers of [{}, { authorization: `Bearer ${WORKER_TOKEN}` }] as Record<string, string>[]) {
      const r = await fetch(`${url}?token=${WORKER_TOKEN}`, { headers })
      const body = await r.text()
      expect(r.status).toBe(401)
      expect(body).toContain('Authorization: Bearer')
      expect(body).not.toContain(WORKER_TOKEN)
    }
    expect((await fetch(`http://127.0.0.1:${port}/elsewhere`)).status).toBe(404)
    // No token configured: every worker refused, saying what to set.
    expect(() => workerToken('')({ authorization: 'Bearer anything' })).toThrow('NOTIFY_WORKER_TOKEN')
  }, 30_000)

  test('a remote worker process connects, advertises capabilities, heartbeats, delivers and reports; offline after missed heartbeats', async () => {
    const token = WORKER_TOKEN
    // Queued before the worker exists: it waits in the store.
    const early = (
      await t.req('POST', '/api/v1/notify', { body: { type: 'x', channel: 'hook', title: 'early' } })
    ).body.data.task_ids[0]
    worker = Bun.spawn(
      [
        process.execPath,
        'core/main.ts',
        'worker',
        '--server',
        `http://127.0.0.1:${port}`,
        '--token',
        token,
        '--id',
        `w-${engine}`,
        '--capabilities',
        'webhook,log',
        '--module',
        'test/example/sms-provider.ts',
      ],
      {
        cwd: root,
        stdout: 'ignore',
        stderr: 'ignore',
      },
    )
    const online = await until(async () => {
      const r = await t.req('GET', '/api/v1/workers')
      return r.body.data.workers.find((w: { status: string }) => w.status === 'online')
    }, 10_000)
    expect(online).toMatchObject({
      worker_id: `w-${engine}`,
      mode: 'remote',
      capabilities: ['webhook', 'log', 'sms'],
      status: 'online',
    })
    expect(Date.parse(online.connected_at)).toBeGreaterThan(0)

    expect(await until(() => sink.hits.some((h) => h.body.id === early), 5000)).toBe(true)
    const late = (
      await t.req('POST', '/api/v1/notify', { body: { type: 'x', channel: 'hook', title: 'late' } })
    ).body.data.task_ids[0]
    expect(await until(() => sink.hits.some((h) => h.body.id === late), 5000)).toBe(true)
    const log = await until(async () => {
      const r = await t.req('GET', `/api/v1/logs/${late}`)
      return r.body.data.status === 'success' ? r.body.data : undefined
    })
    expect(log.attempts[0].worker).toBe(`w-${engine}`)

    const text = (
      await t.req('POST', '/api/v1/notify', {
        body: { type: 'x', channel: 'sms', title: 'raid', body: 'in 5' },
      })
    ).body.data.task_ids[0]
    const sms = await until(() => sink.hits.find((h) => h.body.id === text), 5000)
    expect(sms?.body).toMatchObject({ from: 'QUESTS', text: 'raid: in 5' })
    const smsLog = await until(async () => {
      const r = await t.req('GET', `/api/v1/logs/${text}`)
      return r.body.data.status === 'success' ? r.body.data : undefined
    })
    expect(smsLog.attempts[0].worker).toBe(`w-${engine}`)

    const beat1 = Date.parse(online.last_heartbeat)
    const again = await until(async () => {
      const w = (await t.req('GET', '/api/v1/workers')).body.data.workers[0]
      return Date.parse(w.last_heartbeat) > beat1 ? w : undefined
    }, 5000)
    expect(Date.parse(again.last_heartbeat)).toBeGreaterThan(beat1)

    worker.kill('SIGSTOP')
    const offline = await until(async () => {
      const r = await t.req('GET', '/api/v1/workers')
      return r.body.data.workers[0]?.status === 'offline' ? r.body.data : undefined
    }, 5000)
    expect(offline?.count).toBe(1)
    worker.kill('SIGKILL')
  }, 30_000)
})
