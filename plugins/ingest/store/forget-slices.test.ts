import { afterAll, beforeAll, expect, test } from 'bun:test'
import { join } from 'node:path'
import { Elysia } from 'elysia'
import { SLICE } from '../../../core/db/slices'
import { definePlugin } from '../../../core/plugin'
import { type TestApp, forEachEngine, makeApp, until } from '../../../test/helpers'
import { RESULT_TABLES } from '../../analytics/migrations'
import { SECRET, game, signed } from '../testing'
import type { IngestService } from '../types'

/*
 * A deleted game's rows go in slices in the background (forgetting.ts): all of them, however many
 * slices they take, none of another game's; the event log's consumers put none back; and a
 * deletion a stop interrupted is finished by the next start.
 */
let ingest: IngestService | undefined
/** Reaches the ingest service, as a plugin of the app does. */
const probe = definePlugin({
  name: 'probe',
  dependsOn: ['ingest'],
  setup(ctx) {
    ingest = ctx.service('ingest')
    return new Elysia({ name: 'probe' })
  },
})
const TABLES = ['ingest_events', 'ingest_payments', 'ingest_invocations', 'ingest_streams', ...RESULT_TABLES]
const plugins = {
  games: {},
  ingest: { signing_secret: SECRET, purge_interval_minutes: 0 },
  analytics: {},
  probe: {},
}

forEachEngine((engine) => {
  let a: TestApp
  let admin: string
  beforeAll(async () => {
    a = await makeApp(engine, { plugins, extraPlugins: { probe } })
    admin = await a.token('admin')
  })
  afterAll(() => a.stop())

  /** Each table's rows of the game (and environment), the tables with none left out. */
  const rows = async (app: TestApp, gameId: string, env?: string) => {
    const out: Record<string, number> = {}
    for (const t of TABLES) {
      const r = await app.db.get<{ n: number }>(
        `SELECT COUNT(*) AS n FROM ${t} WHERE game_id = ?${env ? ' AND env = ?' : ''}`,
        env ? [gameId, env] : [gameId],
      )
      if (Number(r?.n)) out[t] = Number(r?.n)
    }
    return out
  }
  const newGame = async (name: string) =>
    (await a.req('POST', '/api/games', { token: admin, body: { ...game, name } })).body.id as string
  /** `n` users' first sessions, a payment and a call each tenth, in batches of 1,000. */
  const play = async (gameId: string, env: string, n: number) => {
    const now = Date.now()
    for (let from = 0; from < n; from += 1000) {
      const batch = []
      for (let i = from; i < Math.min(n, from + 1000); i++) {
        const base = { ts: String(now - i), game_id: gameId, env, uid: `u${i}` }
        batch.push({ ...base, event: 'session_start', event_id: `s${i}` })
        if (i % 10 === 0)
          batch.push({
            ...base,
            event: 'payment',
            event_id: `p${i}`,
            order_id: `o${i}`,
            status: 'success',
            amount_cents: 99,
          })
      }
      expect((await signed(a, '/api/ingest/events', batch)).status).toBe(200)
    }
    await a.events.drain()
  }
  const marks = async (app: TestApp) =>
    Number((await app.db.get<{ n: number }>('SELECT COUNT(*) AS n FROM ingest_forgetting'))?.n)

  test('a deleted game with rows for many slices is deleted whole; another game keeps every row', async () => {
    const gone = await newGame('Many Slices')
    const kept = await newGame('Kept Quest')
    await play(gone, 'prod', SLICE * 2 + 500)
    await play(gone, 'dev', 300)
    await play(kept, 'prod', 400)
    const before = await rows(a, gone)
    for (const t of ['ingest_events', 'analytics_user_day', 'analytics_first_seen'])
      expect(before[t]).toBeGreaterThan(SLICE * 2)
    const keptBefore = await rows(a, kept)
    expect(Object.keys(keptBefore).length).toBeGreaterThan(8)

    expect((await a.req('DELETE', `/api/games/${gone}`, { token: admin })).status).toBe(204)
    await until(async () => Object.keys(await rows(a, gone)).length === 0 && (await marks(a)) === 0, {
      what: 'every row of the deleted game gone, and its record',
      ms: 30_000,
    })
    expect(await rows(a, kept)).toEqual(keptBefore)
  })

  test('events of a deleted game committed after its deletion (another instance’s late commit) are counted by no consumer', async () => {
    const gone = await newGame('Late Commit')
    await play(gone, 'prod', 20)
    expect((await a.req('DELETE', `/api/games/${gone}`, { token: admin })).status).toBe(204)
    await until(async () => Object.keys(await rows(a, gone)).length === 0 && (await marks(a)) === 0)
    // Accepted by an instance that had not yet heard of the deletion: stored after the walk passed.
    await ingest!.ingest([
      { event: 'session_start', ts: String(Date.now()), game_id: gone, env: 'prod', uid: 'late' },
    ])
    await a.events.drain()
    const left = await rows(a, gone)
    expect(left).toEqual({ ingest_events: 1 })
  })

  test('a deletion a stop interrupted, and an environment gone without one, are finished by the next start', async () => {
    const gone = await newGame('Interrupted')
    const kept = await newGame('Half Kept')
    await play(gone, 'prod', 600)
    await play(kept, 'prod', 200)
    await play(kept, 'dev', 200)
    const keptProd = await rows(a, kept, 'prod')
    // A stop between two slices: the game is deleted and recorded, its raw events half gone.
    await a.db.run('DELETE FROM games WHERE id = ?', [gone])
    await a.db.run('INSERT INTO ingest_forgetting (game_id, env, deleted_at) VALUES (?, ?, ?)', [
      gone,
      '',
      Date.now(),
    ])
    const half = await a.db.get<{ id: number }>(
      'SELECT id FROM ingest_events WHERE game_id = ? ORDER BY id LIMIT 1 OFFSET 300',
      [gone],
    )
    await a.db.run('DELETE FROM ingest_events WHERE game_id = ? AND id < ?', [gone, Number(half?.id)])
    // A release before deletions were recorded deleted an environment and stopped before its rows.
    await a.db.run("DELETE FROM environments WHERE game_id = ? AND name = 'dev'", [kept])
    expect((await rows(a, gone)).analytics_user_day).toBe(600)
    expect((await rows(a, kept, 'dev')).analytics_user_day).toBe(200)

    const b = await makeApp(engine, {
      plugins,
      extraPlugins: { probe },
      store: a,
      config: engine === 'sqlite' ? { database: { url: join(a.dataDir, 'test.sqlite') } } : {},
    })
    try {
      await until(
        async () =>
          Object.keys(await rows(b, gone)).length === 0 &&
          Object.keys(await rows(b, kept, 'dev')).length === 0 &&
          (await marks(b)) === 0,
        { what: 'the interrupted deletion and the vanished environment finished by the start', ms: 30_000 },
      )
      expect(await rows(b, kept, 'prod')).toEqual(keptProd)
    } finally {
      await b.stop()
    }
  })
})
