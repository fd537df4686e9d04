import { html } from 'htm/preact'
import type { VNode } from 'preact'
import { useEffect, useState } from 'preact/hooks'
import { Bars } from '../../components/chart'
import { Select } from '../../components/form'
import { HeatGrid } from '../../components/heatmap'
import { Table } from '../../components/table'
import { Async, Empty, Section } from '../../components/ui'
import { api } from '../../lib/api'
import { ms, num, pct, when } from '../../lib/format'
import { useApi } from '../../lib/hooks'
import { AnalyticsPage, type Frame } from './frame'

interface Level {
  level: string
  starts: number
  completes: number
  fails: number
  players: number
  passRate: number
  avgDurationMs: number | null
}
interface Levels {
  levels: Level[]
  funnel: Array<{ level: string; players: number; shareOfFirst: number }>
}
interface DeathMap {
  map: string
  cells: number
  deaths: number
  bounds: { minX: number; maxX: number; minY: number; maxY: number } | null
  grid: number[][]
  points: Array<{ x: number; y: number; level: string; userId: string | null; timestamp: string }>
}
interface Events {
  items: Array<{ properties: Record<string, unknown> }>
}

/** The maps players died on lately (the newest level_fail events name them). */
function useMaps(f: Frame): string[] | undefined {
  const s = useApi(
    (signal) =>
      api.get<Events>(
        '/api/v1/analytics/behavior/events',
        {
          gameId: f.gameId,
          env: f.env,
          event: 'level_fail',
          pageSize: 100,
          startDate: new Date(Date.now() - 6 * 86_400_000).toISOString(),
        },
        signal,
      ),
    [f.gameId, f.env],
  )
  if (!s.data) return s.error ? [] : undefined
  return [
    ...new Set(s.data.items.map((e) => e.properties.map).filter((m): m is string => typeof m === 'string')),
  ].sort()
}

function Deaths({ f }: { f: Frame }): VNode {
  const maps = useMaps(f)
  const [map, setMap] = useState<string>()
  useEffect(() => {
    if (maps?.length && (!map || !maps.includes(map))) setMap(maps[0])
  }, [maps, map])
  const days = Math.min(f.days, 92)
  const state = useApi(
    (signal) =>
      map
        ? api.get<DeathMap>(
            '/api/v1/analytics/levels/maps',
            {
              gameId: f.gameId,
              env: f.env,
              map,
              cells: 16,
              limit: 8,
              startDate: new Date(Date.now() - days * 86_400_000).toISOString(),
              endDate: new Date().toISOString(),
            },
            signal,
          )
        : undefined,
    [f.gameId, f.env, map, days],
  )
  if (maps === undefined) return html`<p class="state loading" role="status">Loading maps…</p>`
  if (!maps.length)
    return html`<${Empty}><p>No death (<code>level_fail</code> with x and y) in the last 6 days.</p><//>`
  return html`<div class="filters"><${Select} label="Map" value=${map ?? ''} options=${maps} onValue=${setMap} /></div>
    <${Async}
      state=${state}
      what="the death map"
      isEmpty=${(d: DeathMap) => d.deaths === 0 || !d.bounds}
      empty=${html`<p>No death on this map in the period.</p>`}
      render=${(d: DeathMap) => html`<div class="deaths">
        <${HeatGrid} title=${`Deaths on ${d.map}`} grid=${d.grid} bounds=${d.bounds} />
        <${Table}
          caption="Newest deaths"
          rows=${d.points}
          rowKey=${(p: DeathMap['points'][number]) => `${p.timestamp}${p.x}${p.y}`}
          columns=${[
            { label: 'When', value: (p: DeathMap['points'][number]) => when(p.timestamp) },
            { label: 'Level', value: (p: DeathMap['points'][number]) => p.level },
            {
              label: 'x, y',
              value: (p: DeathMap['points'][number]) => `${p.x.toFixed(1)}, ${p.y.toFixed(1)}`,
              numeric: true,
            },
          ]}
        />
      </div>`}
    />`
}

function Body({ f }: { f: Frame }): VNode {
  const state = useApi(
    (signal) =>
      api.get<Levels>(
        '/api/v1/analytics/levels',
        { gameId: f.gameId, env: f.env, startDate: f.startDate, endDate: f.endDate },
        signal,
      ),
    [f.gameId, f.env, f.startDate],
  )
  return html`
    <${Section} title="Levels">
      <${Async}
        state=${state}
        what="levels"
        isEmpty=${(d: Levels) => d.levels.length === 0}
        empty=${html`<p>No level was played in this period (<code>level_start</code>, <code>level_complete</code>, <code>level_fail</code>).</p>`}
        render=${(d: Levels) => html`<${Table}
            caption="Pass rate per level"
            hideCaption
            rows=${d.levels}
            rowKey=${(l: Level) => l.level}
            columns=${[
              { label: 'Level', value: (l: Level) => l.level },
              { label: 'Players', value: (l: Level) => num(l.players, 0), numeric: true },
              { label: 'Starts', value: (l: Level) => num(l.starts, 0), numeric: true },
              { label: 'Completes', value: (l: Level) => num(l.completes, 0), numeric: true },
              { label: 'Fails', value: (l: Level) => num(l.fails, 0), numeric: true },
              { label: 'Pass rate', value: (l: Level) => pct(l.passRate), numeric: true },
              { label: 'Average time', value: (l: Level) => ms(l.avgDurationMs), numeric: true },
            ]}
          />
          <${Bars}
            title="Players per level"
            rows=${d.funnel.map((x) => ({ label: `Level ${x.level}`, value: x.players, text: num(x.players, 0), note: `${pct(x.shareOfFirst, 0)} of level 1` }))}
          />`}
      />
    <//>
    <${Section} title="Where players die"><${Deaths} f=${f} /><//>
  `
}

/** `#/analytics/levels`: pass rates, the level funnel and a heat map of deaths per map. */
export function AnalyticsLevels(): VNode {
  return html`<${AnalyticsPage} title="Levels" render=${(f: Frame) => html`<${Body} f=${f} />`} />`
}
