import { afterAll, beforeAll, expect, test } from 'bun:test'
import { type Db, migrate } from '../../core/db'
import { forEachEngine, rawDb } from '../../test/helpers'
import { ingestMigrations } from './migrations'
import { DUPLICATE_EVENTS, persist } from './persist/persist'
import { emptyCommit } from './testing'

const [m1, m2] = ingestMigrations
const REBUILT = [
  'ingest_payments',
  'ingest_user_day',
  'ingest_first_seen',
  'ingest_daily',
  'ingest_invocation_hour',
  'ingest_invocation_hist',
  'ingest_exposures',
  'ingest_user_events',
]

forEachEngine((engine) => {
  let db: Db
  let done: () => Promise<void>
  beforeAll(async () => {
    ;({ db, done } = await rawDb(engine))
  })
  afterAll(() => done())

  test('002 keeps every rollup row and key; on SQLite the tables lose their rowid', async () => {
    await migrate(db, [{ plugin: 'ingest', migrations: [m1] }])
    const g = 'g1'
    await db.run(
      'INSERT INTO ingest_payments (game_id, env, order_id, status, amount_cents, currency, user_id, ts, received_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)',
      [g, 'prod', 'o1', 'success', 499, 'USD', 'u1', 1000, 1001],
    )
    await db.run('INSERT INTO ingest_user_day (game_id, env, day, user_id) VALUES (?, ?, ?, ?)', [
      g,
      'prod',
      0,
      'u1',
    ])
    await db.run('INSERT INTO ingest_first_seen (game_id, env, user_id, first_ts) VALUES (?, ?, ?, ?)', [
      g,
      'prod',
      'u1',
      1000,
    ])
    await db.run('INSERT INTO ingest_daily (game_id, env, day, dau, new_users) VALUES (?, ?, ?, ?, ?)', [
      g,
      'prod',
      0,
      1,
      1,
    ])
    await db.run(
      'INSERT INTO ingest_invocation_hour (game_id, env, hour, function_id, total, failed, duration_sum, duration_n) VALUES (?, ?, ?, ?, ?, ?, ?, ?)',
      [g, 'prod', 0, 'fn', 3, 1, 30, 3],
    )
    await db.run(
      'INSERT INTO ingest_invocation_hist (game_id, env, hour, bucket, n) VALUES (?, ?, ?, ?, ?)',
      [g, 'prod', 0, 7, 3],
    )
    await db.run(
      'INSERT INTO ingest_exposures (game_id, env, experiment_id, user_id, variant, ts) VALUES (?, ?, ?, ?, ?, ?)',
      [g, 'prod', 'e1', 'u1', 'b', 1000],
    )
    await db.run(
      'INSERT INTO ingest_user_events (game_id, env, user_id, event, last_ts) VALUES (?, ?, ?, ?, ?)',
      [g, 'prod', 'u1', 'purchase', 1002],
    )
    const before = await Promise.all(REBUILT.map((t) => db.all(`SELECT * FROM ${t} ORDER BY 1, 2, 3, 4`)))

    expect(await migrate(db, [{ plugin: 'ingest', migrations: [m1, m2] }])).toEqual(['ingest/2'])
    const after = await Promise.all(REBUILT.map((t) => db.all(`SELECT * FROM ${t} ORDER BY 1, 2, 3, 4`)))
    expect(after).toEqual(before)
    for (const rows of after) expect(rows).toHaveLength(1)

    // The primary keys still refuse a duplicate, and upserts still find their row.
    await db.run(
      'INSERT INTO ingest_first_seen (game_id, env, user_id, first_ts) VALUES (?, ?, ?, ?) ON CONFLICT (game_id, env, user_id) DO NOTHING',
      [g, 'prod', 'u1', 5],
    )
    expect(await db.get('SELECT first_ts FROM ingest_first_seen WHERE user_id = ?', ['u1'])).toEqual({
      first_ts: 1000,
    })
    await expect(
      db.run('INSERT INTO ingest_user_day (game_id, env, day, user_id) VALUES (?, ?, ?, ?)', [
        g,
        'prod',
        0,
        'u1',
      ]),
    ).rejects.toThrow()

    if (engine === 'sqlite') {
      for (const t of REBUILT) await expect(db.all(`SELECT rowid FROM ${t}`)).rejects.toThrow(/rowid/)
      // The tables that keep a rowid: time-ordered raw rows and the large online sketches.
      for (const t of ['ingest_events', 'ingest_invocations', 'ingest_online'])
        expect(await db.all(`SELECT rowid FROM ${t}`)).toEqual([])
    }
  })

  test("006 moves stored event ids under their stream's number, and they still refuse a retry", async () => {
    await migrate(db, [{ plugin: 'ingest', migrations: ingestMigrations.slice(0, 5) }])
    const ids: Array<[string, string, string, number]> = [
      ['g2', 'prod', 'id-1', 10],
      ['g1', 'prod', 'id-1', 11],
      ['g1', 'dev', 'id-2', 12],
      ['g1', 'prod', 'id-3', 13],
    ]
    for (const row of ids)
      await db.run(
        'INSERT INTO ingest_event_ids (game_id, env, event_id, received_at) VALUES (?, ?, ?, ?)',
        row,
      )

    expect(await migrate(db, [{ plugin: 'ingest', migrations: ingestMigrations.slice(0, 6) }])).toEqual([
      'ingest/6',
    ])
    const streams = await db.all<{ id: number; game_id: string; env: string }>(
      'SELECT id, game_id, env FROM ingest_streams ORDER BY game_id, env',
    )
    expect(streams.map((s) => [s.game_id, s.env])).toEqual([
      ['g1', 'dev'],
      ['g1', 'prod'],
      ['g2', 'prod'],
    ])
    const moved = await db.all(
      `SELECT s.game_id, s.env, e.event_id, e.received_at FROM ingest_event_ids e JOIN ingest_streams s ON s.id = e.stream
       ORDER BY e.received_at`,
    )
    expect(moved.map((r) => [r.game_id, r.env, r.event_id, Number(r.received_at)])).toEqual(ids)
  })

  test('007 keeps every unexpired nonce, keyed by its expiry; a commit still stores them and the purge takes the expired', async () => {
    const nonces: Array<[string, number]> = [
      ['n-late', 5_000],
      ['n-early', 1_000],
      ['n-mid', 3_000],
    ]
    for (const [nonce, expires] of nonces)
      await db.run('INSERT INTO ingest_nonces (nonce, expires_at) VALUES (?, ?)', [nonce, expires])

    expect(await migrate(db, [{ plugin: 'ingest', migrations: ingestMigrations.slice(0, 7) }])).toEqual([
      'ingest/7',
    ])
    const kept = await db.all<{ nonce: string; expires_at: number }>(
      'SELECT nonce, expires_at FROM ingest_nonces ORDER BY nonce',
    )
    expect(kept.map((r) => [r.nonce, Number(r.expires_at)])).toEqual([
      ['n-early', 1_000],
      ['n-late', 5_000],
      ['n-mid', 3_000],
    ])

    // A commit's nonces land beside them; the same nonce committed again (a rolled-back commit
    // that runs again) stays one row.
    await migrate(db, [{ plugin: 'ingest', migrations: ingestMigrations }])
    const c = emptyCommit(30)
    c.nonces = ['n-new', 7_000]
    await persist(db, c)
    await persist(db, c)
    const all = await db.all<{ nonce: string }>('SELECT nonce FROM ingest_nonces')
    expect(all.map((r) => r.nonce).sort()).toEqual(['n-early', 'n-late', 'n-mid', 'n-new'])

    await db.run('DELETE FROM ingest_nonces WHERE expires_at <= ?', [3_000])
    const left = await db.all<{ nonce: string }>('SELECT nonce FROM ingest_nonces WHERE expires_at > ?', [0])
    expect(left.map((r) => r.nonce).sort()).toEqual(['n-late', 'n-new'])
    if (engine === 'sqlite') await expect(db.all('SELECT rowid FROM ingest_nonces')).rejects.toThrow(/rowid/)

    // The event ids 006 moved (test above) still refuse a retry.
    // A commit carrying a stored id of g1/prod is refused whole; the same id in g1/dev is new
    // (committed by today's code, so on today's schema).
    const commit = (env: string, eventId: string) => {
      const c = emptyCommit(20)
      c.events = {
        firstId: 900 + Number(eventId.slice(3)),
        receivedAt: 20,
        streams: ['g1', env],
        cols: [0, 'login', 20, 'u1', null, null, null, null, null, null, null],
        props: ['{}'],
      }
      c.eventIds = [0, eventId]
      return c
    }
    await expect(persist(db, commit('prod', 'id-3'))).rejects.toThrow(DUPLICATE_EVENTS)
    await persist(db, commit('dev', 'id-3'))
    await persist(db, commit('staging', 'id-4'))
    expect(Number((await db.get<{ n: number }>('SELECT COUNT(*) AS n FROM ingest_streams'))?.n)).toBe(4)
    expect(Number((await db.get<{ n: number }>('SELECT COUNT(*) AS n FROM ingest_event_ids'))?.n)).toBe(6)
  })

  test('009 drops the events and calls whose time is past the last date, and keeps the rest', async () => {
    const own = await rawDb(engine)
    try {
      await migrate(own.db, [{ plugin: 'ingest', migrations: ingestMigrations.slice(0, 8) }])
      const far = 8_640_000_000_000_001
      for (const [id, ts] of [
        [1, 1_000],
        [2, far],
        [3, 8_640_000_000_000_000],
      ])
        await own.db.run(
          "INSERT INTO ingest_events (id, received_at, game_id, env, event, ts, props) VALUES (?, 1, 'g', 'prod', 'login', ?, '{}')",
          [id, ts],
        )
      for (const [id, ts] of [
        [1, 1_000],
        [2, far],
      ])
        await own.db.run(
          "INSERT INTO ingest_invocations (id, game_id, env, ts, received_at, function_id, outcome) VALUES (?, 'g', 'prod', ?, 1, 'f', 'success')",
          [id, ts],
        )
      await migrate(own.db, [{ plugin: 'ingest', migrations: ingestMigrations }])
      const ids = async (table: string) =>
        (await own.db.all<{ id: number }>(`SELECT id FROM ${table} ORDER BY id`)).map((r) => Number(r.id))
      expect(await ids('ingest_events')).toEqual([1, 3])
      expect(await ids('ingest_invocations')).toEqual([1])
    } finally {
      await own.done()
    }
  })
})
