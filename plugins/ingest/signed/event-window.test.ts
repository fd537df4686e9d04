import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { TS_MAX } from '../../../core/event-bounds'
import { type TestApp, engineFree, forEachEngine, makeApp } from '../../../test/helpers'
import { DAY, OUTSIDE_WINDOW, SECRET, game, ingestApp, signed } from '../testing'
import { eventWindow } from './validate'

/**
 * Audit 19 M4: an event's time is taken only within `max_event_age_days` before and
 * `max_event_future_s` after the receive time. One SDK key sent times from 1970 to 9999: each day
 * named became rollup rows no purge reaches (a future day escapes every `< cutoff` purge), and a
 * 1970 event made its user's first day 1970. Refused per event as every other bad field is: the
 * signed routes refuse the batch listing index and field, `/v1/batch` and OTLP list the item.
 */
const EPOCH_1970 = '1000'
const AGENT_TOKEN = 'event-window-agent-token'
const YEAR_9999 = String(Date.UTC(9999, 5, 1))

forEachEngine((engine) => {
  let a: TestApp
  let admin: string
  let gameId: string
  let key: string
  const ev = (event: string, ts: number | string, extra: Record<string, unknown> = {}) => ({
    event,
    ts: String(ts),
    game_id: gameId,
    env: 'prod',
    ...extra,
  })
  const stored = async (event: string) =>
    Number(
      (await a.db.get<{ n: number }>('SELECT COUNT(*) AS n FROM ingest_events WHERE event = ?', [event]))
        ?.n ?? 0,
    )
  const batch = (items: unknown[]) =>
    a.req('POST', '/v1/batch', {
      raw: JSON.stringify(items),
      headers: { 'x-api-key': key, 'content-type': 'application/json' },
    })

  beforeAll(async () => {
    ;({ a, admin, gameId } = await ingestApp(engine, { agents: { token: AGENT_TOKEN } }))
    const k = await a.req('POST', '/api/api-keys', {
      token: admin,
      body: { name: 'sdk', gameId, environment: 'prod' },
    })
    expect(k.status).toBe(201)
    key = k.body.key
  })
  afterAll(() => a.stop())

  describe('event times outside the window', () => {
    test('signed: a 1970 and a year-9999 event refuse the batch naming ts; nothing stored', async () => {
      for (const path of ['/api/ingest/events', '/api/ingest/payments']) {
        // A payments route takes events named payment only (audit 19 L5).
        const pay = (order: string) =>
          path.endsWith('payments')
            ? { event: 'payment', order_id: order, status: 'success', amount_cents: 99 }
            : {}
        const r = await signed(a, path, [
          ev('w_fine', Date.now(), pay('o-fine')),
          ev('w_1970', EPOCH_1970, pay('o-1970')),
          ev('w_9999', YEAR_9999, pay('o-9999')),
        ])
        expect(r.status).toBe(400)
        expect(r.body.error).toBe('invalid_events')
        expect(r.body.details.errors).toEqual([
          { index: 1, field: 'ts', reason: expect.stringMatching(OUTSIDE_WINDOW) },
          { index: 2, field: 'ts', reason: expect.stringMatching(OUTSIDE_WINDOW) },
        ])
        expect(r.body.message).toContain('[1].ts: must be epoch milliseconds from ')
      }
      for (const e of ['w_fine', 'w_1970', 'w_9999', 'payment']) expect(await stored(e)).toBe(0)
    })

    test('/v1/batch: each item outside the window is rejected naming ts_client; the rest stored', async () => {
      const r = await batch([
        { event_id: 'b1', event_name: 'b_now', user_id: 'u1', ts_client: Date.now() },
        { event_id: 'b2', event_name: 'b_1970', user_id: 'u1', ts_client: 1000 },
        { event_id: 'b3', event_name: 'b_1970_iso', user_id: 'u1', ts_client: '1970-01-02T00:00:00Z' },
        { event_id: 'b4', event_name: 'b_9999', user_id: 'u1', ts_client: YEAR_9999 },
      ])
      expect(r.status).toBe(200)
      expect(r.body.accepted).toEqual(['b1'])
      expect(r.body.rejected).toEqual(
        ['b2', 'b3', 'b4'].map((id) => ({ event_id: id, reason: expect.stringMatching(OUTSIDE_WINDOW) })),
      )
      for (const x of r.body.rejected) expect(x.reason.startsWith('ts_client: ')).toBe(true)
      expect(await stored('b_now')).toBe(1)
      for (const e of ['b_1970', 'b_1970_iso', 'b_9999']) expect(await stored(e)).toBe(0)
    })

    test('OTLP logs: a record timed 1970 is rejected in partial_success, the other kept', async () => {
      const record = (name: string, ms: number) => ({
        timeUnixNano: `${ms}000000`,
        body: { stringValue: name },
        attributes: [{ key: 'user.id', value: { stringValue: 'o1' } }],
      })
      const r = await a.req('POST', '/v1/logs', {
        raw: JSON.stringify({
          resourceLogs: [{ scopeLogs: [{ logRecords: [record('o_now', Date.now()), record('o_1970', 5)] }] }],
        }),
        headers: { 'x-api-key': key, 'content-type': 'application/json' },
      })
      expect(r.status).toBe(200)
      expect(r.body.partialSuccess.rejectedLogRecords).toBe(1)
      expect(r.body.partialSuccess.errorMessage).toMatch(/^1: ts_client: must be epoch milliseconds from /)
      expect(await stored('o_now')).toBe(1)
      expect(await stored('o_1970')).toBe(0)
    })

    test('server-side writes: a 1970 event is 400 naming body index and ts', async () => {
      const r = await a.req('POST', '/api/v1/analytics/ingest', {
        token: admin,
        body: [ev('s_now', Date.now()), ev('s_1970', EPOCH_1970)],
      })
      expect(r.status).toBe(400)
      expect(r.body.details.errors).toEqual([
        { index: 1, field: 'ts', reason: expect.stringMatching(OUTSIDE_WINDOW) },
      ])
      expect(await stored('s_now')).toBe(0)
    })

    test("agents' invocation reports: a call timed 1970 or 9999 is 400 naming body.invocations[i].ts", async () => {
      const agent = (method: string, path: string, body: unknown) =>
        a.req(method, path, { body, headers: { 'x-agent-token': AGENT_TOKEN } })
      const reg = await agent('POST', '/api/v1/agents', {
        agent_id: 'edge-window-01',
        game_id: gameId,
        env: 'prod',
        region: 'ap',
        zone: 'ap-1',
        functions: ['grant.item'],
      })
      expect(reg.status).toBe(201)
      const call = (ts: number) => ({ function_id: 'grant.item', outcome: 'success', ts })
      for (const ts of [Number(EPOCH_1970), Number(YEAR_9999)]) {
        const r = await agent('POST', '/api/v1/agents/edge-window-01/invocations', {
          invocations: [call(Date.now()), call(ts)],
        })
        expect(r.status).toBe(400)
        expect(r.body.message).toMatch(/^body\.invocations\[1\]\.ts: must be epoch milliseconds from /)
      }
      expect(await stored('function.invoke')).toBe(0)
      const ok = await agent('POST', '/api/v1/agents/edge-window-01/invocations', {
        invocations: [call(Date.now() - 300 * DAY), call(Date.now() + 3_600_000)],
      })
      expect(ok.status).toBe(202)
      expect(await stored('function.invoke')).toBe(2)
    })
  })

  describe('event times inside the window', () => {
    test('an event 300 days old and one 1 hour ahead are accepted, on every route', async () => {
      const old = Date.now() - 300 * DAY
      const ahead = Date.now() + 3_600_000
      const r = await signed(a, '/api/ingest/events', [ev('in_old', old), ev('in_ahead', ahead)])
      expect(r.status).toBe(200)
      const b = await batch([
        { event_id: 'i1', event_name: 'in_old_b', ts_client: old },
        { event_id: 'i2', event_name: 'in_ahead_b', ts_client: new Date(ahead).toISOString() },
      ])
      expect(b.body).toEqual({ accepted: ['i1', 'i2'], rejected: [] })
      for (const e of ['in_old', 'in_ahead', 'in_old_b', 'in_ahead_b']) expect(await stored(e)).toBe(1)
    })
  })

  describe('the settings', () => {
    let wide: TestApp
    beforeAll(async () => {
      // 1,000 days back, none ahead.
      wide = await makeApp(engine, {
        plugins: {
          games: {},
          ingest: {
            signing_secret: SECRET,
            purge_interval_minutes: 0,
            max_event_age_days: 1000,
            max_event_future_s: 0,
          },
          analytics: {},
        },
      })
    })
    afterAll(() => wide.stop())

    test('max_event_age_days and max_event_future_s are honoured', async () => {
      const token = await wide.token('admin')
      const g = await wide.req('POST', '/api/games', { token, body: game })
      expect(g.status).toBe(201)
      const at = (ts: number) => [{ event: 'set', ts: String(ts), game_id: g.body.id, env: 'prod' }]
      expect((await signed(wide, '/api/ingest/events', at(Date.now() - 900 * DAY))).status).toBe(200)
      const ahead = await signed(wide, '/api/ingest/events', at(Date.now() + 60_000))
      expect(ahead.status).toBe(400)
      expect(ahead.body.details.errors[0].reason).toContain('max_event_future_s 0 s ahead')
      const old = await signed(wide, '/api/ingest/events', at(Date.now() - 1001 * DAY))
      expect(old.body.details.errors[0].reason).toContain('max_event_age_days 1000 days old')
    })
  })
})

engineFree('eventWindow', () => {
  test('the window never passes TS_MAX nor 1970, whatever the settings', () => {
    const w = eventWindow({ max_event_age_days: 10_000_000, max_event_future_s: 1e12 }, Date.now())
    expect([w.min, w.max]).toEqual([0, TS_MAX])
  })
})
