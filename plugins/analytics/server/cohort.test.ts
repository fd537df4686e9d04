import { expect, test } from 'bun:test'
import { migrate } from '../../../core/db'
import { createLogger } from '../../../core/log'
import { forEachEngine } from '../../../test/helpers'
import { GroupWriter } from '../../ingest/persist/writer'
import { checked } from '../../ingest/signed/collect'
import { migratedStore } from '../../ingest/testing'
import { DAY } from '../lib/time'
import { migrations } from '../migrations'
import { analyticsTables, derive } from '../store/testing'
import { cohorts } from './cohort'
import { oracleD1, oracleRetention } from './cohort-testing'
import { serverAnalytics } from './server'

/**
 * Retention from the cohort counters kept at ingest (cohort.ts) against the query it replaced,
 * kept here as the oracle: the join of first sights with user-days, per day and per week. The
 * events go through ingest's group-commit writer and then the analytics consumer of the log, in
 * commits of every size, with late events, so SQLite merges its user-day log several times and
 * PostgreSQL runs commits side by side.
 */

const log = createLogger(
  { level: 'error', format: 'json', max_size: 1, max_backups: 0, max_age: 0, sensitive_fields: [] },
  () => {},
)
const T0 = Date.UTC(2026, 0, 1)

/** Deterministic pseudo-random numbers (mulberry32), so a failure can be replayed. */
function random(seed: number) {
  let a = seed
  return () => {
    a = (a + 0x6d2b79f5) | 0
    let t = Math.imul(a ^ (a >>> 15), 1 | a)
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

/**
 * Commits of 1..400 events over 40 days: 300 users, each joining on a day of their own and coming
 * back now and then; one event in eight arrives late (1-20 days after its `ts`), so some late
 * events land before their user's stored first sight. Two streams, one of them in Asia/Tokyo.
 */
function fixture(seed: number, game: string) {
  const rnd = random(seed)
  const joined = Array.from({ length: 300 }, () => Math.floor(rnd() * 35))
  const commits: Array<Array<Record<string, unknown>>> = []
  let commit: Array<Record<string, unknown>> = []
  let size = 1 + Math.floor(rnd() * 400)
  const late: Array<[number, Record<string, unknown>]> = []
  for (let day = 0; day < 40; day++) {
    for (let u = 0; u < joined.length; u++) {
      if (day < joined[u] || rnd() > (day === joined[u] ? 1 : 0.45)) continue
      for (let k = 1 + Math.floor(rnd() * 3); k > 0; k--) {
        const env = u % 7 === 0 ? 'dev' : 'prod'
        const ts = T0 + day * DAY + Math.floor(rnd() * DAY)
        const name = ['session_start', 'login', 'tap'][Math.floor(rnd() * 3)]
        const e = { event: name, ts: String(ts), game_id: game, env, uid: `u${u}` }
        if (rnd() < 0.125) late.push([day + 1 + Math.floor(rnd() * 20), e])
        else commit.push(e)
        while (late.length && late[0][0] <= day) commit.push(late.shift()![1])
        if (commit.length >= size) {
          commits.push(commit)
          commit = []
          size = 1 + Math.floor(rnd() * 400)
        }
      }
    }
    late.sort((a, b) => a[0] - b[0])
  }
  commits.push([...commit, ...late.map(([, e]) => e)])
  return commits
}

forEachEngine((engine) => {
  const store = migratedStore(engine, [analyticsTables])

  const compare = async (game: string, env: string, today: number) => {
    const server = serverAnalytics(store.db)
    for (const [interval, from, to, size] of [
      ['day', T0, T0 + 39 * DAY, 30],
      ['day', T0 + 10 * DAY, T0 + 12 * DAY, 5],
      ['week', T0, T0 + 39 * DAY, 12],
      ['week', T0 + 15 * DAY, T0 + 22 * DAY, 3],
    ] as const) {
      const q = { gameId: game, env, from, to, interval, size }
      const got = await server.retention(q, today)
      expect(got.cohorts.map(({ retention: _, ...c }) => c)).toEqual(
        await oracleRetention(store.db, q, today),
      )
    }
    for (const from of [T0, T0 + 9 * DAY, T0 + 30 * DAY]) {
      const d1 = await cohorts(store.db).d1({ gameId: game, env }, from, from + 6 * DAY)
      expect(d1).toEqual(await oracleD1(store.db, game, env, from, from + 6 * DAY))
    }
  }

  test('day and week retention equal the join they replaced, with late events, through merges and concurrent commits', async () => {
    const writer = new GroupWriter(store.db, log)
    const timezone = async (g: string) => (g === 'tokyo' ? 'Asia/Tokyo' : undefined)
    const today = T0 + 45 * DAY
    for (const game of ['utc', 'tokyo']) {
      const commits = fixture(game === 'utc' ? 17 : 42, game)
      // Half of the commits one after another, then the rest all at once (side by side on PostgreSQL).
      const half = Math.floor(commits.length / 2)
      for (const c of commits.slice(0, half)) await writer.write(checked(c, false))
      // Mid-way, with user-days still in SQLite's log: the same answers.
      await compare(game, 'prod', today)
      await Promise.all(commits.slice(half).map((c) => writer.write(checked(c, false))))
    }
    await writer.idle()
    await derive(store.db, { timezone })
    const days = await store.db.get<{ n: number }>('SELECT COUNT(*) AS n FROM analytics_cohort_day')
    expect(Number(days?.n)).toBeGreaterThan(500)
    for (const game of ['utc', 'tokyo']) for (const env of ['prod', 'dev']) await compare(game, env, today)
    // Some returns counted (the fixture is not empty of them) and the oracle agrees.
    const r = await serverAnalytics(store.db).retention(
      { gameId: 'utc', env: 'prod', from: T0, to: T0 + 6 * DAY, interval: 'day', size: 1 },
      today,
    )
    expect(r.cohorts.some((c) => (c.counts[0] ?? 0) > 0)).toBe(true)
  })
})

forEachEngine((engine) => {
  const store = migratedStore(engine)

  test('an upgraded store answers from its stored user-days: migration 006 fills the counters', async () => {
    await migrate(store.db, [{ plugin: 'analytics', migrations: migrations.filter((m) => m.id < 6) }])
    // Stored before the counters existed: a, b first seen Mon Jan 5; c Jan 6; a back Jan 6, 7 and
    // Mon Jan 12; b back Jan 7; c back Jan 13; d seen only on Jan 20 (a user-day, no return).
    const first = [
      ['a', 5],
      ['b', 5],
      ['c', 6],
      ['d', 20],
    ] as const
    const active = [
      ['a', 5],
      ['a', 6],
      ['a', 7],
      ['a', 12],
      ['b', 5],
      ['b', 7],
      ['c', 6],
      ['c', 13],
      ['d', 20],
    ] as const
    const day = (d: number) => Date.UTC(2026, 0, d)
    for (const [u, d] of first)
      await store.db.run(
        'INSERT INTO analytics_first_seen (game_id, env, user_id, first_ts, first_day) VALUES (?, ?, ?, ?, ?)',
        ['g', 'prod', u, day(d) + 1000, day(d)],
      )
    // The day counters the writer kept beside them: new users per first day.
    for (const [d, fresh] of [
      [5, 2],
      [6, 1],
      [20, 1],
    ])
      await store.db.run(
        'INSERT INTO analytics_daily (game_id, env, day, dau, new_users, revenue_cents, refunds_cents, failed) VALUES (?, ?, ?, 0, ?, 0, 0, 0)',
        ['g', 'prod', day(d), fresh],
      )
    for (const [u, d] of active)
      await store.db.run('INSERT INTO analytics_user_day (game_id, env, day, user_id) VALUES (?, ?, ?, ?)', [
        'g',
        'prod',
        day(d),
        u,
      ])
    await migrate(store.db, [{ plugin: 'analytics', migrations }])
    const server = serverAnalytics(store.db)
    const q = { gameId: 'g', env: 'prod', from: day(5), to: day(7) }
    const today = day(25)
    const byDay = await server.retention({ ...q, interval: 'day', size: 2 }, today)
    // Jan 5: a and b; D1 a (Jan 6), D2 a and b (Jan 7). Jan 6: c; D1, D2 nobody (c is back Jan 13).
    expect(byDay.cohorts.map((c) => [c.cohort, c.users, c.counts])).toEqual([
      ['2026-01-05', 2, [1, 2]],
      ['2026-01-06', 1, [0, 0]],
      ['2026-01-07', 0, [0, 0]],
    ])
    // Week of Mon Jan 5: a, b, c; W1 (Jan 12-18): a and c; W2 (Jan 19-25): nobody (d joined then).
    const byWeek = await server.retention({ ...q, interval: 'week', size: 2 }, today)
    expect(byWeek.cohorts.map((c) => [c.cohort, c.users, c.counts])).toEqual([['2026-01-05', 3, [2, 0]]])
    for (const interval of ['day', 'week'] as const)
      expect(
        (await server.retention({ ...q, interval, size: 2 }, today)).cohorts.map((c) => c.counts),
      ).toEqual((await oracleRetention(store.db, { ...q, interval, size: 2 }, today)).map((c) => c.counts))
  })
})

forEachEngine((engine) => {
  const store = migratedStore(engine, [analyticsTables])

  test('by hand: late events land on their own day, a retried event counts once (day and week)', async () => {
    const writer = new GroupWriter(store.db, log)
    const day = (d: number, hh = 12) => Date.UTC(2026, 0, d, hh)
    const start = (uid: string, d: number, id?: string) => ({
      event: 'session_start',
      ts: String(day(d)),
      game_id: 'g',
      env: 'prod',
      uid,
      ...(id ? { event_id: id } : {}),
    })
    // Each commit is taken in by the consumer before the next is sent (its batch is that commit).
    const send = async (...events: Record<string, unknown>[]) => {
      await writer.write(checked(events, false))
      await derive(store.db)
    }
    // Commit 1: a first seen Mon Jan 5, b first seen Tue Jan 6.
    await send(start('a', 5), start('b', 6))
    // Commit 2: a back Wed Jan 7 (with an id), c first seen Jan 7.
    await send(start('a', 7, 'a-7'), start('c', 7))
    // Commit 3 (late): a's Jan 6, b's Jan 5 (before b's stored first sight: b stays in Jan 6's
    // cohort), and the retry of a's Jan 7 event.
    await send(start('a', 6), start('b', 5), start('a', 7, 'a-7'))
    // Commit 4: a and b back Mon Jan 12 (the next week), c back Jan 8; the retry once more.
    await send(start('a', 12), start('b', 12), start('c', 8), start('a', 7, 'a-7'))
    const server = serverAnalytics(store.db)
    const today = day(20, 0)
    const q = { gameId: 'g', env: 'prod', from: day(5, 0), to: day(7, 0) }
    const byDay = await server.retention({ ...q, interval: 'day', size: 3 }, today)
    // Jan 5 {a}: D1 a (late Jan 6), D2 a (Jan 7, sent three times), D3 none.
    // Jan 6 {b}: D1, D2, D3 none (b's Jan 5 is before its cohort). Jan 7 {c}: D1 c (Jan 8).
    expect(byDay.cohorts.map((c) => [c.cohort, c.users, c.counts])).toEqual([
      ['2026-01-05', 1, [1, 1, 0]],
      ['2026-01-06', 1, [0, 0, 0]],
      ['2026-01-07', 1, [1, 0, 0]],
    ])
    // Week of Jan 5 {a, b, c}: W1 (Jan 12-18) a and b.
    const byWeek = await server.retention({ ...q, interval: 'week', size: 2 }, today)
    expect(byWeek.cohorts.map((c) => [c.cohort, c.users, c.counts])).toEqual([['2026-01-05', 3, [2, 0]]])
    // DAU: Jan 5 a and b (b's late event counts on its day), Jan 7 a and c (a once).
    const dau = await store.db.all<{ day: number; n: number }>(
      'SELECT day, COUNT(*) AS n FROM analytics_user_day GROUP BY day ORDER BY day',
    )
    expect(dau.map((r) => [new Date(Number(r.day)).getUTCDate(), Number(r.n)])).toEqual([
      [5, 2],
      [6, 2],
      [7, 2],
      [8, 1],
      [12, 2],
    ])
    // 2 + 2 + 2 + 3 raw events: the two retries of a-7 were not stored.
    const stored = await store.db.get<{ n: number }>('SELECT COUNT(*) AS n FROM ingest_events')
    expect(Number(stored?.n)).toBe(9)
  })
})
