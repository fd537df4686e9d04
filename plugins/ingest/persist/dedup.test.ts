import { afterAll, beforeAll, expect, test } from 'bun:test'
import { createLogger } from '../../../core/log'
import { type TestApp, forEachEngine } from '../../../test/helpers'
import { analyticsTables, derive } from '../../analytics/store/testing'
import { checked } from '../signed/collect'
import { purgeEventIds } from '../store/store'
import { DAY, game, ingestApp, migratedStore, signed } from '../testing'
import { GroupWriter } from './writer'

/**
 * Event deduplication (issue 17 point 4): an event carrying an `event_id` is stored, and counted
 * by the log's consumers, once per game and environment within the dedup window, however a retrying
 * client sends it again: in the same batch, in another batch, after a restart, to another
 * instance on the same store. Events without an id are stored as sent.
 */

const log = createLogger(
  { level: 'error', format: 'json', max_size: 1, max_backups: 0, max_age: 0, sensitive_fields: [] },
  () => {},
)

forEachEngine((engine) => {
  let a: TestApp
  let admin: string
  let gameId: string
  let key: string
  const T = Date.UTC(2026, 2, 2, 10)
  const ev = (id: string | undefined, uid: string, event = 'session_start', ts = T) => ({
    event,
    ts: String(ts),
    game_id: gameId,
    env: 'prod',
    uid,
    ...(id === undefined ? {} : { event_id: id }),
  })
  const count = async (where = '1 = 1', params: unknown[] = []) =>
    Number(
      (
        await a.db.get<{ n: number }>(
          `SELECT COUNT(*) AS n FROM ingest_events WHERE game_id = ? AND ${where}`,
          [gameId, ...(params as string[])],
        )
      )?.n,
    )
  /** The day's DAU and new users. */
  const daily = async () => {
    await a.events.drain()
    const p = [gameId, 'prod', Date.UTC(2026, 2, 2)]
    const r = await a.db.get<{ dau: number; fresh: number }>(
      'SELECT dau, new_users AS fresh FROM analytics_daily WHERE game_id = ? AND env = ? AND day = ?',
      p,
    )
    return { dau: Number(r?.dau ?? 0), fresh: Number(r?.fresh ?? 0) }
  }

  beforeAll(async () => {
    ;({ a, admin, gameId } = await ingestApp(engine))
    const k = await a.req('POST', '/api/api-keys', {
      token: admin,
      body: { name: 'sdk', gameId, environment: 'prod' },
    })
    expect(k.status).toBe(201)
    key = k.body.key
  })
  afterAll(() => a.stop())

  test('the same event_id twice in one batch: stored and counted once', async () => {
    const r = await signed(a, '/api/ingest/events', [ev('e-1', 'u1'), ev('e-1', 'u1'), ev('e-2', 'u2')])
    expect(r.status).toBe(200)
    expect(await count()).toBe(2)
    expect(await daily()).toEqual({ dau: 2, fresh: 2 })
  })

  test('sent again in later batches (a retry), alone or beside new events: not stored again, still acknowledged', async () => {
    const again = await signed(a, '/api/ingest/events', [ev('e-1', 'u1'), ev('e-2', 'u2')])
    expect(again.status).toBe(200)
    const mixed = await signed(a, '/api/ingest/events', [ev('e-2', 'u2'), ev('e-3', 'u3')])
    expect(mixed.status).toBe(200)
    expect(await count()).toBe(3)
    expect(await count('user_id = ?', ['u2'])).toBe(1)
    expect(await daily()).toEqual({ dau: 3, fresh: 3 })
    // /v1/batch items carry event_id too: a retried item is acknowledged and stored once.
    const body = JSON.stringify([
      { event_id: 'b-1', event_name: 'tap', user_id: 'u9', ts_client: T },
      { event_id: 'e-3', event_name: 'session_start', user_id: 'u3', ts_client: T },
    ])
    const send = () =>
      a.req('POST', '/v1/batch', {
        raw: body,
        headers: { 'x-api-key': key, 'content-type': 'application/json' },
      })
    expect((await send()).body).toEqual({ accepted: ['b-1', 'e-3'], rejected: [] })
    expect((await send()).body).toEqual({ accepted: ['b-1', 'e-3'], rejected: [] })
    expect(await count('user_id = ?', ['u9'])).toBe(1)
    expect(await count()).toBe(4)
  })

  test('without an event_id, events are stored as sent; an id in another game is its own', async () => {
    await signed(a, '/api/ingest/events', [ev(undefined, 'n1', 'tap'), ev(undefined, 'n1', 'tap')])
    await signed(a, '/api/ingest/events', [ev(undefined, 'n1', 'tap')])
    expect(await count('user_id = ?', ['n1'])).toBe(3)
    const other = await a.req('POST', '/api/games', { token: admin, body: { ...game, name: 'Other' } })
    const r = await signed(a, '/api/ingest/events', [{ ...ev('e-1', 'o1'), game_id: other.body.id }])
    expect(r.status).toBe(200)
    const n = await a.db.get<{ n: number }>('SELECT COUNT(*) AS n FROM ingest_events WHERE game_id = ?', [
      other.body.id,
    ])
    expect(Number(n?.n)).toBe(1)
  })

  test('a malformed event_id: 400 naming the field (signed), the item rejected (/v1/batch)', async () => {
    const long = await signed(a, '/api/ingest/events', [ev('x'.repeat(129), 'u1')])
    expect(long.status).toBe(400)
    expect(JSON.stringify(long.body)).toContain('event_id')
    const obj = await signed(a, '/api/ingest/events', [{ ...ev('ok', 'u1'), event_id: { a: 1 } }])
    expect(obj.status).toBe(400)
    expect(JSON.stringify(obj.body)).toContain('event_id')
    const r = await a.req('POST', '/v1/batch', {
      raw: JSON.stringify([{ event_id: 'y'.repeat(129), event_name: 'tap' }]),
      headers: { 'x-api-key': key, 'content-type': 'application/json' },
    })
    expect(r.body.rejected).toEqual([
      { event_id: 'y'.repeat(129), reason: 'event_id: must be at most 128 characters' },
    ])
    const unauth = await a.req('POST', '/api/ingest/events', {
      raw: '[]',
      headers: { 'content-type': 'application/json' },
    })
    expect(unauth.status).toBe(401)
  })
})

forEachEngine((engine) => {
  const store = migratedStore(engine, [analyticsTables])
  const NOW = Date.now()
  const events = (ids: string[], uid = (id: string) => `user-${id}`) =>
    checked(
      ids.map((id) => ({
        event: 'session_start',
        ts: String(NOW),
        game_id: 'g',
        env: 'prod',
        uid: uid(id),
        event_id: id,
      })),
      false,
    )
  const writer = () => new GroupWriter(store.db, log)
  const stored = async () =>
    Number((await store.db.get<{ n: number }>('SELECT COUNT(*) AS n FROM ingest_events'))?.n)
  const dau = async () => {
    await derive(store.db)
    return sum()
  }
  const sum = async () =>
    Number((await store.db.get<{ n: number }>('SELECT COALESCE(SUM(dau), 0) AS n FROM analytics_daily'))?.n)

  test('across a restart and across instances sharing the store: each event_id stored and counted once', async () => {
    const first = writer()
    await first.write(events(['r1', 'r2', 'r3']))
    expect(await stored()).toBe(3)
    // A new process: nothing in memory, the store remembers.
    const restarted = writer()
    await restarted.write(events(['r2', 'r3', 'r4']))
    expect(await stored()).toBe(4)
    // Two instances side by side (one store), each sent the same retried batch and some of their own.
    const other = writer()
    const ids = Array.from({ length: 300 }, (_, i) => `c${i}`)
    await Promise.all([
      restarted.write(events(ids.slice(0, 200))),
      other.write(events(ids.slice(100))),
      restarted.write(events([...ids.slice(50, 150), 'r1'])),
      other.write(events(ids.slice(250))),
    ])
    expect(await stored()).toBe(304)
    const dup = await store.db.get<{ n: number }>(
      'SELECT COUNT(*) AS n FROM (SELECT user_id FROM ingest_events GROUP BY user_id HAVING COUNT(*) > 1) t',
    )
    expect(Number(dup?.n)).toBe(0)
    // The rollups counted each user once (DAU: one session_start per user).
    expect(await dau()).toBe(304)
  })

  test('the window: ids received before the cutoff are purged, and the same id is then stored again', async () => {
    expect(await purgeEventIds(store.db, NOW - 7 * DAY)).toBe(0)
    // Every id so far was received before now + 1 s.
    expect(await purgeEventIds(store.db, Date.now() + 1000)).toBe(304)
    await writer().write(events(['r1']))
    expect(await stored()).toBe(305)
  })

  test("a request whose events were all stored already still commits its nonce (the replay window's record)", async () => {
    const nonces = async () =>
      (await store.db.all<{ nonce: string }>('SELECT nonce FROM ingest_nonces')).map((r) => r.nonce).sort()
    const w = writer()
    await w.write(events(['n1', 'n2']), ['first-nonce', Date.now() + 60_000])
    await w.write(events(['n1', 'n2']), ['retry-nonce', Date.now() + 60_000])
    await writer().write(events(['n2']), ['restarted-nonce', Date.now() + 60_000])
    expect(await nonces()).toEqual(['first-nonce', 'restarted-nonce', 'retry-nonce'])
    expect(await stored()).toBe(307)
  })
})
