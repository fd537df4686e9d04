import { describe, expect, test } from 'bun:test'
import { LiveopsClient } from './client'
import { bodyDigest, signRequest } from './sign'

describe('signRequest', () => {
  test('matches HMAC-SHA256 over timestamp, nonce and the lowercase hex body digest, base64', async () => {
    const body = '[{"event":"login"}]'
    const h = await signRequest('secret', body, { timestamp: 1700000000, nonce: 'abc' })
    const digest = new Bun.CryptoHasher('sha256').update(body).digest('hex')
    expect(await bodyDigest(body)).toBe(digest)
    const expected = new Bun.CryptoHasher('sha256', 'secret')
      .update(`1700000000\nabc\n${digest}`)
      .digest('base64')
    expect(h).toEqual({ 'X-Timestamp': '1700000000', 'X-Nonce': 'abc', 'X-Signature': expected })
    const other = await signRequest('secret', body)
    expect(other['X-Nonce']).toMatch(/^[0-9a-f]{32}$/)
  })
})

describe('LiveopsClient', () => {
  const calls: Array<{ url: string; headers: Record<string, string>; body: unknown[] }> = []
  const fetchWith = (answers: number[]) => async (url: string, init: RequestInit) => {
    calls.push({ url, headers: init.headers as Record<string, string>, body: JSON.parse(String(init.body)) })
    const status = answers.shift() ?? 200
    return new Response(status === 200 ? '{"ok":true}' : '{"error":"x"}', {
      status,
      headers: status === 429 ? { 'retry-after': '0' } : {},
    })
  }

  test('batches by size, signs each attempt freshly and retries 5xx and 429 with backoff', async () => {
    calls.length = 0
    const c = new LiveopsClient({
      endpoint: 'http://h/',
      gameId: 'g',
      env: 'prod',
      secret: 's',
      batchSize: 2,
      flushIntervalMs: 0,
      backoffMs: 1,
      flushOnExit: false,
      fetch: fetchWith([503, 429]),
    })
    c.identify('u1')
    c.track('a')
    c.track('b')
    await c.flush()
    expect(calls).toHaveLength(3)
    expect(calls[0].url).toBe('http://h/api/ingest/events')
    expect(new Set(calls.map((x) => x.headers['X-Nonce'])).size).toBe(3)
    expect(calls[2].body).toMatchObject([
      { event: 'a', game_id: 'g', env: 'prod', uid: 'u1' },
      { event: 'b' },
    ])
    expect(typeof (calls[2].body[0] as { ts: unknown }).ts).toBe('string')
    expect(c.acknowledged).toBe(2)
  })

  test('gives up on a 400 at once and on retryable errors after maxRetries, reporting the batch', async () => {
    calls.length = 0
    const errors: number[] = []
    const c = new LiveopsClient({
      endpoint: 'http://h',
      gameId: 'g',
      env: 'prod',
      apiKey: 'k',
      flushIntervalMs: 0,
      backoffMs: 1,
      maxRetries: 2,
      flushOnExit: false,
      fetch: fetchWith([400, 500, 500, 500]),
      onError: (_e, n) => errors.push(n),
    })
    c.track('x', { level: 1 })
    await c.flush()
    c.track('y')
    await c.flush()
    expect(errors).toEqual([1, 1])
    expect(calls).toHaveLength(4)
    expect(calls[0].url).toBe('http://h/v1/batch')
    expect(calls[0].headers['x-api-key']).toBe('k')
    expect(calls[0].body[0]).toMatchObject({ event_name: 'x', level: 1, event_id: expect.any(String) })
  })

  test('payments go to the payments endpoint; flush on interval', async () => {
    calls.length = 0
    const c = new LiveopsClient({
      endpoint: 'http://h',
      gameId: 'g',
      env: 'prod',
      secret: 's',
      flushIntervalMs: 5,
      flushOnExit: false,
      fetch: fetchWith([]),
    })
    c.payment({ orderId: 'o1', status: 'success', amountCents: 99, currency: 'USD' })
    await Bun.sleep(30)
    expect(calls.map((x) => x.url)).toEqual(['http://h/api/ingest/payments'])
    expect(calls[0].body[0]).toMatchObject({ order_id: 'o1', status: 'success', amount_cents: 99 })
    expect(() => new LiveopsClient({ endpoint: 'http://h', gameId: 'g', env: 'p' })).toThrow()
  })
})
