import { html } from 'htm/preact'
import type { VNode } from 'preact'
import { Select } from '../../components/form'
import { HeatTable } from '../../components/heatmap'
import { Async, Section } from '../../components/ui'
import { api } from '../../lib/api'
import { isoDay, num, pct } from '../../lib/format'
import { useApi } from '../../lib/hooks'
import { navigate, route } from '../../lib/router'
import { useStore } from '../../lib/store'
import { AnalyticsPage, type Frame } from './frame'

interface Retention {
  interval: string
  size: number
  cohorts: Array<{
    cohort: string
    users: number
    counts: Array<number | null>
    retention: Array<number | null>
  }>
}

function Matrix({ f, interval }: { f: Frame; interval: string }): VNode {
  const weeks = interval === 'week'
  const size = weeks ? 8 : 14
  const state = useApi(
    (signal) =>
      api.get<Retention>(
        '/api/v1/analytics/retention',
        {
          gameId: f.gameId,
          env: f.env,
          interval,
          size,
          startDate: isoDay(weeks ? -7 * 8 : -(f.days - 1)),
          endDate: f.endDate,
        },
        signal,
      ),
    [f.gameId, f.env, interval, f.days],
  )
  return html`<${Async}
    state=${state}
    what="the retention matrix"
    isEmpty=${(d: Retention) => d.cohorts.every((c) => c.users === 0)}
    empty=${html`<p>No new player in this period, so no cohort to follow.</p>`}
    render=${(d: Retention) => html`<${HeatTable}
      caption=${`Share of each ${d.interval}'s new players who came back N ${d.interval}s later`}
      corner=${d.interval === 'week' ? 'Cohort (week of)' : 'Cohort (first day)'}
      aside="Players"
      columns=${Array.from({ length: d.size }, (_, i) => `${d.interval === 'week' ? 'Week' : 'Day'} ${i + 1}`)}
      rows=${d.cohorts
        .filter((c) => c.users > 0)
        .map((c) => ({
          label: c.cohort,
          aside: num(c.users, 0),
          cells: c.retention.map((v, i) => ({
            value: v,
            text: v === null ? '' : `${pct(v, 0)}`,
            title: String(c.counts[i]),
          })),
        }))}
    />`}
  />`
}

/** `#/analytics/retention`: the cohort matrix by day or week, as a heat map. */
export function AnalyticsRetention(): VNode {
  const r = useStore(route)
  const interval = r.query.get('interval') === 'week' ? 'week' : 'day'
  return html`<${AnalyticsPage}
    title="Retention"
    ranges=${[14, 30]}
    intro="Players grouped by the day (or week) they were first seen; each cell is the share of them active that many days (weeks) later."
    filters=${html`<${Select}
          label="Cohorts by"
          value=${interval}
          options=${[['day', 'Day'], ['week', 'Week']]}
          onValue=${(v: string) => navigate(r.path, { ...Object.fromEntries(r.query), interval: v })}
        />`}
    render=${(f: Frame) => html`
      <${Section} title="Retention matrix"><${Matrix} f=${f} interval=${interval} /><//>
    `}
  />`
}
