import { html } from 'htm/preact'
import type { VNode } from 'preact'
import { Select } from '../../components/form'
import { ActionNote, Async, Badge, Can, Facts, Page, Section } from '../../components/ui'
import { api } from '../../lib/api'
import { num, seconds, when } from '../../lib/format'
import { useAction, useApi, useInterval } from '../../lib/hooks'
import { href, navigate } from '../../lib/router'
import { Kpi, Kpis } from '../analytics/frame'

interface Incident {
  id: string
  rule_id: string
  alert_id: string
  title: string
  level: string
  opened_at: string
  acked_at?: string
  acked_by?: string
  resolved_at?: string
  events: number
  channels: string[]
  timeline?: Array<{ at: string; kind: string; detail: Record<string, unknown> }>
}
interface Stats {
  total: number
  open: number
  acked: number
  resolved: number
  mtta: { count: number; mean_s: number; median_s: number } | null
  mttr: { count: number; mean_s: number; median_s: number } | null
}

export const incidentStatus = (i: Incident): string =>
  i.resolved_at ? 'resolved' : i.acked_at ? 'acked' : 'open'

/** Acknowledges the incident's alert: the first acknowledgement wins and stops its escalation. */
function Ack({ alertId, onDone }: { alertId: string; onDone: () => void }): VNode {
  const act = useAction()
  return html`<${Can} perm="alerts:write">
    <button
      type="button"
      disabled=${act.busy}
      onClick=${() => act.run(() => api.v1('POST', `/api/v1/alerts/${encodeURIComponent(alertId)}/ack`, { body: {} }), 'Acknowledged.').then((ok) => ok && onDone())}
    >
      Acknowledge<span class="sr-only"> alert ${alertId}</span>
    </button>
    <${ActionNote} action=${act} />
  <//>`
}

function Card({ i, onChanged }: { i: Incident; onChanged: () => void }): VNode {
  const status = incidentStatus(i)
  return html`<li class=${`incident ${status}`}>
    <div class="incident-head">
      <${Badge} value=${status} />
      <${Badge} value=${i.level} />
      <a href=${href(`/incidents/${i.id}`)}><strong>${i.title || i.alert_id}</strong></a>
    </div>
    <p class="incident-meta">
      Alert <code>${i.alert_id}</code> · rule <code>${i.rule_id}</code> · opened ${when(i.opened_at)} · ${num(i.events, 0)} notification${i.events === 1 ? '' : 's'}
      ${i.acked_at && html` · acknowledged ${when(i.acked_at)}${i.acked_by ? ` by ${i.acked_by}` : ''}`}
    </p>
    ${status === 'open' && html`<${Ack} alertId=${i.alert_id} onDone=${onChanged} />`}
  </li>`
}

/** `#/incidents`: open incidents first, acknowledge from any screen size; MTTA and MTTR above. */
export function Incidents({ query }: { query: URLSearchParams }): VNode {
  const status = query.get('status') ?? 'open'
  const list = useApi(
    (signal) =>
      api.v1<{ incidents: Incident[] }>('GET', '/api/v1/incidents', {
        query: { status, limit: 100 },
        signal,
      }),
    [status],
  )
  const stats = useApi((signal) => api.v1<Stats>('GET', '/api/v1/incidents/stats', { signal }), [])
  const reload = () => {
    list.reload()
    stats.reload()
  }
  useInterval(reload, 15_000)
  return html`<${Page} title="Incidents">
    <${Async}
      state=${stats}
      what="incident statistics"
      render=${(s: Stats) => html`<${Kpis}>
        <${Kpi} label="Open" value=${num(s.open, 0)} />
        <${Kpi} label="Acknowledged" value=${num(s.acked, 0)} />
        <${Kpi} label="Resolved" value=${num(s.resolved, 0)} />
        <${Kpi} label="Time to acknowledge (median)" value=${seconds(s.mtta?.median_s)} />
        <${Kpi} label="Time to resolve (median)" value=${seconds(s.mttr?.median_s)} />
      <//>`}
    />
    <div class="filters">
      <${Select}
        label="Show"
        value=${status}
        options=${[['open', 'Open'], ['acked', 'Acknowledged'], ['resolved', 'Resolved'], ['all', 'All']]}
        onValue=${(v: string) => navigate('/incidents', { status: v })}
      />
    </div>
    <${Async}
      state=${list}
      what="incidents"
      isEmpty=${(d: { incidents: Incident[] }) => d.incidents.length === 0}
      empty=${html`<p>${status === 'open' ? 'No open incident. All quiet.' : 'No incident here.'}</p>`}
      render=${(d: { incidents: Incident[] }) => html`<ul class="incidents" aria-label="Incidents">
        ${d.incidents.map((i) => html`<${Card} key=${i.id} i=${i} onChanged=${reload} />`)}
      </ul>`}
    />
  <//>`
}

/** `#/incidents/{id}`: one incident with its timeline and the acknowledge button. */
export function IncidentDetail({ id }: { id: string }): VNode {
  const state = useApi(
    (signal) => api.v1<Incident>('GET', `/api/v1/incidents/${encodeURIComponent(id)}`, { signal }),
    [id],
  )
  return html`<${Page} title="Incident">
    <p><a href="#/incidents">All incidents</a></p>
    <${Async}
      state=${state}
      what="the incident"
      render=${(i: Incident) => html`
        <${Section} title=${i.title || i.alert_id}>
          <p><${Badge} value=${incidentStatus(i)} /> <${Badge} value=${i.level} /></p>
          ${incidentStatus(i) === 'open' && html`<${Ack} alertId=${i.alert_id} onDone=${state.reload} />`}
          <${Facts}
            items=${[
              ['Alert', html`<code>${i.alert_id}</code>`],
              ['Rule', html`<code>${i.rule_id}</code>`],
              ['Opened', when(i.opened_at)],
              [
                'Acknowledged',
                i.acked_at ? `${when(i.acked_at)}${i.acked_by ? ` by ${i.acked_by}` : ''}` : '–',
              ],
              ['Resolved', when(i.resolved_at)],
              ['Channels', i.channels.join(', ') || '–'],
            ]}
          />
        <//>
        <${Section} title="Timeline">
          <ol class="timeline">
            ${(i.timeline ?? []).map(
              (e) => html`<li>
                <time datetime=${e.at}>${when(e.at)}</time>
                <strong>${e.kind.replaceAll('_', ' ')}</strong>
                <span class="hint">${Object.entries(e.detail ?? {})
                  .map(([k, v]) => `${k}: ${Array.isArray(v) ? v.join(', ') : String(v)}`)
                  .join(' · ')}</span>
              </li>`,
            )}
          </ol>
        <//>
      `}
    />
  <//>`
}
