import { html } from 'htm/preact'
import type { VNode } from 'preact'
import { useMemo } from 'preact/hooks'
import { LineChart, daySeconds } from '../../components/chart'
import { Async, Section } from '../../components/ui'
import { api } from '../../lib/api'
import { money, num, pct } from '../../lib/format'
import { useApi } from '../../lib/hooks'
import { AnalyticsPage, type Frame, Kpi, Kpis } from './frame'

type Pair = { value: number; previous: number }
interface Overview {
  startDate: string
  endDate: string
  previousStartDate: string
  previousEndDate: string
  metrics: Record<
    'dau' | 'mau' | 'newUsers' | 'revenue' | 'arpu' | 'arppu' | 'payingUsers' | 'd1Retention',
    Pair
  >
}
interface Dau {
  points: Array<{ date: string; dau: number; newUsers: number }>
}

function Body({ f }: { f: Frame }): VNode {
  const q = { gameId: f.gameId, env: f.env, startDate: f.startDate, endDate: f.endDate }
  const ov = useApi(
    (signal) => api.get<Overview>('/api/v1/analytics/overview', q, signal),
    [f.gameId, f.env, f.startDate],
  )
  const dau = useApi(
    (signal) =>
      api.get<Dau>(
        '/api/v1/analytics/warehouse/dau',
        { gameId: f.gameId, env: f.env, days: f.days * 2 },
        signal,
      ),
    [f.gameId, f.env, f.days],
  )
  const cur = f.game.defaultCurrency
  const chart = useMemo(() => {
    const pts = dau.data?.points ?? []
    return {
      x: pts.map((p) => daySeconds(p.date)),
      series: [
        { label: 'Daily active users', values: pts.map((p) => p.dau) },
        { label: 'New users', values: pts.map((p) => p.newUsers) },
      ],
    }
  }, [dau.data])
  return html`
    <${Async}
      state=${ov}
      what="the overview"
      isEmpty=${(o: Overview) => Object.values(o.metrics).every((m) => !m.value && !m.previous)}
      empty=${html`<p>No player has been seen in ${f.game.name} / ${f.env} in this period or the one before. Events arrive through ingestion (see the README).</p>`}
      render=${(o: Overview) => {
        const m = o.metrics
        const k = (label: string, key: keyof Overview['metrics'], f: (v: number) => string) =>
          html`<${Kpi} label=${label} value=${f(m[key].value)} now=${m[key].value} before=${m[key].previous} previous=${f(m[key].previous)} />`
        return html`<p class="hint">${o.startDate} to ${o.endDate}, against ${o.previousStartDate} to ${o.previousEndDate}.</p>
          <${Kpis}>
            ${k('Daily active users (average)', 'dau', (v) => num(v, 0))}
            ${k('Monthly active users', 'mau', (v) => num(v, 0))}
            ${k('New users', 'newUsers', (v) => num(v, 0))}
            ${k('Revenue', 'revenue', (v) => money(v, cur))}
            ${k('ARPU', 'arpu', (v) => money(v, cur))}
            ${k('ARPPU', 'arppu', (v) => money(v, cur))}
            ${k('Paying users', 'payingUsers', (v) => num(v, 0))}
            ${k('Day-1 retention', 'd1Retention', (v) => pct(v))}
          <//>`
      }}
    />
    <${Section} title="Active and new users per day">
      <${Async}
        state=${dau}
        what="daily users"
        isEmpty=${(d: Dau) => d.points.every((p) => !p.dau && !p.newUsers)}
        empty=${html`<p>No player has been seen in this period.</p>`}
        render=${() => html`<${LineChart} title="Daily active and new users" days x=${chart.x} series=${chart.series} format=${(v: number) => num(v, 0)} />`}
      />
    <//>
  `
}

/** `#/analytics/overview`: the period's KPIs beside the period before, and users per day. */
export function AnalyticsOverview(): VNode {
  return html`<${AnalyticsPage} title="Analytics overview" render=${(f: Frame) => html`<${Body} f=${f} />`} />`
}
