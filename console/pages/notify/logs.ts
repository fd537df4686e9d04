import { html } from 'htm/preact'
import type { VNode } from 'preact'
import { Select } from '../../components/form'
import { Pager, Table } from '../../components/table'
import { Async, Badge, Facts, Page, Section } from '../../components/ui'
import { api } from '../../lib/api'
import { ms, num, pct, when } from '../../lib/format'
import { useApi } from '../../lib/hooks'
import { href, navigate } from '../../lib/router'
import { Kpi, Kpis } from '../analytics/frame'
import { LEVELS } from './templates'

interface Log {
  id: string
  provider: string
  provider_type: string
  type: string
  level: string
  status: string
  title: string
  attempt_count: number
  created_at: string
  finished_at?: string
  latency_ms?: number
}
interface LogPage {
  total: number
  logs: Log[]
}
interface Attempt {
  attempt: number
  worker: string
  started_at: string
  duration_ms: number
  ok: boolean
  retryable: boolean
  error?: string
}
interface LogDetail extends Log {
  body: string
  recipients: string[]
  raw: unknown
  attempts: Attempt[]
}
interface Stats {
  total: number
  by_status: Record<string, number>
  success_rate: number | null
  latency_ms: { p50: number | null; p95: number | null }
}

const LIMIT = 25

/** `#/notify/logs`: deliveries, newest first, filtered by status, channel and level; stats above. */
export function DeliveryLogs({ query }: { query: URLSearchParams }): VNode {
  const f = {
    status: query.get('status') ?? '',
    provider: query.get('provider') ?? '',
    level: query.get('level') ?? '',
  }
  const page = Number(query.get('page') ?? 0)
  const list = useApi(
    (signal) =>
      api.v1<LogPage>('GET', '/api/v1/logs', { query: { ...f, offset: page * LIMIT, limit: LIMIT }, signal }),
    [f.status, f.provider, f.level, page],
  )
  const stats = useApi((signal) => api.v1<Stats>('GET', '/api/v1/logs/stats', { signal }), [])
  const providers = useApi(
    (signal) => api.v1<{ providers: Array<{ name: string }> }>('GET', '/api/v1/providers', { signal }),
    [],
  )
  const go = (patch: Record<string, string>) => navigate('/notify/logs', { ...f, ...patch })
  return html`<${Page} title="Delivery logs">
    <${Async}
      state=${stats}
      what="delivery statistics"
      render=${(s: Stats) => html`<${Kpis}>
        <${Kpi} label="Deliveries" value=${num(s.total, 0)} />
        <${Kpi} label="Succeeded" value=${num(s.by_status.success ?? 0, 0)} />
        <${Kpi} label="Failed" value=${num(s.by_status.failed ?? 0, 0)} />
        <${Kpi} label="Pending" value=${num(s.by_status.pending ?? 0, 0)} />
        <${Kpi} label="Success rate" value=${pct(s.success_rate)} />
        <${Kpi} label="Latency p50 / p95" value=${`${ms(s.latency_ms.p50)} / ${ms(s.latency_ms.p95)}`} />
      <//>`}
    />
    <div class="filters">
      <${Select} label="Status" value=${f.status} placeholder="Any status" options=${['pending', 'success', 'failed', 'shadow']} onValue=${(v: string) => go({ status: v })} />
      <${Select}
        label="Channel"
        value=${f.provider}
        placeholder="Any channel"
        options=${(providers.data?.providers ?? []).map((p) => p.name).concat(f.provider && !providers.data?.providers.some((p) => p.name === f.provider) ? [f.provider] : [])}
        onValue=${(v: string) => go({ provider: v })}
      />
      <${Select} label="Level" value=${f.level} placeholder="Any level" options=${LEVELS} onValue=${(v: string) => go({ level: v })} />
    </div>
    <${Async}
      state=${list}
      what="deliveries"
      isEmpty=${(d: LogPage) => d.logs.length === 0}
      empty=${html`<p>No delivery${f.status || f.provider || f.level ? ' matches these filters' : ' yet'}.</p>`}
      render=${(d: LogPage) => html`<${Table}
          caption=${`Deliveries (${d.total})`}
          rows=${d.logs}
          rowKey=${(l: Log) => l.id}
          columns=${[
            {
              label: 'When',
              value: (l: Log) => html`<a href=${href(`/notify/logs/${l.id}`)}>${when(l.created_at)}</a>`,
            },
            { label: 'Status', value: (l: Log) => html`<${Badge} value=${l.status} />` },
            { label: 'Channel', value: (l: Log) => l.provider },
            { label: 'Level', value: (l: Log) => l.level },
            { label: 'Title', value: (l: Log) => l.title },
            { label: 'Attempts', value: (l: Log) => l.attempt_count, numeric: true },
            { label: 'Latency', value: (l: Log) => ms(l.latency_ms), numeric: true },
          ]}
        />
        <${Pager} page=${page} pages=${Math.ceil(d.total / LIMIT)} label="Pages of deliveries" to=${(n: number) => href('/notify/logs', { ...f, page: String(n) })} />`}
    />
  <//>`
}

/** `#/notify/logs/{id}`: one delivery with its body and every attempt. */
export function DeliveryLog({ id }: { id: string }): VNode {
  const state = useApi(
    (signal) => api.v1<LogDetail>('GET', `/api/v1/logs/${encodeURIComponent(id)}`, { signal }),
    [id],
  )
  return html`<${Page} title="Delivery">
    <p><a href="#/notify/logs">All deliveries</a></p>
    <${Async}
      state=${state}
      what="the delivery"
      render=${(l: LogDetail) => html`
        <${Section} title=${l.title || l.type}>
          <${Facts}
            items=${[
              ['Status', html`<${Badge} value=${l.status} />`],
              ['Channel', `${l.provider} (${l.provider_type})`],
              ['Type', l.type],
              ['Level', l.level],
              ['Created', when(l.created_at)],
              ['Finished', when(l.finished_at)],
              ['Recipients', l.recipients.join(', ') || 'all configured'],
            ]}
          />
          <h3>Body</h3>
          <pre class="mono">${l.body || '(empty)'}</pre>
        <//>
        <${Section} title=${`Attempts (${l.attempts.length})`}>
          <${Table}
            caption="Attempts"
            hideCaption
            rows=${l.attempts}
            rowKey=${(a: Attempt) => String(a.attempt)}
            columns=${[
              { label: '#', value: (a: Attempt) => a.attempt, numeric: true },
              { label: 'Started', value: (a: Attempt) => when(a.started_at) },
              {
                label: 'Result',
                value: (a: Attempt) =>
                  html`<${Badge} value=${a.ok ? 'success' : a.retryable ? 'retrying' : 'failed'} />`,
              },
              { label: 'Took', value: (a: Attempt) => ms(a.duration_ms), numeric: true },
              { label: 'Worker', value: (a: Attempt) => html`<code>${a.worker}</code>` },
              { label: 'Error', value: (a: Attempt) => a.error ?? '–' },
            ]}
          />
        <//>
      `}
    />
  <//>`
}
