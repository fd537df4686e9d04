import { html } from 'htm/preact'
import type { VNode } from 'preact'
import { useEffect, useMemo, useState } from 'preact/hooks'
import { LineChart } from '../../components/chart'
import { Async, ErrorNote, Section } from '../../components/ui'
import { api } from '../../lib/api'
import { money, num } from '../../lib/format'
import { useApi, useInterval } from '../../lib/hooks'
import { type StreamState, openStream } from '../../lib/sse'
import { AnalyticsPage, type Frame, Kpi, Kpis } from './frame'

interface Snapshot {
  ts: number
  onlineNow: number
  eventsPerMinute: number
  eventsThisMinute: number
  revenueToday: number
  activeToday: number
}
interface SeriesOut {
  points: Array<{ minute: string; online: number; events: number; revenue: number }>
}

function StreamStatus({ s, at }: { s: StreamState; at?: number }): VNode {
  const text =
    s.kind === 'open'
      ? `Live${at ? `, updated ${new Date(at).toLocaleTimeString('en-GB')}` : ''}`
      : s.kind === 'connecting'
        ? 'Connecting…'
        : s.kind === 'waiting'
          ? `Reconnecting in ${s.seconds} s (${s.why})`
          : 'Stopped'
  return html`<p class=${`live ${s.kind}`}><span class="dot" aria-hidden="true"></span>${text}</p>`
}

function Body({ f }: { f: Frame }): VNode {
  const [snap, setSnap] = useState<Snapshot>()
  const [state, setState] = useState<StreamState>({ kind: 'connecting' })
  useEffect(() => {
    setSnap(undefined)
    return openStream(
      '/api/v1/analytics/realtime',
      { gameId: f.gameId, env: f.env },
      (e) => {
        if (e.event === 'snapshot') setSnap(JSON.parse(e.data) as Snapshot)
      },
      setState,
    )
  }, [f.gameId, f.env])
  const series = useApi(
    (signal) =>
      api.get<SeriesOut>(
        '/api/v1/analytics/realtime/series',
        { gameId: f.gameId, env: f.env, minutes: 60 },
        signal,
      ),
    [f.gameId, f.env],
  )
  useInterval(series.reload, 60_000)
  const chart = useMemo(() => {
    const p = series.data?.points ?? []
    return {
      x: p.map((x) => Date.parse(x.minute) / 1000),
      series: [
        { label: 'Online', values: p.map((x) => x.online) },
        { label: 'Events', values: p.map((x) => x.events), right: true },
      ],
    }
  }, [series.data])
  const cur = f.game.defaultCurrency
  return html`
    <div aria-live="polite" aria-atomic="false">
      <${StreamStatus} s=${state} at=${snap?.ts} />
    </div>
    ${state.kind === 'failed' && html`<${ErrorNote} error=${state.error} />`}
    ${
      snap
        ? html`<${Kpis}>
            <${Kpi} label="Online now" value=${num(snap.onlineNow, 0)} />
            <${Kpi} label="Events last minute" value=${num(snap.eventsPerMinute, 0)} />
            <${Kpi} label="Events this minute" value=${num(snap.eventsThisMinute, 0)} />
            <${Kpi} label="Revenue today" value=${money(snap.revenueToday, cur)} />
            <${Kpi} label="Active today" value=${num(snap.activeToday, 0)} />
          <//>`
        : state.kind !== 'failed' &&
          html`<p class="state loading" role="status">Waiting for the first snapshot…</p>`
    }
    <${Section} title="Last hour">
      <${Async}
        state=${series}
        what="the last hour"
        render=${() => html`<${LineChart} title="Online players and events per minute" x=${chart.x} series=${chart.series} height=${200} format=${(v: number) => num(v, 0)} />`}
      />
    <//>
  `
}

/** `#/analytics/realtime`: online players, events and revenue as they happen (server-sent events). */
export function AnalyticsRealtime(): VNode {
  return html`<${AnalyticsPage} title="Realtime" ranges=${[1]} render=${(f: Frame) => html`<${Body} key=${`${f.gameId}/${f.env}`} f=${f} />`} />`
}
