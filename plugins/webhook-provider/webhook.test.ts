import { afterAll, beforeAll, expect, test } from 'bun:test'
import { DEFAULT_TIMEOUT_MS, webhookProvider } from '.'
import { createLogger } from '../../core/log'
import { NO_ANSWER } from '../../core/outbound'
import type { Delivery } from '../../core/plugin'
import { type TestApp, forEachEngine, loopbackOutbound, makeApp, until } from '../../test/helpers'
import { expandEnv } from '../notify/settings'
import { httpSink } from '../notify/testing'

const log = createLogger({
  level: 'error',
  format: 'json',
  max_size: 1,
  max_backups: 0,
  max_age: 0,
  sensitive_fields: [],
})
const delivery: Delivery = {
  id: '01900000-0000-7000-8000-000000000001',
  provider: 'hook',
  level: 'error',
  targets: ['group:ops', 'user:ann'],
  recipients: [],
  timestamp: '2026-01-01T00:00:00.000Z',
  title: 'T',
  body: 'B',
  raw: { type: 'x', params: { a: 1 } },
}
const make = (settings: Record<string, unknown>) =>
  webhookProvider.create(settings as never, { log, outbound: loopbackOutbound })

let status = 200
const sink = httpSink(async (hit) => {
  if (hit.path === '/slow') await Bun.sleep(300)
  return new Response(status === 200 ? 'fine' : `answer ${status}`, { status })
})
afterAll(() => sink.stop())

test('POST sends the spec payload as JSON; configured headers apply and may override Content-Type', async () => {
  status = 200
  const p = await make({
    url: sink.url,
    headers: { Authorization: 'Bearer x', 'Content-Type': 'application/vnd.custom+json' },
  })
  expect(await p.send(delivery)).toEqual({ ok: true })
  const hit = sink.hits.at(-1)!
  expect(hit.method).toBe('POST')
  expect(hit.headers.authorization).toBe('Bearer x')
  expect(hit.headers['content-type']).toBe('application/vnd.custom+json')
  expect(hit.body).toEqual({
    id: delivery.id,
    provider: 'hook',
    level: 'error',
    targets: delivery.targets,
    timestamp: delivery.timestamp,
    title: 'T',
    body: 'B',
    raw: delivery.raw,
  })
  expect(Object.keys(hit.body)).toEqual([
    'id',
    'provider',
    'level',
    'targets',
    'timestamp',
    'title',
    'body',
    'raw',
  ])
})

test('PUT works; GET and DELETE fail with "method X not yet implemented"', async () => {
  const put = await make({ url: sink.url, method: 'PUT' })
  expect(await put.send(delivery)).toEqual({ ok: true })
  expect(sink.hits.at(-1)!.method).toBe('PUT')
  expect(sink.hits.at(-1)!.headers['content-type']).toBe('application/json')
  for (const method of ['GET', 'DELETE']) {
    const p = await make({ url: sink.url, method })
    expect(await p.send(delivery)).toEqual({
      ok: false,
      retryable: false,
      error: `method ${method} not yet implemented`,
    })
  }
})

test('creation fails with "webhook: url is required" without url; a URL needs its scheme and is never echoed', async () => {
  expect(() => make({})).toThrow('webhook: url is required')
  expect(() => make({ url: '' })).toThrow('webhook: url is required')
  expect(() => make({ url: 'example.com/hook' })).toThrow('not a full URL with scheme')
  let message = ''
  try {
    await make({ url: 'x-secret-value-9876' })
  } catch (e) {
    message = (e as Error).message
  }
  expect(message).toContain('not a full URL')
  expect(message).not.toContain('9876')
})

test('$VAR expands top-level strings only; header values and the braced form are left alone', async () => {
  expect(
    expandEnv(
      { url: '$HOOK', method: '$M', headers: { a: '$HOOK' }, other: '${HOOK}' },
      { HOOK: 'http://h', M: 'PUT' },
      'all',
      'body',
    ),
  ).toEqual({
    url: 'http://h',
    method: 'PUT',
    headers: { a: '$HOOK' },
    other: '${HOOK}',
  })
  // Only listed variables when the settings came through the API; the refusal names the field, not the value.
  expect(() =>
    expandEnv({ url: '$JWT_SECRET' }, { JWT_SECRET: 'abc-secret' }, (n) => n === 'HOOK', 'body'),
  ).toThrow("body.config.url: '$JWT_SECRET' is not a variable the API may name")
  const p = await make(
    expandEnv(
      { url: '$LIVEOPS_TEST_HOOK_URL', headers: { 'X-Token': '$LIVEOPS_TEST_HOOK_URL' } },
      { LIVEOPS_TEST_HOOK_URL: sink.url },
      'all',
      'body',
    ),
  )
  status = 200
  expect(await p.send(delivery)).toEqual({ ok: true })
  expect(sink.hits.at(-1)!.headers['x-token']).toBe('$LIVEOPS_TEST_HOOK_URL')
})

test('non-2xx answers: "unexpected status code: N", never the body; 408, 429 and 5xx are retryable, other 4xx not', async () => {
  const p = await make({ url: sink.url })
  for (const [code, retryable] of [
    [404, false],
    [400, false],
    [408, true],
    [429, true],
    [500, true],
    [503, true],
  ] as const) {
    status = code
    expect(await p.send(delivery)).toEqual({
      ok: false,
      retryable,
      error: `unexpected status code: ${code}`,
    })
  }
  status = 200
})

test('a timeout and a refused port read the same (no port scanner); both retryable; default timeout 30 s', async () => {
  expect(DEFAULT_TIMEOUT_MS).toBe(30_000)
  const slow = await make({ url: sink.url.replace('/hook', '/slow'), timeout_ms: 50 })
  expect(await slow.send(delivery)).toEqual({ ok: false, retryable: true, error: NO_ANSWER })
  const dead = Bun.serve({ port: 0, hostname: '127.0.0.1', fetch: () => new Response() })
  const port = dead.port
  dead.stop(true)
  const refused = await make({ url: `http://127.0.0.1:${port}/x` })
  expect(await refused.send(delivery)).toEqual({ ok: false, retryable: true, error: NO_ANSWER })
})

forEachEngine((engine) => {
  let t: TestApp
  beforeAll(async () => {
    t = await makeApp(engine, {
      plugins: {
        notify: { auth: { enabled: false }, channels: { hook: { type: 'webhook', url: sink.url } } },
        'webhook-provider': {},
      },
    })
  })
  afterAll(() => t.stop())

  test('the plugin registers the webhook type: a notify reaches the endpoint; a PUT without url answers 400 with the spec message', async () => {
    status = 200
    const r = await t.req('POST', '/api/v1/notify', {
      body: { type: 'x', channel: 'hook', title: 'via app' },
    })
    expect(await until(() => sink.hits.some((h) => h.body.id === r.body.data.task_ids[0]))).toBe(true)
    const bad = await t.req('PUT', '/api/v1/config/hook', { body: { config: { headers: {} } } })
    expect(bad.status).toBe(400)
    expect(bad.body.message).toBe("channel 'hook': webhook: url is required")
    const badMethod = await t.req('PUT', '/api/v1/config/hook', {
      body: { config: { url: sink.url, method: 'PATCH' } },
    })
    expect(badMethod.status).toBe(400)
    expect(badMethod.body.data.field).toBe('body.config.method')
  })
})
