import { html } from 'htm/preact'
import type { VNode } from 'preact'
import { Select } from '../../components/form'
import { Table } from '../../components/table'
import { ActionNote, Async, Badge, Can, Page } from '../../components/ui'
import { api } from '../../lib/api'
import { num, when } from '../../lib/format'
import { useAction, useApi, useInterval } from '../../lib/hooks'
import { href, navigate } from '../../lib/router'

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

interface AgentPage {
  items: Agent[]
  total: number
  next_after?: string
}

/** Agents a page shows unless the link says (`limit`, 1-500 as the API takes). */
const PAGE = 100

/**
 * `#/ops/agents`: the processes next to game servers, online or not, with their load, a page at a
 * time (`after`: the last agent id of the page before, as the API pages).
 */
export function Agents({ query }: { query: URLSearchParams }): VNode {
  const status = query.get('status') ?? ''
  const after = query.get('after') ?? ''
  const asked = Math.trunc(Number(query.get('limit')))
  const limit = asked >= 1 && asked <= 500 ? asked : PAGE
  const list = useApi(
    (signal) =>
      api.v1<AgentPage>('GET', '/api/v1/agents', {
        query: { status, after, limit: String(limit) },
        signal,
      }),
    [status, after, limit],
  )
  const link = (next?: string) =>
    href('/ops/agents', {
      status: status || undefined,
      after: next,
      limit: asked ? String(limit) : undefined,
    })
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
      isEmpty=${(d: AgentPage) => d.items.length === 0 && !after}
      empty=${html`<p>No agent${status ? ` is ${status}` : ' has registered'}. Agents register at <code>/api/v1/agents</code> with the agent token.</p>`}
      render=${(d: AgentPage) => html`<${Table}
        caption=${`Agents (${d.items.length}${d.total > d.items.length ? ` of ${d.total}` : ''})`}
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
      />
      ${
        after || d.next_after
          ? html`<nav class="pager" aria-label="Pages of agents">
              ${after ? html`<a href=${link()}>First page</a>` : ''}
              ${d.next_after ? html`<a href=${link(d.next_after)}>Next ${limit}</a>` : ''}
            </nav>`
          : ''
      }`}
    />
  <//>`
}
