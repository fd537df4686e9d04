import { afterAll, describe, expect, test } from 'bun:test'
import { join } from 'node:path'
import { ClientError, LiveopsClient, MAX_BACKOFF_MS, retryDelay } from './client'
import { bodyDigest, signRequest } from './sign'
import { uuidv7 } from './uuid'

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

describe('uuidv7', () => {
  test('version 7, variant 10, the time in its first 48 bits, increasing within one millisecond', () => {
    const t = Date.UTC(2026, 10, 24, 12)
    const ids = Array.from({ length: 50 }, () => uuidv7(t))
    for (const id of ids) {
      expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/)
      expect(Number.parseInt(id.replace('-', '').slice(0, 12), 16)).toBe(t)
    }
    expect(new Set(ids).size).toBe(50)
    // The counter starts below 0x800 each millisecond, so 50 ids never wrap it.
    expect([...ids].sort()).toEqual(ids)
    expect(uuidv7(t + 1) > ids[ids.length - 1]).toBe(true)
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
    // Each event carries a UUIDv7 event_id, the same in every attempt: the server stores a retry once.
    const ids = calls.map((x) => (x.body as Array<{ event_id: string }>).map((e) => e.event_id))
    expect(ids[0][0]).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/)
    expect(ids[0][0]).not.toBe(ids[0][1])
    expect(ids[1]).toEqual(ids[0])
    expect(ids[2]).toEqual(ids[0])
  })

  test('an event_id given in the attributes is kept', async () => {
    calls.length = 0
    const c = new LiveopsClient({
      endpoint: 'http://h',
      gameId: 'g',
      env: 'prod',
      secret: 's',
      flushIntervalMs: 0,
      flushOnExit: false,
      fetch: fetchWith([]),
    })
    c.track('a', { event_id: 'mine' })
    await c.flush()
    expect(calls[0].body[0]).toMatchObject({ event_id: 'mine' })
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
    const deadline = Date.now() + 2000
    while (!calls.length && Date.now() < deadline) await Bun.sleep(1)
    expect(calls.map((x) => x.url)).toEqual(['http://h/api/ingest/payments'])
    expect(calls[0].body[0]).toMatchObject({ order_id: 'o1', status: 'success', amount_cents: 99 })
    expect(() => new LiveopsClient({ endpoint: 'http://h', gameId: 'g', env: 'p' })).toThrow()
  })

  test('with an API key and a secret, events go to /v1/batch and payments are still signed', async () => {
    calls.length = 0
    const c = new LiveopsClient({
      endpoint: 'http://h',
      gameId: 'g',
      env: 'prod',
      apiKey: 'lok_k',
      secret: 's',
      flushIntervalMs: 0,
      flushOnExit: false,
      fetch: fetchWith([]),
    })
    c.track('tap')
    c.payment({ orderId: 'o2', status: 'success', amountCents: 5 })
    await c.flush()
    expect(calls.map((x) => x.url).sort()).toEqual(['http://h/api/ingest/payments', 'http://h/v1/batch'])
    const pay = calls.find((x) => x.url.endsWith('/payments'))!
    expect(pay.headers['X-Signature']).toBeString()
    expect(pay.headers['x-api-key']).toBeUndefined()
    expect(calls.find((x) => x.url.endsWith('/v1/batch'))!.headers['x-api-key']).toBe('lok_k')
  })
})

/**
 * A local ingestion server on 127.0.0.1 with the server's signing rule (plugins/ingest/signed/service.ts
 * `signatureError`): `X-Game-Id` picks that game's secret from `gameSecrets`, else the shared
 * secret; with the header every event must name that game. It checks signatures on its own (not
 * with sdk/sign.ts) and records every request and every stored event.
 */
function ingestServer(shared: string, gameSecrets: Record<string, string> = {}) {
  const requests: Array<{ path: string; headers: Headers; status: number }> = []
  const stored: Array<Record<string, unknown>> = []
  const server = Bun.serve({
    hostname: '127.0.0.1',
    port: 0,
    async fetch(req) {
      const body = await req.text()
      const h = req.headers
      const answer = (status: number, json: unknown) => {
        requests.push({ path: new URL(req.url).pathname, headers: h, status })
        return Response.json(json, { status })
      }
      const gameId = h.get('x-game-id')
      const secret = (gameId && gameSecrets[gameId]) || shared
      const digest = new Bun.CryptoHasher('sha256').update(body).digest('hex')
      const expected = new Bun.CryptoHasher('sha256', secret)
        .update(`${h.get('x-timestamp')}\n${h.get('x-nonce')}\n${digest}`)
        .digest('base64')
      if (h.get('x-signature') !== expected) return answer(401, { error: 'bad_signature' })
      const events = JSON.parse(body) as Array<Record<string, unknown>>
      if (gameId && events.some((e) => e.game_id !== gameId)) return answer(400, { error: 'invalid_events' })
      stored.push(...events)
      return answer(200, { ok: true, accepted: events.length })
    },
  })
  return { url: `http://127.0.0.1:${server.port}`, requests, stored, stop: () => server.stop(true) }
}

describe('LiveopsClient against a local server', () => {
  const srv = ingestServer('shared-secret', { 'game-a': 'secret-a' })
  afterAll(() => srv.stop())
  // Statuses of the batches given up on (-1: not a ClientError).
  const client = (o: { gameId: string; secret: string; perGameSecret?: boolean }, errors: number[]) =>
    new LiveopsClient({
      endpoint: srv.url,
      env: 'prod',
      flushIntervalMs: 0,
      maxRetries: 0,
      flushOnExit: false,
      onError: (e) => errors.push(e instanceof ClientError ? e.status : -1),
      ...o,
    })

  test('perGameSecret sends X-Game-Id: a game signing with its own secret is stored; without the header, 401', async () => {
    srv.requests.length = 0
    srv.stored.length = 0
    const errors: number[] = []
    const own = client({ gameId: 'game-a', secret: 'secret-a', perGameSecret: true }, errors)
    own.track('login', { level: 1 })
    own.track('tap')
    await own.close()
    expect(errors).toEqual([])
    expect(own.acknowledged).toBe(2)
    expect(srv.requests.map((r) => [r.path, r.status, r.headers.get('x-game-id')])).toEqual([
      ['/api/ingest/events', 200, 'game-a'],
    ])
    expect(srv.stored).toMatchObject([
      { event: 'login', game_id: 'game-a', attrs: { level: 1 } },
      { event: 'tap', game_id: 'game-a' },
    ])

    // The same game and secret without the header: the server checks it against the shared secret.
    const bare = client({ gameId: 'game-a', secret: 'secret-a' }, errors)
    bare.track('login')
    await bare.close()
    expect(bare.acknowledged).toBe(0)
    expect(errors).toEqual([401])
    expect(srv.requests[1].headers.get('x-game-id')).toBeNull()
    expect(srv.stored).toHaveLength(2)

    // The shared secret still works without it; perGameSecret needs a secret.
    const shared = client({ gameId: 'game-b', secret: 'shared-secret' }, errors)
    shared.payment({ orderId: 'o1', status: 'success', amountCents: 99 })
    await shared.close()
    expect(shared.acknowledged).toBe(1)
    expect(srv.requests[2].path).toBe('/api/ingest/payments')
    expect(
      () => new LiveopsClient({ endpoint: srv.url, gameId: 'g', env: 'p', apiKey: 'k', perGameSecret: true }),
    ).toThrow('perGameSecret needs the secret')
  })

  test('flushes on exit: a child process that only tracks delivers its events when it ends', async () => {
    const exit = ingestServer('exit-secret')
    try {
      const child = Bun.spawn([process.execPath, join(import.meta.dir, 'flush-on-exit.fixture.ts')], {
        env: { ...process.env, LIVEOPS_URL: exit.url, LIVEOPS_EVENTS: '3' },
        stdout: 'pipe',
        stderr: 'pipe',
      })
      const [code, out, err] = await Promise.all([
        child.exited,
        new Response(child.stdout).text(),
        new Response(child.stderr).text(),
      ])
      expect({ code, err }).toEqual({ code: 0, err: '' })
      expect(exit.requests.map((r) => [r.path, r.status])).toEqual([['/api/ingest/events', 200]])
      expect(exit.stored.map((e) => (e.attrs as { i: number }).i)).toEqual([0, 1, 2])
      expect(JSON.parse(out)).toEqual({ acknowledged: 3 })
    } finally {
      exit.stop()
    }
  })
})

describe('backoff', () => {
  test('retryDelay: doubles per attempt from backoffMs, jitter over the upper half, capped at 30 s', () => {
    const low = Array.from({ length: 6 }, (_, i) => retryDelay(i, 100, () => 0))
    const high = Array.from({ length: 6 }, (_, i) => retryDelay(i, 100, () => 0.999))
    expect(low).toEqual([50, 100, 200, 400, 800, 1600])
    high.forEach((d, i) => expect(d).toBeCloseTo(100 * 2 ** i * 0.9995, 6))
    expect(retryDelay(2, 100, () => 0.5)).toBe(300)
    expect(retryDelay(20, 200, () => 0)).toBe(MAX_BACKOFF_MS / 2)
    expect(retryDelay(20, 200, () => 0.999)).toBeLessThan(MAX_BACKOFF_MS)
    expect(retryDelay(1000, 200, () => 0.999)).toBeLessThan(MAX_BACKOFF_MS)
    expect(MAX_BACKOFF_MS).toBe(30_000)
  })

  test('the client waits a growing, jittered, bounded delay between retries; Retry-After wins when longer', async () => {
    const waits: number[] = []
    let answers = [503, 503, 503, 503, 503, 503]
    const c = new LiveopsClient({
      endpoint: 'http://h',
      gameId: 'g',
      env: 'prod',
      secret: 's',
      flushIntervalMs: 0,
      backoffMs: 100,
      maxRetries: 5,
      flushOnExit: false,
      sleep: async (ms) => void waits.push(ms),
      fetch: async () => {
        const status = answers.shift() ?? 200
        return new Response('{}', { status, headers: status === 429 ? { 'retry-after': '7' } : {} })
      },
    })
    c.track('x')
    await c.flush()
    // Six attempts, five waits: attempt i waits in [100 * 2^i / 2, 100 * 2^i).
    expect(waits).toHaveLength(5)
    waits.forEach((w, i) => {
      expect(w).toBeGreaterThanOrEqual(50 * 2 ** i)
      expect(w).toBeLessThan(100 * 2 ** i)
    })
    for (let i = 1; i < waits.length; i++) expect(waits[i]).toBeGreaterThan(waits[i - 1])
    // Jitter: the waits are not the bare schedule scaled by one constant factor.
    expect(new Set(waits.map((w, i) => w / 2 ** i)).size).toBeGreaterThan(1)

    // A 429 asking for 7 s waits 7 s; a later 503 goes back to the exponential schedule.
    waits.length = 0
    answers = [429, 503]
    c.track('y')
    await c.flush()
    expect(waits[0]).toBe(7000)
    expect(waits[1]).toBeGreaterThanOrEqual(100)
    expect(waits[1]).toBeLessThan(200)
    expect(c.acknowledged).toBe(1)
  })
})
