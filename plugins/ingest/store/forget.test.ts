import { afterAll, beforeAll, expect, test } from 'bun:test'
import { type TestApp, forEachEngine, until } from '../../../test/helpers'
import { RESULT_TABLES } from '../../analytics/migrations'
import { game, ingestApp, signed } from '../testing'

/*
 * A deleted environment (or game) takes what is stored of it along: its raw rows, its event ids,
 * and every consumer's results. Before, an environment deleted and created again under its name
 * showed the old events and day counters, and its clients' event ids were still taken (the sixth
 * audit of the seventeenth session).
 */
const EXPOSURE_TABLES = ['experiments_exposures', 'experiments_user_events']

forEachEngine((engine) => {
  let a: TestApp
  let admin: string
  let gameId: string
  beforeAll(async () => {
    ;({ a, admin, gameId } = await ingestApp(engine, { experiments: {} }))
  })
  afterAll(() => a.stop())

  const rows = async (table: string, env: string) =>
    Number(
      (
        await a.db.get<{ n: number }>(`SELECT COUNT(*) AS n FROM ${table} WHERE game_id = ? AND env = ?`, [
          gameId,
          env,
        ])
      )?.n,
    )
  /** A running experiment per environment: exposures count only for one of their environment. */
  const exps: Record<string, string> = {}
  const runExperiment = async (env: string) => {
    const e = await a.req('POST', '/api/experiments', {
      token: admin,
      body: {
        gameId,
        environment: env,
        name: `forget-${env}`,
        config: {
          variants: [
            { name: 'a', weight: 50 },
            { name: 'b', weight: 50 },
          ],
        },
      },
    })
    expect((await a.req('POST', `/api/experiments/${e.body.id}/publish`, { token: admin })).status).toBe(200)
    exps[env] = e.body.id
  }
  const send = (env: string, id: string) =>
    signed(a, '/api/ingest/events', [
      { event: 'session_start', ts: String(Date.now()), game_id: gameId, env, uid: 'u1', event_id: id },
      {
        event: 'experiment_exposure',
        ts: String(Date.now()),
        game_id: gameId,
        env,
        uid: 'u1',
        event_id: `${id}-x`,
        attrs: { exp: exps[env] ?? 'none', variant: 'a' },
      },
    ])
  const newUsers = async (env: string) =>
    (await a.req('GET', `/api/v1/analytics/overview?gameId=${gameId}&env=${env}`, { token: admin })).body
      .metrics.newUsers.value

  test('deleting an environment deletes its raw rows, event ids and results; created again it starts empty', async () => {
    const qa = await a.req('POST', `/api/games/${gameId}/environments`, {
      token: admin,
      body: { name: 'qa', type: 'STAGING' },
    })
    expect(qa.status).toBeLessThan(300)
    for (const env of ['qa', 'prod']) await runExperiment(env)
    for (const env of ['qa', 'prod']) expect((await send(env, `e-${env}`)).status).toBe(200)
    await until(
      async () => (await rows('analytics_daily', 'qa')) > 0 && (await rows('analytics_daily', 'prod')) > 0,
    )
    await until(
      async () =>
        (await rows('experiments_exposures', 'qa')) > 0 && (await rows('experiments_exposures', 'prod')) > 0,
    )
    expect(await newUsers('qa')).toBe(1)
    const kept = Object.fromEntries(
      await Promise.all([...RESULT_TABLES, ...EXPOSURE_TABLES].map(async (t) => [t, await rows(t, 'prod')])),
    )

    expect((await a.req('DELETE', `/api/games/${gameId}/environments/qa`, { token: admin })).status).toBe(204)
    const left = async () => {
      let n = (await rows('ingest_events', 'qa')) + (await rows('ingest_streams', 'qa'))
      for (const t of [...RESULT_TABLES, ...EXPOSURE_TABLES]) n += await rows(t, 'qa')
      return n
    }
    await until(async () => (await left()) === 0, { what: "every row of the deleted environment 'qa' gone" })
    // The other environment keeps all it had.
    for (const t of [...RESULT_TABLES, ...EXPOSURE_TABLES])
      expect([t, await rows(t, 'prod')]).toEqual([t, kept[t]])
    expect(await rows('ingest_events', 'prod')).toBe(2)

    expect(
      (
        await a.req('POST', `/api/games/${gameId}/environments`, {
          token: admin,
          body: { name: 'qa', type: 'STAGING' },
        })
      ).status,
    ).toBeLessThan(300)
    expect(await newUsers('qa')).toBe(0)
    // The same event ids are new again in the new environment.
    expect((await send('qa', 'e-qa')).status).toBe(200)
    await until(async () => (await rows('ingest_events', 'qa')) === 2)
  })

  test('deleting a game deletes what every one of its environments stored', async () => {
    const other = (await a.req('POST', '/api/games', { token: admin, body: { ...game, name: 'Gone Quest' } }))
      .body.id
    const count = async (table: string) =>
      Number(
        (await a.db.get<{ n: number }>(`SELECT COUNT(*) AS n FROM ${table} WHERE game_id = ?`, [other]))?.n,
      )
    for (const env of ['dev', 'prod'])
      expect(
        (
          await signed(a, '/api/ingest/events', [
            {
              event: 'session_start',
              ts: String(Date.now()),
              game_id: other,
              env,
              uid: 'u9',
              event_id: `g-${env}`,
            },
          ])
        ).status,
      ).toBe(200)
    await until(async () => (await count('analytics_daily')) === 2)
    expect((await a.req('DELETE', `/api/games/${other}`, { token: admin })).status).toBe(204)
    await until(async () => (await count('ingest_events')) + (await count('analytics_daily')) === 0)
  })

  test('every analytics table keyed by game and environment is one a deleted environment empties', async () => {
    if (engine !== 'sqlite') return
    const tables = await a.db.all<{ name: string }>(
      "SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE 'analytics_%' ORDER BY name",
    )
    const keyed: string[] = []
    for (const { name } of tables) {
      const cols = (await a.db.all<{ name: string }>(`PRAGMA table_info(${name})`)).map((c) => c.name)
      if (cols.includes('game_id') && cols.includes('env')) keyed.push(name)
    }
    expect(keyed).toEqual([...RESULT_TABLES].sort())
  })
})
