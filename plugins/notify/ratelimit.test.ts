import { afterAll, beforeAll, expect, test } from 'bun:test'
import { type TestApp, forEachEngine, makeApp } from '../../test/helpers'

forEachEngine((engine) => {
  let a: TestApp
  beforeAll(async () => {
    a = await makeApp(engine, {
      plugins: { notify: { auth: { enabled: true }, channels: { audit: { type: 'log' } } } },
      config: { rate_limit: { requests_per_minute: 3, burst: 0 } },
    })
  })
  afterAll(() => a.stop())

  test('notification routes count against the platform rate limit: headers, then 429 in the envelope', async () => {
    const t = await a.token('operator')
    const first = await a.req('GET', '/api/v1/queue', { token: t })
    expect(first.status).toBe(200)
    expect(first.headers.get('x-ratelimit-limit')).toBe('3')
    expect(first.headers.get('x-ratelimit-remaining')).toBe('2')
    await a.req('GET', '/api/v1/queue', { token: t })
    await a.req('GET', '/api/v1/providers', { token: t })
    const over = await a.req('GET', '/api/v1/queue', { token: t })
    expect(over.status).toBe(429)
    expect(over.headers.get('retry-after')).toBeTruthy()
    expect(over.body).toMatchObject({ code: 429, data: { limit: 3 } })
    // Another user has a budget of their own.
    expect((await a.req('GET', '/api/v1/queue', { token: await a.token('viewer') })).status).toBe(200)
  })
})
