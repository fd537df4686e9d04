import { afterAll, beforeAll, expect, test } from 'bun:test'
import { NO_ANSWER } from '../../core/outbound'
import { type TestApp, forEachEngine, makeApp, until } from '../../test/helpers'
import { backoff } from './queue'
import { httpSink } from './testing'

test('backoff doubles per attempt, is capped, and keeps half of each step as jitter', () => {
  expect(backoff(1, 1000, 60_000, 0)).toBe(500)
  expect(backoff(1, 1000, 60_000, 1)).toBe(1000)
  expect(backoff(3, 1000, 60_000, 0)).toBe(2000)
  expect(backoff(20, 1000, 60_000, 1)).toBe(60_000)
})

forEachEngine((engine) => {
  let t: TestApp
  const seen = new Map<string, number>()
  // The title says how the sink answers: flaky-N fails N times with 503, then succeeds.
  const sink = httpSink(async (hit) => {
    const id = String(hit.body.id)
    const n = (seen.get(id) ?? 0) + 1
    seen.set(id, n)
    const title = String(hit.body.title)
    if (title.startsWith('flaky-'))
      return n <= Number(title.slice(6)) ? new Response('busy', { status: 503 }) : new Response('ok')
    if (title === 'always-500') return new Response('boom', { status: 500 })
    if (title === 'bad-400') return new Response('nope', { status: 400 })
    if (title === 'rate-429') return n === 1 ? new Response('slow down', { status: 429 }) : new Response('ok')
    if (title === 'slow') await Bun.sleep(400)
    return new Response('ok')
  })
  beforeAll(async () => {
    t = await makeApp(engine, {
      plugins: {
        'webhook-provider': {},
        notify: {
          auth: { enabled: false },
          channels: { hook: { type: 'webhook', url: sink.url, timeout_ms: 150 }, audit: { type: 'log' } },
          retry: { max_attempts: 3, base_ms: 20, max_ms: 40 },
        },
      },
    })
  })
  afterAll(async () => {
    await t.stop()
    sink.stop()
  })

  const send = async (title: string, extra: Record<string, unknown> = {}) =>
    (await t.req('POST', '/api/v1/notify', { body: { type: 'x', channel: 'hook', title, ...extra } })).body
      .data.task_ids[0] as string
  const finished = (id: string) =>
    until(async () => {
      const r = await t.req('GET', `/api/v1/logs/${id}`)
      return r.body.data.status !== 'pending' ? r.body.data : undefined
    })

  test('retryable errors (5xx, 429) retry with the same id until success', async () => {
    const a = await send('flaky-2')
    const b = await send('rate-429')
    const la = await finished(a)
    expect(la.status).toBe('success')
    expect(la.attempt_count).toBe(3)
    expect(la.attempts.map((x: { ok: boolean }) => x.ok)).toEqual([false, false, true])
    // The status alone: the delivery log never shows what the target answered.
    expect(la.attempts[0].error).toBe('unexpected status code: 503')
    expect(la.attempts[0].retryable).toBe(true)
    expect(seen.get(a)).toBe(3)
    expect((await finished(b)).status).toBe('success')
  }, 30_000)

  test('bounded attempts, then failed; a non-retryable 400 fails at once; a timeout is a retryable no answer', async () => {
    const a = await send('always-500')
    const b = await send('bad-400')
    const c = await send('slow')
    const la = await finished(a)
    expect(la.status).toBe('failed')
    expect(la.attempts).toHaveLength(3)
    expect(la.error).toBe('unexpected status code: 500')
    const lb = await finished(b)
    expect(lb.status).toBe('failed')
    expect(lb.attempts).toHaveLength(1)
    expect(lb.attempts[0].retryable).toBe(false)
    const lc = await finished(c)
    expect(lc.status).toBe('failed')
    expect(lc.attempts[0].error).toBe(NO_ANSWER)
  }, 30_000)

  test('GET /logs filters by status, provider, level, since and until, with offset and limit', async () => {
    await t.req('POST', '/api/v1/notify', {
      body: { type: 'x', channel: 'audit', level: 'critical', title: 'crit' },
    })
    const all = await until(async () => {
      const r = await t.req('GET', '/api/v1/logs?status=pending')
      return r.body.data.total === 0 ? r : undefined
    })
    expect(all?.status).toBe(200)
    const everything = (await t.req('GET', '/api/v1/logs')).body.data
    expect(everything.limit).toBe(50)
    expect(everything.offset).toBe(0)
    expect(everything.total).toBe(6)
    const failed = (await t.req('GET', '/api/v1/logs?status=failed')).body.data
    expect(failed.total).toBe(3)
    expect(failed.logs.every((l: { status: string }) => l.status === 'failed')).toBe(true)
    expect((await t.req('GET', '/api/v1/logs?provider=audit')).body.data.total).toBe(1)
    expect((await t.req('GET', '/api/v1/logs?provider=log')).body.data.total).toBe(1)
    expect((await t.req('GET', '/api/v1/logs?level=critical')).body.data.logs[0].title).toBe('crit')
    const page = (await t.req('GET', '/api/v1/logs?limit=2&offset=1')).body.data
    expect(page.logs).toHaveLength(2)
    expect(page.logs[0].id).toBe(everything.logs[1].id)
    const future = new Date(Date.now() + 60_000).toISOString()
    expect((await t.req('GET', `/api/v1/logs?since=${future}`)).body.data.total).toBe(0)
    expect((await t.req('GET', `/api/v1/logs?until=${future}`)).body.data.total).toBe(6)
  }, 30_000)

  test('GET /logs rejects bad parameters naming them', async () => {
    for (const [q, field] of [
      ['limit=501', 'query.limit'],
      ['limit=0', 'query.limit'],
      ['offset=-1', 'query.offset'],
      ['status=lost', 'query.status'],
      ['level=loud', 'query.level'],
      ['since=yesterday', 'query.since'],
      ['until=2024-13-99', 'query.until'],
    ]) {
      const r = await t.req('GET', `/api/v1/logs?${q}`)
      expect(r.status).toBe(400)
      expect(r.body.data.field).toBe(field)
    }
  }, 30_000)

  test('GET /logs/stats counts by status, provider and level, with success rate and latency percentiles', async () => {
    const s = (await t.req('GET', '/api/v1/logs/stats')).body.data
    expect(s.total).toBe(6)
    expect(s.by_status).toEqual({ success: 3, failed: 3, pending: 0, shadow: 0 })
    expect(s.by_provider.hook).toEqual({ total: 5, success: 2, failed: 3 })
    expect(s.by_level.critical.total).toBe(1)
    expect(s.success_rate).toBe(0.5)
    expect(s.latency_ms.p95).toBeGreaterThanOrEqual(s.latency_ms.p50)
    expect(s.latency_ms.samples).toBe(3)
    expect((await t.req('GET', '/api/v1/logs/stats?since=nope')).status).toBe(400)
  }, 30_000)

  test('GET /logs/{id} of an unknown id is 404', async () => {
    const r = await t.req('GET', '/api/v1/logs/01900000-0000-7000-8000-000000000000')
    expect(r.status).toBe(404)
    expect(r.body.code).toBe(404)
  }, 30_000)
})
