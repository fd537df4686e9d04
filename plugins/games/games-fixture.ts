import { afterAll, beforeAll, expect } from 'bun:test'
import { type Engine, type TestApp, makeApp } from '../../test/helpers'

/**
 * The games plugin's route tests: the games-*.test.ts files beside this one (lifecycle: games
 * made, listed, updated, published and deleted; environments; api-keys).
 */

export const newGame = {
  name: 'Dragon Tales',
  genre: 'RPG',
  platforms: ['ANDROID', 'IOS'],
  timezone: 'Europe/Berlin',
  defaultCurrency: 'EUR',
}

/**
 * The app of the calling file's suite on `engine`, started once: `fx.a` and `fx.admin` once it
 * began; `create` makes a game as admin (`newGame` unless told) and answers its body.
 */
export function gamesSuite(engine: Engine) {
  const fx = { a: undefined as unknown as TestApp, admin: '' }
  beforeAll(async () => {
    fx.a = await makeApp(engine, { plugins: { games: {} } })
    fx.admin = await fx.a.token('admin')
  })
  afterAll(() => fx.a.stop())

  const create = async (body: Record<string, unknown> = newGame) => {
    const r = await fx.a.req('POST', '/api/games', { token: fx.admin, body })
    expect(r.status).toBe(201)
    return r.body
  }
  return Object.assign(fx, { create })
}
