import { afterAll, beforeAll, expect, test } from 'bun:test'
import { createLogger } from '../../core/log'
import type { Delivery } from '../../core/plugin'
import { engineFree, makeApp, until } from '../../test/helpers'
import { MAX_FRAME, type WorkerHub, workerHub, workerToken } from './workers'

/**
 * Audit 19b: the worker connection's handler let a `null`, a capability or an error that is no
 * string throw out of it, which ended the whole server; a connection could say hello without end
 * (100,000 listed workers in 1.3 s, a 120 MB list), an error text of 8 MB went whole into the
 * delivery log, a two-letter token was taken and the port answered 50,000 guesses a second.
 */
const TOKEN = 'wk-Tern-Granite-5521'
const lines: string[] = []

engineFree('the remote worker connection', () => {
  let hub: WorkerHub
  let url: string
  beforeAll(() => {
    hub = workerHub({
      host: '127.0.0.1',
      port: 0,
      heartbeatS: 10,
      missedHeartbeats: 3,
      resultTimeoutMs: 10_000,
      outbound: { allow: [], deny: [] },
      log: createLogger({ level: 'info', format: 'json', sensitive_fields: [] } as never, (l) =>
        lines.push(l),
      ),
      authenticate: workerToken(TOKEN),
      onCapacity: () => undefined,
    })
    url = `ws://127.0.0.1:${hub.start()}/api/v1/workers/connect`
  })
  afterAll(() => hub.stop())

  /** A connection with the token; the frames it received and how it closed. */
  const connect = async () => {
    const ws = new WebSocket(url, { headers: { authorization: `Bearer ${TOKEN}` } } as never)
    const got: Record<string, unknown>[] = []
    const closed = new Promise<number>((resolve) => ws.addEventListener('close', (e) => resolve(e.code)))
    ws.addEventListener('message', (e) => got.push(JSON.parse(String(e.data))))
    await new Promise((resolve, reject) => {
      ws.addEventListener('open', resolve)
      ws.addEventListener('error', reject)
    })
    return { ws, got, closed }
  }
  const hello = (id: string, capabilities: unknown = ['webhook']) =>
    JSON.stringify({ type: 'hello', worker_id: id, capabilities, concurrency: 4 })

  test('frames that had thrown out of the handler close their connection alone (4400); the hub serves on', async () => {
    for (const frame of ['null', '[]', hello('w-cap', [{ toString: 1 }]), hello('x'.repeat(129))]) {
      const c = await connect()
      c.ws.send(frame)
      expect(await c.closed).toBe(4400)
    }
    const c = await connect()
    c.ws.send(hello('w-after'))
    await until(() => c.got.length > 0)
    expect(c.got[0].type).toBe('welcome')
    expect(hub.list().workers.map((w) => w.worker_id)).toEqual(['w-after'])
    c.ws.close()
    await c.closed
  })

  test('a second hello on one connection closes it; a result whose error is no text, or a long one, is kept as a short text', async () => {
    const c = await connect()
    c.ws.send(hello('w-one'))
    await until(() => c.got.length > 0)
    const delivery = (id: string) => ({ id, provider: 'hook' }) as Delivery
    const channel = { name: 'hook', type: 'webhook', config: {}, trusted: false }
    const first = hub.dispatch(delivery('d-1'), channel)
    const second = hub.dispatch(delivery('d-2'), channel)
    await until(() => c.got.length >= 3)
    c.ws.send(JSON.stringify({ type: 'result', id: 'd-1', ok: false, error: { toString: 1 } }))
    c.ws.send(JSON.stringify({ type: 'result', id: 'd-2', ok: false, error: 'E'.repeat(MAX_FRAME - 100) }))
    expect(await first?.result).toEqual({ ok: false, retryable: true, error: 'worker reported a failure' })
    const long = await second?.result
    expect(long?.ok === false && long.error.length).toBe(2_000)
    c.ws.send(hello('w-two'))
    expect(await c.closed).toBe(4400)
    expect(hub.list().workers.map((w) => w.worker_id)).not.toContain('w-two')
  })

  test('a frame past MAX_FRAME closes its connection', async () => {
    const c = await connect()
    c.ws.send(hello('w-big'))
    await until(() => c.got.length > 0)
    c.ws.send(JSON.stringify({ type: 'heartbeat', pad: 'p'.repeat(MAX_FRAME) }))
    expect(await c.closed).not.toBe(1000)
  })

  test('past 20 refused attempts a minute an address is answered 429 unchecked, the right token too; logged once', async () => {
    const http = url.replace('ws:', 'http:')
    const before = lines.filter((l) => l.includes('wrong token')).length
    for (let i = 0; i < 20; i++)
      expect((await fetch(http, { headers: { authorization: `Bearer guess-${i}` } })).status).toBe(401)
    const r = await fetch(http, { headers: { authorization: `Bearer ${TOKEN}` } })
    expect([r.status, r.headers.get('retry-after')]).toEqual([429, '60'])
    expect(lines.filter((l) => l.includes('wrong token')).length - before).toBe(1)
  })

  test('the token in the URL is refused 401 and counted: past 20 a minute the address is answered 429', async () => {
    // A hub of its own: the test above used up this address's 20 refusals on the first.
    const hub2 = workerHub({
      host: '127.0.0.1',
      port: 0,
      heartbeatS: 10,
      missedHeartbeats: 3,
      resultTimeoutMs: 10_000,
      outbound: { allow: [], deny: [] },
      log: createLogger({ level: 'error', format: 'json', sensitive_fields: [] } as never, () => undefined),
      authenticate: workerToken(TOKEN),
      onCapacity: () => undefined,
    })
    const http = `http://127.0.0.1:${hub2.start()}/api/v1/workers/connect?token=${TOKEN}`
    try {
      for (let i = 0; i < 20; i++) {
        const r = await fetch(http)
        const body = await r.json()
        expect([r.status, body.message]).toEqual([
          401,
          'a remote worker sends notify.workers.remote.token in the Authorization: Bearer header, never in the URL (?token=), which proxies and access logs keep',
        ])
      }
      const r = await fetch(http.replace(/\?.*/, ''), { headers: { authorization: `Bearer ${TOKEN}` } })
      expect([r.status, r.headers.get('retry-after')]).toEqual([429, '60'])
    } finally {
      await hub2.stop()
    }
  })
})

engineFree('the worker token', () => {
  test('a remote worker token shorter than 16 characters does not start', async () => {
    await expect(
      makeApp('sqlite', {
        plugins: { notify: { workers: { remote: { enabled: true, port: 0, token: 'zq' } } } },
      }),
    ).rejects.toThrow(
      'plugins.notify.workers.remote.token (NOTIFY_WORKER_TOKEN): at least 16 characters, got 2',
    )
  })
})
