import { Elysia } from 'elysia'
import { t } from 'elysia'
import { invalidField } from '../../../core/http'
import type { PluginContext } from '../../../core/plugin'
import type { GamesService } from '../../games/types'
import { DAY } from '../lib/time'
import { intParam } from '../schema'
import type { levelAnalytics } from './levels'
import { Days, Int, Num, Times, doc, scoping } from './route-scope'

type Levels = ReturnType<typeof levelAnalytics>

const levelsDoc = doc(
  'Per level: starts, completes, fails, players, pass rate, average duration; and the level funnel',
  'passRate = level_complete / level_start events of the range; failRate = level_fail / level_start; players: distinct users with any level event of it; avgDurationMs: mean duration_ms of its level_complete events (null without any). Levels of every episode with one name are merged unless episode is given. funnel: players per level in play order (numbers by value), shareOfFirst = players / players of the first level. Default the last 30 days, at most 366.',
)

const levelsEpisodesDoc = doc(
  'Per episode: levels, starts, completes, fails, players, pass rate, average duration',
  'As /levels, summed over the levels of each episode (events without episode: ""); players are distinct over the episode.',
)

const levelsMapsDoc = doc(
  'Death points of a map: a cells x cells heat grid of level_fail x/y and the newest points',
  'grid[row][column]: row by y from minY, column by x from minX; each cell spans (max - min) / cells, the maximum falls in the last cell; deaths outside given bounds are not in the grid. Only level_fail events with numeric x and y count. Default the last 7 days, at most 92.',
)

/** Level routes of the server analytics (spec 1 `/levels`, `/levels/episodes`, `/levels/maps`, issue 17). */
export function levelRoutes(
  guard: PluginContext<unknown>['guard'],
  games: GamesService,
  levels: () => Levels,
) {
  const { days, times } = scoping(games)
  return new Elysia({ name: 'analytics.levels' })
    .use(guard)
    .get(
      '/api/v1/analytics/levels',
      async ({ query }) => levels().levels({ ...(await days(query, 30, 366)), episode: query.episode }),
      {
        query: t.Object({
          ...Days(30, 366),
          episode: t.Optional(t.String({ description: 'one episode only' })),
        }),
        ...levelsDoc,
      },
    )
    .get(
      '/api/v1/analytics/levels/episodes',
      async ({ query }) => levels().episodes(await days(query, 30, 366)),
      {
        query: t.Object(Days(30, 366)),
        ...levelsEpisodesDoc,
      },
    )
    .get(
      '/api/v1/analytics/levels/maps',
      async ({ query }) => {
        const bound = (v: string | undefined, field: string) => {
          if (v === undefined) return undefined
          const x = Number(v)
          if (!Number.isFinite(x) || Math.abs(x) > 1e12)
            throw invalidField(`query.${field}`, 'must be a number within ±1e12')
          return x
        }
        const bounds = {
          minX: bound(query.minX, 'minX'),
          maxX: bound(query.maxX, 'maxX'),
          minY: bound(query.minY, 'minY'),
          maxY: bound(query.maxY, 'maxY'),
        }
        if (bounds.minX !== undefined && bounds.maxX !== undefined && bounds.maxX <= bounds.minX)
          throw invalidField('query.maxX', 'must be greater than minX')
        if (bounds.minY !== undefined && bounds.maxY !== undefined && bounds.maxY <= bounds.minY)
          throw invalidField('query.maxY', 'must be greater than minY')
        return levels().map({
          ...(await times(query, 7 * DAY, 92 * DAY)),
          map: query.map,
          cells: intParam(query.cells, 'cells', 1, 100, 20),
          limit: intParam(query.limit, 'limit', 1, 1000, 100),
          bounds,
        })
      },
      {
        query: t.Object({
          ...Times('7 days', '92 days'),
          map: t.String({ description: 'the map attribute of level_fail ("" for none)' }),
          cells: Int('cells per axis of the heat grid: default 20, 1..100'),
          limit: Int('newest death points: default 100, 1..1000'),
          minX: Num('grid bounds (default: the deaths of the range)'),
          maxX: Num('grid bound'),
          minY: Num('grid bound'),
          maxY: Num('grid bound'),
        }),
        ...levelsMapsDoc,
      },
    )
}
