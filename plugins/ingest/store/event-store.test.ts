import { beforeAll, describe, expect, setSystemTime, test } from 'bun:test'
import { type TestApp, forEachEngine, makeApp } from '../../../test/helpers'
import { DAY, SECRET, game, signed } from '../testing'
import { eventLog } from './log'
import { purge } from './store'

// The event store ingest keeps (raw events, payments, invocations) and its configuration.
forEachEngine((engine) => {
  let a: TestApp
  let admin: string
  let gameId: string
  const ev = (event: string, extra: Record<string, unknown> = {}) => ({
    event,
    ts: String(Date.now()),
    game_id: gameId,
    env: 'prod',
    ...extra,
  })
  const count = async (sql: string, params: (string | number)[] = []) =>
    Number((await a.db.get<{ n: number }>(sql, params))?.n ?? 0)

  beforeAll(async () => {
    a = await makeApp(engine, {
      plugins: { games: {}, ingest: { signing_secret: SECRET, purge_interval_minutes: 0 } },
    })
    admin = await a.token('admin')
    const g = await a.req('POST', '/api/games', { token: admin, body: game })
    expect(g.status).toBe(201)
    gameId = g.body.id
    // A login in every environment, a payment and some plain events.
    const logins = ['dev', 'prod', 'staging'].map((env) => ev('login', { env, uid: `w-${env}` }))
    const taps = Array.from({ length: 10 }, (_, i) => ev('tap', { uid: `t${i}` }))
    expect((await signed(a, '/api/ingest/events', [...logins, ...taps])).status).toBe(200)
    const pay = ev('payment', { order_id: 'w-1', status: 'success', amount_cents: 499, currency: 'USD' })
    expect((await signed(a, '/api/ingest/payments', [pay])).status).toBe(200)
  })

  describe('event store', () => {
    test('ids are time-ordered and hot fields are columns', async () => {
      const rows = await a.db.all<{ id: number; received_at: number }>(
        'SELECT id, received_at FROM ingest_events ORDER BY received_at, id',
      )
      expect(rows.length).toBeGreaterThan(10)
      for (let i = 1; i < rows.length; i++) expect(rows[i].id).toBeGreaterThan(rows[i - 1].id)
      // The id carries the receive time (ms x 1024 + counter).
      for (const r of rows) expect(Math.floor(r.id / 1024)).toBeGreaterThanOrEqual(r.received_at)
      const p = await a.db.get<{ amount_cents: number; currency: string }>(
        "SELECT amount_cents, currency FROM ingest_events WHERE event = 'payment' LIMIT 1",
      )
      expect(p).toMatchObject({ amount_cents: 499, currency: 'USD' })
    })

    test('each hot field lands in its column and props keep the rest, across streams interleaved in one commit', async () => {
      // Two environments taking turns: each row must name its own game and environment.
      const full = (env: string, i: number) =>
        ev('level_up', {
          env,
          uid: `cols-${env}-${i}`,
          session_id: `s-${i}`,
          amount_cents: 100 + i,
          currency: 'EUR',
          duration_ms: 7 + i,
          network: 'wifi',
          level: String(10 + i),
          attrs: { note: `n${i}` },
        })
      const list = Array.from({ length: 6 }, (_, i) => full(i % 2 ? 'staging' : 'prod', i))
      expect((await signed(a, '/api/ingest/events', list)).status).toBe(200)
      const rows = await a.db.all<Record<string, unknown>>(
        "SELECT * FROM ingest_events WHERE user_id LIKE 'cols-%' ORDER BY id",
      )
      expect(rows).toHaveLength(6)
      rows.forEach((r, i) => {
        const env = i % 2 ? 'staging' : 'prod'
        expect(r).toMatchObject({
          game_id: gameId,
          env,
          event: 'level_up',
          ts: Number(list[i].ts),
          user_id: `cols-${env}-${i}`,
          session_id: `s-${i}`,
          currency: 'EUR',
          network: 'wifi',
          level: String(10 + i),
        })
        expect(Number(r.amount_cents)).toBe(100 + i)
        expect(Number(r.duration_ms)).toBe(7 + i)
        // The columns the row holds exactly are not repeated in props; the rest is, as sent.
        const props = JSON.parse(String(r.props))
        expect(props).not.toHaveProperty('event')
        expect(props).not.toHaveProperty('game_id')
        expect(props).toMatchObject({
          uid: `cols-${env}-${i}`,
          level: String(10 + i),
          attrs: { note: `n${i}` },
        })
        if (i) expect(Number(r.id)).toBe(Number(rows[i - 1].id) + 1)
      })
    })

    test("the log's pending rows: counted after a position, up to a later one plus what lies beyond it, or the time alone", async () => {
      const source = eventLog(() => a.db)
      const all = await source.read({ seq: 0, pos: 0 }, Number.MAX_SAFE_INTEGER, 1000, a.db)
      const n = all.length
      expect(n).toBeGreaterThanOrEqual(14)
      const p = await source.pending(all[2].at, a.db)
      expect(p).toEqual({ rows: n - 3, oldestReceivedAt: all[3].row.receivedAt })
      // Up to the ninth row (six of them) plus those known to follow it.
      const bounded = await source.pending(all[2].at, a.db, { until: { at: all[8].at, rows: n - 9 } })
      expect(bounded).toEqual({ rows: n - 3, oldestReceivedAt: all[3].row.receivedAt })
      expect((await source.pending(all[2].at, a.db, { until: { at: all[8].at, rows: 0 } })).rows).toBe(6)
      expect(await source.pending(all[2].at, a.db, { count: false })).toEqual({
        rows: 0,
        oldestReceivedAt: all[3].row.receivedAt,
      })
      expect(await source.pending(all[n - 1].at, a.db)).toEqual({ rows: 0, oldestReceivedAt: null })
    })

    test("each commit's events are counted in ingest_log_commits, and the lag is summed from them where they reach", async () => {
      // A retry of a stored event_id beside a new one: the commit stores (and counts) the new one alone.
      const once = ev('tap', { uid: 'c1', event_id: 'commit-count-1' })
      expect((await signed(a, '/api/ingest/events', [once])).status).toBe(200)
      expect((await signed(a, '/api/ingest/events', [once, ev('tap', { uid: 'c2' })])).status).toBe(200)
      const stored = await count('SELECT COUNT(*) AS n FROM ingest_events WHERE seq > 0')
      expect(await count('SELECT SUM(events) AS n FROM ingest_log_commits')).toBe(stored)
      const source = eventLog(() => a.db)
      const all = await source.read({ seq: 0, pos: 0 }, Number.MAX_SAFE_INTEGER, 1000, a.db)
      const n = all.length
      const last = all[n - 1].at
      // Summed from the commits, not the rows: a commit said to hold 1,000 more shows them.
      await a.db.run('UPDATE ingest_log_commits SET events = events + 1000 WHERE seq = ?', [last.seq])
      expect((await source.pending(all[1].at, a.db)).rows).toBe(n - 2 + 1000)
      // A cursor before the oldest commit kept (trimmed, or stored before the table existed):
      // the rows themselves are counted.
      await source.trim!(last, a.db)
      expect(await count('SELECT COUNT(*) AS n FROM ingest_log_commits')).toBe(1)
      expect((await source.pending(all[1].at, a.db)).rows).toBe(n - 2)
      expect((await source.pending(all[1].at, a.db, { until: { at: all[4].at, rows: 7 } })).rows).toBe(3 + 7)
      await a.db.run('UPDATE ingest_log_commits SET events = events - 1000 WHERE seq = ?', [last.seq])
      // Within the kept commits, exact and up to `until` too: the last commit holds one row.
      expect((await source.pending(all[n - 2].at, a.db)).rows).toBe(1)
      expect((await source.pending(all[n - 2].at, a.db, { until: { at: last, rows: 4 } })).rows).toBe(1 + 4)
    })

    test('rows stored before the log (seq 0) are read in id order before the commits, from any position among them', async () => {
      const source = eventLog(() => a.db)
      const before = await source.read({ seq: 0, pos: 0 }, Number.MAX_SAFE_INTEGER, 1000, a.db)
      // Six rows of an upgraded store: ids below every commit's, seq 0.
      for (let id = 1; id <= 6; id++)
        await a.db.run(
          "INSERT INTO ingest_events (id, received_at, game_id, env, event, ts, user_id, props, seq) VALUES (?, ?, ?, 'prod', 'tap', ?, ?, '{}', 0)",
          [id, 1000 + id, gameId, Date.now(), `old-${id}`],
        )
      try {
        const ids = (list: { at: { pos: number } }[]) => list.map((e) => e.at.pos)
        const all = await source.read({ seq: 0, pos: 0 }, Number.MAX_SAFE_INTEGER, 1000, a.db)
        expect(ids(all)).toEqual([1, 2, 3, 4, 5, 6, ...ids(before)])
        // From among them, in batches that cross into the commits.
        expect(ids(await source.read({ seq: 0, pos: 4 }, Number.MAX_SAFE_INTEGER, 4, a.db))).toEqual([
          5,
          6,
          ...ids(before.slice(0, 2)),
        ])
        expect(ids(await source.read({ seq: 0, pos: 6 }, Number.MAX_SAFE_INTEGER, 3, a.db))).toEqual(
          ids(before.slice(0, 3)),
        )
        // Below a horizon that only the old rows are under: those alone.
        expect(ids(await source.read({ seq: 0, pos: 2 }, before[0].at.seq, 1000, a.db))).toEqual([3, 4, 5, 6])
        // Counted from among them (the rows themselves: no commit before the cursor's is kept).
        expect(await source.pending({ seq: 0, pos: 4 }, a.db)).toEqual({
          rows: 2 + before.length,
          oldestReceivedAt: 1005,
        })
        expect((await source.pending({ seq: 0, pos: 6 }, a.db)).oldestReceivedAt).toBe(
          before[0].row.receivedAt,
        )
      } finally {
        await a.db.run('DELETE FROM ingest_events WHERE seq = 0 AND id <= 6')
      }
    })

    test('an invocation row has the id of the event it came from', async () => {
      const list = Array.from({ length: 7 }, (_, i) =>
        ev('function.invoke', { attrs: { functionId: `fn-${i}`, outcome: 'success', durationMs: 3 } }),
      )
      expect((await signed(a, '/api/ingest/events', [ev('tap'), ...list, ev('tap')])).status).toBe(200)
      const pairs = await a.db.all<{ event: string; function_id: string }>(
        'SELECT e.event, i.function_id FROM ingest_invocations i JOIN ingest_events e ON e.id = i.id',
      )
      expect(pairs.length).toBe(7)
      for (const p of pairs) expect(p.event).toBe('function.invoke')
    })

    test('retention purge: dev after 7 days, prod kept for 365', async () => {
      const envs = [
        { gameId, name: 'dev', retentionDays: 7 },
        { gameId, name: 'prod', retentionDays: 365 },
      ]
      const dev = "SELECT COUNT(*) AS n FROM ingest_events WHERE env = 'dev'"
      expect(await count(dev)).toBeGreaterThan(0)
      await purge(a.db, envs, Date.now() + 6 * DAY)
      expect(await count(dev)).toBeGreaterThan(0)
      await purge(a.db, envs, Date.now() + 8 * DAY)
      expect(await count(dev)).toBe(0)
      expect(await count("SELECT COUNT(*) AS n FROM ingest_events WHERE env = 'prod'")).toBeGreaterThan(0)
    })
  })

  describe('configuration', () => {
    test('no secret and generate_secret off: 403 ingest_disabled', async () => {
      const b = await makeApp(engine, { plugins: { games: {}, ingest: { generate_secret: false } } })
      try {
        const r = await signed(b, '/api/ingest/events', [ev('x')])
        expect([r.status, r.body.error]).toEqual([403, 'ingest_disabled'])
      } finally {
        await b.stop()
      }
    })

    test('per-game secrets chosen by X-Game-Id; every event must name that game', async () => {
      const b = await makeApp(engine, {
        plugins: { games: {}, ingest: { game_secrets: { 'game-a': 'secret-a' } } },
      })
      try {
        const h = { 'x-game-id': 'game-a' }
        const e = { event: 'x', ts: String(Date.now()), env: 'prod' }
        const wrong = await signed(b, '/api/ingest/events', [e], { secret: 'other', headers: h })
        expect(wrong.status).toBe(401)
        const mismatch = await signed(b, '/api/ingest/events', [{ ...e, game_id: 'game-b' }], {
          secret: 'secret-a',
          headers: h,
        })
        expect(mismatch.body.details.errors).toEqual([
          { index: 0, field: 'game_id', reason: "must match X-Game-Id 'game-a'" },
        ])
        // Signature and validation pass; the game itself does not exist in this app.
        const r = await signed(b, '/api/ingest/events', [e], { secret: 'secret-a', headers: h })
        expect([r.status, r.body.error]).toEqual([400, 'unknown_game'])
        // A name every object inherits is no game: refused as any game without a secret (no
        // shared one here: ingestion is off for it), on every signed route.
        for (const name of ['constructor', '__proto__', 'toString', 'game-b'])
          for (const path of ['/api/ingest/events', '/api/ingest/payments', '/v1/batch']) {
            const r = await signed(b, path, [e], { secret: 'secret-a', headers: { 'x-game-id': name } })
            expect([r.status, r.body.error]).toEqual([403, 'ingest_disabled'])
          }
      } finally {
        await b.stop()
      }
    })

    test("the retention purge runs on its timer every purge_interval_minutes, by each environment's retention", async () => {
      // The shortest interval the schema accepts is a minute: the timer is observed, not waited for.
      const realSet = globalThis.setInterval
      const realClear = globalThis.clearInterval
      const timers: { fn: () => unknown; ms: number; handle: unknown }[] = []
      globalThis.setInterval = ((fn: () => unknown, ms: number) => {
        const handle = realSet(fn, ms)
        timers.push({ fn, ms, handle })
        return handle
      }) as unknown as typeof setInterval
      let b: TestApp
      try {
        b = await makeApp(engine, {
          plugins: { games: {}, ingest: { signing_secret: SECRET, purge_interval_minutes: 7 } },
        })
      } finally {
        globalThis.setInterval = realSet
      }
      const cleared: unknown[] = []
      let stopped = false
      try {
        const purges = timers.filter((t) => t.ms === 7 * 60_000)
        expect(purges).toHaveLength(1)
        const tok = await b.token('admin')
        const g = await b.req('POST', '/api/games', { token: tok, body: game })
        expect(g.status).toBe(201)
        const e = (env: string) => ({
          event: 'tap',
          uid: `p-${env}`,
          ts: String(Date.now()),
          game_id: g.body.id,
          env,
        })
        expect((await signed(b, '/api/ingest/events', ['dev', 'staging', 'prod'].map(e))).status).toBe(200)
        const left = async () =>
          (
            await b.db.all<{ env: string }>('SELECT env FROM ingest_events WHERE game_id = ? ORDER BY env', [
              g.body.id,
            ])
          ).map((r) => r.env)
        expect(await left()).toEqual(['dev', 'prod', 'staging'])
        // A tick 8 days on: dev (7 days) goes; staging (30) and prod (365) stay.
        setSystemTime(new Date(Date.now() + 8 * DAY))
        try {
          await purges[0].fn()
        } finally {
          setSystemTime()
        }
        expect(await left()).toEqual(['prod', 'staging'])
        // Stopping the app stops the timer.
        globalThis.clearInterval = ((h: unknown) => {
          cleared.push(h)
          return realClear(h as Parameters<typeof clearInterval>[0])
        }) as typeof clearInterval
        stopped = true
        await b.stop()
      } finally {
        globalThis.clearInterval = realClear
        if (!stopped) await b.stop()
      }
      expect(cleared).toContain(timers.find((t) => t.ms === 7 * 60_000)?.handle)
    })
  })
})
