import { afterAll, beforeAll, expect, test } from 'bun:test'
import { connect } from 'node:net'
import { SIGNALS } from '../../plugins/ingest/otlp/proto'
import { type TestApp, forEachEngine, makeApp, until } from '../helpers'
import { CONFIG, GAME, SECURITY_APP, allPluginsWith } from './lib'

/*
 * The eighteenth session's audits, replayed as their attackers made them, on every engine: an SDK
 * key (public, in every game client) sending event ids that differ by a trailing space (MariaDB's
 * PAD SPACE collation failed the group commit of every game's requests); one OTLP export with that
 * key holding the event loop for seconds (500,000 empty records, a resource of 20,000 attributes
 * copied into every record); names the schema took and MariaDB's keys did not (500).
 */
forEachEngine((engine) => {
  let a: TestApp
  let admin: string
  let gameId: string
  let key: string
  beforeAll(async () => {
    a = await makeApp(engine, { ...SECURITY_APP, plugins: allPluginsWith() })
    admin = await a.token('admin')
    gameId = (await a.req('POST', '/api/games', { token: admin, body: { ...GAME, name: 'Padded' } })).body.id
    key = (
      await a.req('POST', '/api/api-keys', {
        token: admin,
        body: { name: 'client', gameId, environment: 'prod' },
      })
    ).body.key
  })
  afterAll(() => a.stop())

  const batch = (events: object[]) =>
    a.req('POST', '/v1/batch', { headers: { 'x-api-key': key }, body: events })
  const ev = (event_id: string) => ({ event_id, event: 'tap', ts: new Date().toISOString(), user_id: 'u1' })

  test('event ids that differ only by trailing spaces are two events, in one batch and across batches', async () => {
    const first = await batch([ev('abc')])
    const second = await batch([ev('abc ')])
    const both = await batch([ev('x'), ev('x '), ev('x  ')])
    expect([first.status, second.status, both.status]).toEqual([200, 200, 200])
    expect(second.body.accepted).toEqual(['abc '])
    expect(both.body).toEqual({ accepted: ['x', 'x ', 'x  '], rejected: [] })
    // The same id again is the duplicate it is on every engine.
    expect((await batch([ev('abc ')])).status).toBe(200)
  })

  test("an OTLP export's cost is bounded before the work: 500,000 empty records, a resource of 129 attributes", async () => {
    const Logs = SIGNALS.logs.request
    const records = Logs.encode(
      Logs.fromObject({
        resourceLogs: [{ scopeLogs: [{ logRecords: Array.from({ length: 20_000 }, () => ({})) }] }],
      }),
    ).finish()
    const flood = await a.req('POST', '/v1/logs', {
      headers: { 'x-api-key': key, 'content-type': 'application/x-protobuf' },
      raw: Buffer.from(records),
    })
    // Answered as google.rpc.Status in protobuf, as the export came.
    expect([flood.status, String(flood.body)]).toEqual([
      413,
      expect.stringContaining('batch_too_large: body: at most 500 entries'),
    ])
    const attributes = Array.from({ length: 129 }, (_, i) => ({ key: `k${i}`, value: { stringValue: 'v' } }))
    const wide = await a.req('POST', '/v1/logs', {
      headers: { 'x-api-key': key },
      body: {
        resourceLogs: [
          { resource: { attributes }, scopeLogs: [{ logRecords: [{ body: { stringValue: 'tap' } }] }] },
        ],
      },
    })
    expect([wide.status, wide.body.message]).toEqual([
      400,
      expect.stringContaining('resourceLogs[0].resource.attributes: at most 128 attributes'),
    ])
  })

  test("a stranger's body sent without a length is refused before it is read (it was read whole first)", async () => {
    // The body never ends until the answer came: answered only after reading it, this would hang.
    let answered = () => {}
    const open = new Promise<void>((resolve) => {
      answered = resolve
    })
    const body = new ReadableStream<Uint8Array>({
      async start(c) {
        c.enqueue(new Uint8Array(64 * 1024).fill(0x20))
        await open
        c.close()
      },
    })
    const r = await fetch(`${a.listen()}/api/games`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body,
      duplex: 'half',
    } as RequestInit)
    answered()
    expect(r.status).toBe(401)
  })

  test('a short Host routes as its path says: the limits, CORS and the audit see the route that runs', async () => {
    const { port } = new URL(a.listen())
    const raw = (head: string, body = '') =>
      new Promise<string>((resolve, reject) => {
        const socket = connect(Number(port), '127.0.0.1', () => socket.write(`${head}\r\n\r\n${body}`))
        let got = ''
        socket.on('data', (d) => {
          got += d.toString('latin1')
        })
        socket.on('end', () => resolve(got.split('\r\n')[0] ?? ''))
        socket.on('error', reject)
      })
    const login = JSON.stringify({ email: 'x'.repeat(100_000), password: 'p' })
    const post = (path: string, host: string) =>
      raw(
        `POST ${path} HTTP/1.1\r\nHost: ${host}\r\nContent-Type: application/json\r\nContent-Length: ${login.length}\r\nConnection: close`,
        login,
      )
    // Elysia had routed `/zz/api/auth/login` as the login (past its 64 KB limit) under `Host: x`.
    expect(await post('/zz/api/auth/login', 'x')).toBe('HTTP/1.1 404 Not Found')
    expect(await post('/api/auth/login', 'x')).toBe('HTTP/1.1 413 Payload Too Large')
    expect(await raw('GET /healthz HTTP/1.1\r\nHost: ops\r\nConnection: close')).toBe('HTTP/1.1 200 OK')
  })

  test('a key made while its environment is deleted does not outlive it, nor reach the next one of the name', async () => {
    const env = (method: string) =>
      a.req(method, `/api/games/${gameId}/environments${method === 'POST' ? '' : '/race'}`, {
        token: admin,
        body: method === 'POST' ? { name: 'race', type: 'STAGING' } : undefined,
      })
    expect((await env('POST')).status).toBe(201)
    // The key's insert waits until the deletion (and its revocation of the env's keys) is done.
    const keys = a.auth.sdkKeys
    const create = keys.create
    let deleted = () => {}
    const gone = new Promise<void>((resolve) => {
      deleted = resolve
    })
    let entered = false
    keys.create = async (input) => {
      entered = true
      await gone
      return create.call(keys, input)
    }
    try {
      const made = a.req('POST', '/api/api-keys', {
        token: admin,
        body: { name: 'ci', gameId, environment: 'race' },
      })
      await until(() => entered, { what: 'the key being stored' })
      expect((await env('DELETE')).status).toBe(204)
      deleted()
      const r = await made
      expect(r.status).toBe(404)
    } finally {
      keys.create = create
    }
    expect((await env('POST')).status).toBe(201)
    const live = await a.req('GET', `/api/api-keys?gameId=${gameId}&environment=race`, { token: admin })
    expect(live.body.filter((k: { revokedAt?: string }) => !k.revokedAt)).toEqual([])
  })

  test('experiment and model names are 191 characters at most on every engine (a longer one was 500 on MariaDB)', async () => {
    const experiment = (name: string) =>
      a.req('POST', '/api/experiments', {
        token: admin,
        body: { gameId, environment: 'prod', name, config: CONFIG },
      })
    const model = (name: string) =>
      a.req('POST', '/api/ml-models', {
        token: admin,
        body: {
          gameId,
          name,
          type: 'CLASSIFICATION',
          algorithm: 'logistic_regression',
          framework: 'liveops',
        },
      })
    for (const create of [experiment, model]) {
      expect((await create('n'.repeat(191))).status).toBeOneOf([200, 201])
      const long = await create('m'.repeat(192))
      expect([long.status, long.body.message]).toEqual([400, expect.stringContaining('name')])
    }
  })
})
