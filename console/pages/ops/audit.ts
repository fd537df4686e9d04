import { html } from 'htm/preact'
import type { VNode } from 'preact'
import { useState } from 'preact/hooks'
import { Form, Input, Select } from '../../components/form'
import { Pager, Table } from '../../components/table'
import { Async, Badge, Page } from '../../components/ui'
import { api } from '../../lib/api'
import { when } from '../../lib/format'
import { useApi } from '../../lib/hooks'
import { href, navigate } from '../../lib/router'

interface Entry {
  id: string
  at: string
  actor: { kind: string; id?: string; name?: string }
  action: string
  target?: string
  ip?: string
  ok: boolean
  details?: unknown
}
interface AuditPage {
  items: Entry[]
  total: number
}

const SIZE = 25
const KEYS = ['actor', 'action', 'target', 'ip', 'ok', 'from', 'to'] as const
type Filters = Record<(typeof KEYS)[number], string>

/** `#/ops/audit`: who did what, when and from where; filtered by actor, action, target, address, result and time. */
export function Audit({ query }: { query: URLSearchParams }): VNode {
  const f = Object.fromEntries(KEYS.map((k) => [k, query.get(k) ?? ''])) as Filters
  const page = Number(query.get('page') ?? 0)
  const [draft, setDraft] = useState<Filters>(f)
  const list = useApi(
    (signal) =>
      api.v1<AuditPage>('GET', '/api/v1/audit', {
        query: {
          ...f,
          from: f.from ? new Date(f.from).toISOString() : '',
          to: f.to ? new Date(f.to).toISOString() : '',
          // This family counts pages from 1.
          page: page + 1,
          size: SIZE,
        },
        signal,
      }),
    [...KEYS.map((k) => f[k]), page],
  )
  const field = (k: keyof Filters) => (v: string) => setDraft({ ...draft, [k]: v })
  return html`<${Page} title="Audit log">
    <${Form} label="Filter the audit log" class="inline filters" onSubmit=${() => navigate('/ops/audit', draft)}>
      <${Input} label="Actor" value=${draft.actor} onValue=${field('actor')} />
      <${Input} label="Action" value=${draft.action} onValue=${field('action')} placeholder="auth.login" />
      <${Input} label="Target" value=${draft.target} onValue=${field('target')} />
      <${Input} label="Address" value=${draft.ip} onValue=${field('ip')} />
      <${Select} label="Result" value=${draft.ok} placeholder="Any" options=${[['true', 'Succeeded'], ['false', 'Refused or failed']]} onValue=${field('ok')} />
      <${Input} label="From" type="datetime-local" value=${draft.from} onValue=${field('from')} />
      <${Input} label="To" type="datetime-local" value=${draft.to} onValue=${field('to')} />
      <button type="submit">Filter</button>
    <//>
    <${Async}
      state=${list}
      what="the audit log"
      isEmpty=${(d: AuditPage) => d.items.length === 0}
      empty=${html`<p>No entry matches.</p>`}
      render=${(d: AuditPage) => html`<${Table}
          caption=${`Audit entries (${d.total})`}
          rows=${d.items}
          rowKey=${(e: Entry) => e.id}
          columns=${[
            { label: 'When', value: (e: Entry) => when(e.at) },
            { label: 'Actor', value: (e: Entry) => `${e.actor.name ?? e.actor.id ?? '–'} (${e.actor.kind})` },
            { label: 'Action', value: (e: Entry) => html`<code>${e.action}</code>` },
            { label: 'Target', value: (e: Entry) => e.target ?? '–' },
            { label: 'Address', value: (e: Entry) => e.ip ?? '–' },
            {
              label: 'Result',
              value: (e: Entry) =>
                html`<${Badge} value=${e.ok ? 'ok' : 'refused'} tone=${e.ok ? 'good' : 'bad'} />`,
            },
            {
              label: 'Details',
              value: (e: Entry) =>
                e.details
                  ? html`<details><summary>Show<span class="sr-only"> details of ${e.action}</span></summary><pre class="mono">${JSON.stringify(e.details, null, 2)}</pre></details>`
                  : '–',
            },
          ]}
        />
        <${Pager} page=${page} pages=${Math.ceil(d.total / SIZE)} label="Pages of the audit log" to=${(n: number) => href('/ops/audit', { ...f, page: String(n) })} />`}
    />
  <//>`
}
