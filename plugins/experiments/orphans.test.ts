import { expect, test } from 'bun:test'
import { join } from 'node:path'
import { makeApp } from '../../test/helpers'

/**
 * Experiments whose environment is gone (deleted before deletions took their experiments along,
 * or by a process that stopped before it did) are deleted at start: they had come back, salt and
 * variants, in an environment created later under the name.
 */
const GAME = {
  name: 'Orphan Game',
  genre: 'CASUAL',
  platforms: ['IOS'],
  timezone: 'Pacific/Auckland',
  defaultCurrency: 'NZD',
}
const CONFIG = {
  variants: [
    { name: 'A', weight: 30 },
    { name: 'B', weight: 70 },
  ],
}

test('experiments left behind by an environment deleted without them are gone after a restart', async () => {
  const plugins = { games: {}, ingest: {}, experiments: {} }
  const a = await makeApp('sqlite', { plugins })
  let b: Awaited<ReturnType<typeof makeApp>> | undefined
  try {
    const admin = await a.token('admin')
    const gameId = (await a.req('POST', '/api/games', { token: admin, body: GAME })).body.id as string
    const ids: string[] = []
    for (const environment of ['staging', 'prod']) {
      const e = (
        await a.req('POST', '/api/experiments', {
          token: admin,
          body: { gameId, environment, name: `left-${environment}`, config: CONFIG },
        })
      ).body
      expect((await a.req('POST', `/api/experiments/${e.id}/publish`, { token: admin })).status).toBe(200)
      ids.push(e.id)
    }
    // A release before deletions took the experiments along deleted the environment alone.
    expect(await a.db.run(`DELETE FROM environments WHERE game_id = ? AND name = 'staging'`, [gameId])).toBe(
      1,
    )
    b = await makeApp('sqlite', { plugins, config: { database: { url: join(a.dataDir, 'test.sqlite') } } })
    const left = await b.db.all<{ id: string }>('SELECT id FROM experiments WHERE game_id = ?', [gameId])
    expect(left.map((r) => r.id)).toEqual([ids[1]])
    // An environment created again under the name starts with no experiment of its namesake.
    const created = await b.req('POST', `/api/games/${gameId}/environments`, {
      token: admin,
      body: { name: 'staging', type: 'STAGING' },
    })
    expect(created.status).toBe(201)
    expect((await b.req('GET', `/api/config/${gameId}/staging`)).body).toEqual([])
    expect((await b.req('GET', `/api/config/${gameId}/prod`)).body).toHaveLength(1)
  } finally {
    await b?.stop()
    await a.stop()
  }
})
