import { html } from 'htm/preact'
import type { VNode } from 'preact'
import { Select } from '../../components/form'
import { Table } from '../../components/table'
import { ActionNote, Async, Badge, Can, Page } from '../../components/ui'
import { api } from '../../lib/api'
import { num, when } from '../../lib/format'
import { useAction, useApi, useInterval } from '../../lib/hooks'
import { navigate } from '../../lib/router'

export interface Agent {
  agent_id: string
  name: string
  game_id: string
  env: string
  region?: string
  zone?: string
  version?: string
  functions: string[]
  qps: number
  qps_1m: number
  status: string
  jobs_executed: number
  jobs_failed: number
  last_heartbeat_at: string
}

/** `#/ops/agents`: the processes next to game servers, online or not, with their load. */
export function Agents({ query }: { query: URLSearchParams }): VNode {
  const status = query.get('status') ?? ''
  const list = useApi(
    (signal) =>
      api.v1<{ items: Agent[]; total: number }>('GET', '/api/v1/agents', { query: { status }, signal }),
    [status],
  )
  useInterval(list.reload, 10_000)
  const act = useAction()
  return html`<${Page} title="Agents">
    <div class="filters">
      <${Select} label="Status" value=${status} placeholder="Online and offline" options=${['online', 'offline']} onValue=${(v: string) => navigate('/ops/agents', { status: v })} />
    </div>
    <${ActionNote} action=${act} />
    <${Async}
      state=${list}
      what="agents"
      isEmpty=${(d: { items: Agent[] }) => d.items.length === 0}
      empty=${html`<p>No agent${status ? ` is ${status}` : ' has registered'}. Agents register at <code>/api/v1/agents</code> with the agent token.</p>`}
      render=${(d: { items: Agent[] }) => html`<${Table}
        caption=${`Agents (${d.items.length})`}
        rows=${d.items}
        rowKey=${(a: Agent) => a.agent_id}
        columns=${[
          {
            label: 'Agent',
            value: (a: Agent) =>
              html`<strong>${a.name}</strong>${a.version ? html` <span class="hint">${a.version}</span>` : ''}`,
          },
          { label: 'Status', value: (a: Agent) => html`<${Badge} value=${a.status} />` },
          { label: 'Game / env', value: (a: Agent) => `${a.game_id} / ${a.env}` },
          { label: 'Region / zone', value: (a: Agent) => `${a.region ?? '–'} / ${a.zone ?? '–'}` },
          { label: 'Functions', value: (a: Agent) => a.functions.join(', ') || '–' },
          { label: 'QPS (1 min)', value: (a: Agent) => num(a.qps_1m), numeric: true },
          {
            label: 'Jobs (failed)',
            value: (a: Agent) => `${num(a.jobs_executed, 0)} (${num(a.jobs_failed, 0)})`,
            numeric: true,
          },
          { label: 'Last heartbeat', value: (a: Agent) => when(a.last_heartbeat_at) },
          {
            label: 'Actions',
            value: (a: Agent) => html`<${Can} perm="agents:write">
              <button type="button" class="danger small" disabled=${act.busy} onClick=${() => act.run(() => api.v1('DELETE', `/api/v1/agents/${encodeURIComponent(a.agent_id)}`), 'Unregistered.').then(list.reload)}>
                Unregister<span class="sr-only"> ${a.name}</span>
              </button>
            <//>`,
          },
        ]}
      />`}
    />
  <//>`
}
