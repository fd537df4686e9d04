import { describe, expect, test } from 'bun:test'
import { forEachEngine } from '../../../test/helpers'
import { behaviorSuite, day } from './behavior-fixture'

// Levels, episodes and death maps over the behavior fixture (behavior-fixture.ts).
forEachEngine((engine) => {
  const fx = behaviorSuite(engine)
  const { get, q } = fx

  describe('levels (Jan 15)', () => {
    test('per level in play order (1, 2, 10), pass rate = completes / starts, and the level funnel', async () => {
      const r = await get(`levels?${q(day(15))}`)
      expect(r.status).toBe(200)
      expect(r.body).toEqual({
        startDate: '2026-01-15',
        endDate: '2026-01-15',
        levels: [
          // Starts l1 1, l2 2, l3 1; completes l1 l2 (30 s, 40 s); fails l2 l3.
          {
            level: '1',
            starts: 4,
            completes: 2,
            fails: 2,
            players: 3,
            passRate: 0.5,
            failRate: 0.5,
            avgDurationMs: 35000,
          },
          // Starts l1 2, l2 1; completes l1 (50 s); fails l1 l2.
          {
            level: '2',
            starts: 3,
            completes: 1,
            fails: 2,
            players: 2,
            passRate: 0.3333,
            failRate: 0.6667,
            avgDurationMs: 50000,
          },
          {
            level: '10',
            starts: 1,
            completes: 1,
            fails: 0,
            players: 1,
            passRate: 1,
            failRate: 0,
            avgDurationMs: 20000,
          },
        ],
        funnel: [
          { level: '1', players: 3, shareOfFirst: 1 },
          { level: '2', players: 2, shareOfFirst: 0.6667 },
          { level: '10', players: 1, shareOfFirst: 0.3333 },
        ],
      })
      const forest = await get(`levels?${q(day(15))}&episode=forest`)
      expect(forest.body.episode).toBe('forest')
      expect(forest.body.levels.map((l: { level: string }) => l.level)).toEqual(['1', '2'])
    })

    test('per episode', async () => {
      const r = await get(`levels/episodes?${q(day(15))}`)
      expect(r.status).toBe(200)
      expect(r.body.episodes).toEqual([
        {
          episode: 'desert',
          levels: 1,
          starts: 1,
          completes: 1,
          fails: 0,
          players: 1,
          passRate: 1,
          failRate: 0,
          avgDurationMs: 20000,
        },
        {
          // 4 + 3 starts, 2 + 1 completes (30, 40, 50 s), 2 + 2 fails.
          episode: 'forest',
          levels: 2,
          starts: 7,
          completes: 3,
          fails: 4,
          players: 3,
          passRate: 0.4286,
          failRate: 0.5714,
          avgDurationMs: 40000,
        },
      ])
    })

    test('map m1: the heat grid over the deaths own bounds and over given bounds; the newest points', async () => {
      const r = await get(`levels/maps?${q(day(15))}&map=m1&cells=2&limit=2`)
      expect(r.status).toBe(200)
      expect(r.body).toEqual({
        map: 'm1',
        startDate: '2026-01-14T15:00:00.000Z',
        endDate: '2026-01-15T15:00:00.000Z',
        cells: 2,
        bounds: { minX: 0, maxX: 100, minY: 0, maxY: 100 },
        deaths: 4,
        // Cells of 50: (10,10), (0,0), (10,9.5) in the first; (100,100) is the maximum: the last.
        grid: [
          [3, 0],
          [0, 1],
        ],
        points: [
          { x: 100, y: 100, level: '1', userId: 'l3', timestamp: '2026-01-15T03:01:00.000Z' },
          { x: 10, y: 9.5, level: '2', userId: 'l2', timestamp: '2026-01-15T02:10:00.000Z' },
        ],
      })
      const b = await get(`levels/maps?${q(day(15))}&map=m1&cells=2&minX=0&maxX=20&minY=0&maxY=20`)
      // Cells of 10: (0,0) row 0 col 0; (10,9.5) row 0 col 1; (10,10) row 1 col 1; (100,100) outside.
      expect([b.body.deaths, b.body.grid]).toEqual([
        3,
        [
          [1, 1],
          [0, 1],
        ],
      ])
      const none = await get(`levels/maps?${q(day(15))}&map=nowhere`)
      expect([none.body.deaths, none.body.bounds, none.body.points]).toEqual([0, null, []])
    })

    test('bad input 400 naming the field; 401; 404', async () => {
      const cells = await get(`levels/maps?${q()}&map=m1&cells=101`)
      expect([cells.status, cells.body.message]).toEqual([400, expect.stringContaining('query.cells')])
      const bound = await get(`levels/maps?${q()}&map=m1&minX=5&maxX=5`)
      expect([bound.status, bound.body.message]).toEqual([400, expect.stringContaining('query.maxX')])
      const nomap = await get(`levels/maps?${q()}`)
      expect([nomap.status, nomap.body.message]).toEqual([400, expect.stringContaining('map')])
      const wide = await get(`levels?${q()}&startDate=2025-01-01&endDate=2026-01-15`)
      expect([wide.status, wide.body.message]).toEqual([400, expect.stringContaining('query.endDate')])
      const bad = await get(`levels/episodes?${q()}&startDate=2026-1-5&endDate=2026-01-15`)
      expect([bad.status, bad.body.message]).toEqual([400, expect.stringContaining('query.startDate')])
      for (const path of ['levels', 'levels/episodes', 'levels/maps?map=m1&'])
        expect((await get(`${path}${path.endsWith('&') ? '' : '?'}${q()}`, null)).status).toBe(401)
      expect((await get('levels?gameId=nope&env=prod')).status).toBe(404)
      expect((await get('levels/episodes?gameId=nope&env=prod')).status).toBe(404)
      expect((await get(`levels/maps?gameId=${fx.gameId}&env=qa&map=m1`)).status).toBe(404)
    })
  })
})
