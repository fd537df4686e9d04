import { afterAll, beforeAll } from 'bun:test'
import type { Engine, TestApp } from '../../../test/helpers'
import { ingestApp } from '../testing'

/**
 * The app of `engine` (ingestApp: games, signed ingestion, analytics and one game) for the calling
 * file's suite: `fx.a`, `fx.admin` and `fx.gameId` once it began; `ev` is an event of the game's
 * prod environment at this moment, `count` the `n` a query of the store answers. The ingestion
 * tests beside this file use it, and the warehouse's (plugins/analytics/warehouse).
 */
export function ingestSuite(engine: Engine) {
  const fx = { a: undefined as unknown as TestApp, admin: '', gameId: '' }
  const ev = (event: string, extra: Record<string, unknown> = {}) => ({
    event,
    ts: String(Date.now()),
    game_id: fx.gameId,
    env: 'prod',
    ...extra,
  })
  const count = async (sql: string, params: (string | number)[] = []) =>
    Number((await fx.a.db.get<{ n: number }>(sql, params))?.n ?? 0)

  beforeAll(async () => {
    Object.assign(fx, await ingestApp(engine))
  })
  afterAll(() => fx.a.stop())
  return Object.assign(fx, { ev, count })
}
