import { html } from 'htm/preact'
import type { VNode } from 'preact'
import { useMemo } from 'preact/hooks'
import { LineChart, daySeconds } from '../../components/chart'
import { Table } from '../../components/table'
import { Async, Section } from '../../components/ui'
import { api } from '../../lib/api'
import { money, ms, num, pct } from '../../lib/format'
import { useApi } from '../../lib/hooks'
import { AnalyticsPage, type Frame, Kpi, Kpis } from './frame'

const game = (f: Frame, what: string) => `/api/analytics/${what}/${encodeURIComponent(f.gameId)}`
const range = (f: Frame) => ({ startDate: f.startDate, endDate: f.endDate, env: f.env })

interface RevenueOverview {
  totalRevenue: number
  iapRevenue: number
  adRevenue: number
  subscriptionRevenue: number
}
interface Arpu {
  date: string
  arpu: number
  arppu: number
  payingUsers: number
  totalUsers: number
}
interface Daily {
  date: string
  revenue: number
  refunds: number
  transactions: number
  users: number
}
interface Platform {
  platform: string
  revenue: number
  arpu: number
  arppu: number
}

function Revenue({ f }: { f: Frame }): VNode {
  const cur = f.game.defaultCurrency
  const key = [f.gameId, f.env, f.startDate]
  const ov = useApi(
    (signal) => api.get<RevenueOverview>(`${game(f, 'revenue')}/overview`, range(f), signal),
    key,
  )
  const arpu = useApi((signal) => api.get<Arpu[]>(`${game(f, 'revenue')}/arpu`, range(f), signal), key)
  const daily = useApi(
    (signal) =>
      api.get<Daily[]>(
        '/api/v1/analytics/payments/summary',
        { gameId: f.gameId, env: f.env, startDate: f.startDate, endDate: f.endDate },
        signal,
      ),
    key,
  )
  const platforms = useApi(
    (signal) => api.get<Platform[]>(`${game(f, 'revenue')}/by-platform`, range(f), signal),
    key,
  )
  const fmt = (v: number) => money(v, cur)
  const dailyChart = useMemo(() => {
    const d = daily.data ?? []
    return {
      x: d.map((p) => daySeconds(p.date)),
      series: [
        { label: 'Revenue', values: d.map((p) => p.revenue) },
        { label: 'Refunds', values: d.map((p) => p.refunds) },
      ],
    }
  }, [daily.data])
  const arpuChart = useMemo(() => {
    const d = arpu.data ?? []
    return {
      x: d.map((p) => daySeconds(p.date)),
      series: [
        { label: 'ARPU', values: d.map((p) => p.arpu) },
        { label: 'ARPPU', values: d.map((p) => p.arppu) },
      ],
    }
  }, [arpu.data])
  return html`
    <${Async}
      state=${ov}
      what="revenue"
      render=${(o: RevenueOverview) => html`<${Kpis}>
        <${Kpi} label="Total revenue" value=${fmt(o.totalRevenue)} />
        <${Kpi} label="In-app purchases" value=${fmt(o.iapRevenue)} />
        <${Kpi} label="Subscriptions" value=${fmt(o.subscriptionRevenue)} />
        <${Kpi} label="Ads" value=${fmt(o.adRevenue)} />
      <//>`}
    />
    <${Section} title="Payments per day">
      <${Async}
        state=${daily}
        what="daily payments"
        isEmpty=${(d: Daily[]) => d.every((x) => x.transactions === 0)}
        empty=${html`<p>No payment in this period.</p>`}
        render=${() => html`<${LineChart} title="Revenue and refunds per day" days x=${dailyChart.x} series=${dailyChart.series} format=${fmt} />`}
      />
    <//>
    <${Section} title="Revenue per user">
      <${Async}
        state=${arpu}
        what="ARPU"
        isEmpty=${(d: Arpu[]) => d.length === 0}
        render=${() => html`<${LineChart} title="ARPU and ARPPU per day" days x=${arpuChart.x} series=${arpuChart.series} format=${fmt} />`}
      />
    <//>
    <${Section} title="By platform">
      <${Async}
        state=${platforms}
        what="platforms"
        isEmpty=${(d: Platform[]) => d.length === 0}
        empty=${html`<p>No payment names a platform.</p>`}
        render=${(d: Platform[]) => html`<${Table}
          caption="Revenue by platform"
          hideCaption
          rows=${d}
          rowKey=${(r: Platform) => r.platform}
          columns=${[
            { label: 'Platform', value: (r: Platform) => r.platform },
            { label: 'Revenue', value: (r: Platform) => fmt(r.revenue), numeric: true },
            { label: 'ARPU', value: (r: Platform) => fmt(r.arpu), numeric: true },
            { label: 'ARPPU', value: (r: Platform) => fmt(r.arppu), numeric: true },
          ]}
        />`}
      />
    <//>
  `
}

interface AdsOverview {
  totalRevenue: number
  totalImpressions: number
  avgEcpm: number
  avgFillRate: number
  networkCount: number
}
interface Network {
  network: string
  revenue: number
  impressions: number
  ecpm: number
  fillRate: number
  requests: number
}

function Ads({ f }: { f: Frame }): VNode {
  const cur = f.game.defaultCurrency
  const key = [f.gameId, f.env, f.startDate]
  const ov = useApi((signal) => api.get<AdsOverview>(`${game(f, 'ads')}/overview`, range(f), signal), key)
  const nets = useApi((signal) => api.get<Network[]>(`${game(f, 'ads')}/by-network`, range(f), signal), key)
  return html`
    <${Async}
      state=${ov}
      what="ad figures"
      isEmpty=${(o: AdsOverview) => o.totalImpressions === 0 && o.networkCount === 0}
      empty=${html`<p>No ad request or impression in this period.</p>`}
      render=${(o: AdsOverview) => html`<${Kpis}>
        <${Kpi} label="Ad revenue" value=${money(o.totalRevenue, cur)} />
        <${Kpi} label="Impressions" value=${num(o.totalImpressions, 0)} />
        <${Kpi} label="eCPM" value=${money(o.avgEcpm, cur)} />
        <${Kpi} label="Fill rate" value=${pct(o.avgFillRate)} />
      <//>`}
    />
    <${Section} title="By network">
      <${Async}
        state=${nets}
        what="networks"
        isEmpty=${(d: Network[]) => d.length === 0}
        empty=${html`<p>No ad network reported.</p>`}
        render=${(d: Network[]) => html`<${Table}
          caption="Ad networks"
          hideCaption
          rows=${d}
          rowKey=${(r: Network) => r.network}
          columns=${[
            { label: 'Network', value: (r: Network) => r.network },
            { label: 'Revenue', value: (r: Network) => money(r.revenue, cur), numeric: true },
            { label: 'Impressions', value: (r: Network) => num(r.impressions, 0), numeric: true },
            { label: 'Requests', value: (r: Network) => num(r.requests, 0), numeric: true },
            { label: 'Fill rate', value: (r: Network) => pct(r.fillRate), numeric: true },
            { label: 'eCPM', value: (r: Network) => money(r.ecpm, cur), numeric: true },
          ]}
        />`}
      />
    <//>
  `
}

interface SessionsOverview {
  avgSessionDuration: number
  avgEventsPerSession: number
  avgBounceRate: number
}
interface SessionDay {
  date: string
  avgDuration: number
  avgEvents: number
  bounceRate: number
}

function Sessions({ f }: { f: Frame }): VNode {
  const key = [f.gameId, f.env, f.startDate]
  const ov = useApi(
    (signal) => api.get<SessionsOverview>(`${game(f, 'sessions')}/overview`, range(f), signal),
    key,
  )
  const trend = useApi(
    (signal) => api.get<SessionDay[]>(`${game(f, 'sessions')}/trends`, range(f), signal),
    key,
  )
  const chart = useMemo(() => {
    const d = trend.data ?? []
    return {
      x: d.map((p) => daySeconds(p.date)),
      series: [
        { label: 'Average length (min)', values: d.map((p) => Math.round(p.avgDuration / 600) / 100) },
        { label: 'Events per session', values: d.map((p) => p.avgEvents), right: true },
      ],
    }
  }, [trend.data])
  return html`
    <${Async}
      state=${ov}
      what="sessions"
      isEmpty=${(o: SessionsOverview) => !o.avgSessionDuration && !o.avgEventsPerSession}
      empty=${html`<p>No session ended in this period (sessions are counted from <code>session_end</code>).</p>`}
      render=${(o: SessionsOverview) => html`<${Kpis}>
        <${Kpi} label="Average session" value=${ms(o.avgSessionDuration)} />
        <${Kpi} label="Events per session" value=${num(o.avgEventsPerSession)} />
        <${Kpi} label="Bounce rate" value=${pct(o.avgBounceRate)} />
      <//>`}
    />
    <${Section} title="Per day">
      <${Async}
        state=${trend}
        what="session trends"
        isEmpty=${(d: SessionDay[]) => d.length === 0}
        empty=${html`<p>No session ended in this period.</p>`}
        render=${() => html`<${LineChart} title="Session length and events per session" days x=${chart.x} series=${chart.series} format=${(v: number) => num(v)} />`}
      />
    <//>
  `
}

export function AnalyticsRevenue(): VNode {
  return html`<${AnalyticsPage} title="Revenue" render=${(f: Frame) => html`<${Revenue} f=${f} />`} />`
}
export function AnalyticsAds(): VNode {
  return html`<${AnalyticsPage} title="Ads" render=${(f: Frame) => html`<${Ads} f=${f} />`} />`
}
export function AnalyticsSessions(): VNode {
  return html`<${AnalyticsPage} title="Sessions" render=${(f: Frame) => html`<${Sessions} f=${f} />`} />`
}
