import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { type TestApp, forEachEngine, makeApp } from '../helpers'

// Issue 38 point 2, spec 3 "Health response: {status, checks: {database, redis, agents}}": redis is
// always there: `disabled` without Redis (test/core/http.test.ts), else up or down with latency.

const REDIS = process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379'

forEachEngine((engine) => {
  describe('redis configured and answering', () => {
    let a: TestApp
    beforeAll(async () => {
      a = await makeApp(engine, { config: { redis: { url: REDIS } } })
    })
    afterAll(() => a.stop())

    test('checks.redis is up with its latency', async () => {
      const r = await a.req('GET', '/healthz')
      expect(r.status).toBe(200)
      expect(r.body.checks.redis).toEqual({ status: 'up', latency_ms: expect.any(Number) })
    })
  })

  describe('redis configured and not answering', () => {
    let a: TestApp
    beforeAll(async () => {
      // Port 1 on loopback: nothing listens, the connection is refused at once.
      a = await makeApp(engine, { config: { redis: { url: 'redis://127.0.0.1:1' } } })
    })
    afterAll(() => a.stop())

    test('checks.redis is down with its latency and error; the instance stays ready', async () => {
      const viewer = await a.token('viewer')
      for (const path of ['/healthz', '/readyz']) {
        const r = await a.req('GET', path, { token: viewer })
        expect(r.status).toBe(200)
        // Refused, so down at once: not held until the check's bound (a client reconnecting on its
        // own had kept every health read waiting 1.5 s and answered its timeout). Read before
        // toMatchObject, which leaves its matchers in the object it is given.
        expect(String(r.body.checks.redis.error)).not.toContain('timed out')
        expect(r.body.checks.redis).toMatchObject({
          status: 'down',
          latency_ms: expect.any(Number),
          error: expect.any(String),
        })
        // Without credentials: the same status and figures, not the error's text.
        const anon = await a.req('GET', path)
        expect(anon.status).toBe(200)
        expect(anon.body.checks.redis).toEqual({ status: 'down', latency_ms: expect.any(Number) })
      }
    })
  })
})
