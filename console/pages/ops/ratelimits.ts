import { html } from 'htm/preact'
import type { VNode } from 'preact'
import { useState } from 'preact/hooks'
import { Form, Input, Select } from '../../components/form'
import { Table } from '../../components/table'
import { ActionNote, Async, Badge, Can, Page, Section } from '../../components/ui'
import { api } from '../../lib/api'
import { num } from '../../lib/format'
import { useAction, useApi } from '../../lib/hooks'
import { useCan } from '../../lib/session'

interface RuleRow {
  scope: 'function' | 'service'
  key: string
  limitQps: number
  match: { game_id?: string; env?: string; region?: string; zone?: string }
  percent: number
}
interface RuleSet {
  rateLimitId: string
  name: string
  resource: string
  limit: number
  window: number
  action: string
  rules: RuleRow[]
  status?: string
}
interface Preview {
  matched: number
  agents: Array<{
    agent_id: string
    game_id: string
    env: string
    region?: string
    zone?: string
    qps: number
    qps_1m: number
    status?: string
  }>
  rules: Array<{
    index: number
    scope: string
    key: string
    effective_qps: number
    agents: string[]
    current_qps: number
  }>
}

const LABELS = ['game_id', 'env', 'region', 'zone'] as const
const blank = (): RuleSet => ({
  rateLimitId: '',
  name: '',
  resource: 'function',
  limit: 100,
  window: 60,
  action: 'reject',
  rules: [{ scope: 'service', key: '*', limitQps: 100, match: {}, percent: 100 }],
})

/** A rule set: its limit and its rules, each matching agents by their labels; preview before saving. */
function Editor({ initial, onSaved }: { initial: RuleSet; onSaved: () => void }): VNode {
  const [s, set] = useState<RuleSet>(initial)
  const [preview, setPreview] = useState<Preview>()
  const act = useAction()
  const can = useCan()
  const rule = (i: number, patch: Partial<RuleRow>) =>
    set({ ...s, rules: s.rules.map((r, j) => (j === i ? { ...r, ...patch } : r)) })
  const body = () => ({
    ...s,
    rules: s.rules.map((r) => ({
      ...r,
      match: Object.fromEntries(Object.entries(r.match).filter(([, v]) => v)),
    })),
  })
  return html`<${Form} label=${`Rule set ${s.name || 'new'}`} onSubmit=${() => act.run(() => api.v1('PUT', '/api/v1/rate-limits', { body: body() }), 'Saved.').then((ok) => ok && onSaved())}>
    <div class="grid3">
      <${Input} label="Id" value=${s.rateLimitId} onValue=${(v: string) => set({ ...s, rateLimitId: v })} required disabled=${!!initial.rateLimitId} />
      <${Input} label="Name" value=${s.name} onValue=${(v: string) => set({ ...s, name: v })} required />
      <${Select} label="Resource" value=${s.resource} options=${['function', 'api', 'user']} onValue=${(v: string) => set({ ...s, resource: v })} />
      <${Input} label="Requests per window" type="number" min=${1} value=${s.limit} onValue=${(v: string) => set({ ...s, limit: Number(v) })} />
      <${Input} label="Window (seconds)" type="number" min=${1} value=${s.window} onValue=${(v: string) => set({ ...s, window: Number(v) })} />
      <${Select} label="Over the limit" value=${s.action} options=${[['reject', 'Reject'], ['throttle', 'Throttle']]} onValue=${(v: string) => set({ ...s, action: v })} />
    </div>
    <fieldset class="rl-rules">
      <legend>Rules</legend>
      ${s.rules.map(
        (r, i) => html`<div class="rl-rule" key=${i}>
          <${Select} label=${`Rule ${i + 1}: scope`} value=${r.scope} options=${['service', 'function']} onValue=${(v: string) => rule(i, { scope: v as RuleRow['scope'] })} />
          <${Input} label="Key" value=${r.key} onValue=${(v: string) => rule(i, { key: v })} hint="Function id, agent id, or * for every matched agent." />
          <${Input} label="QPS" type="number" step="any" value=${r.limitQps} onValue=${(v: string) => rule(i, { limitQps: Number(v) })} />
          <${Input} label="Percent" type="number" min=${1} max=${100} value=${r.percent} onValue=${(v: string) => rule(i, { percent: Number(v) })} />
          ${LABELS.map((k) => html`<${Input} label=${`Match ${k}`} value=${r.match[k] ?? ''} onValue=${(v: string) => rule(i, { match: { ...r.match, [k]: v } })} />`)}
          <button type="button" class="secondary small" disabled=${s.rules.length <= 1} onClick=${() => set({ ...s, rules: s.rules.filter((_, j) => j !== i) })}>Remove rule ${i + 1}</button>
        </div>`,
      )}
      <div><button type="button" class="secondary" onClick=${() => set({ ...s, rules: [...s.rules, { scope: 'service', key: '*', limitQps: 100, match: {}, percent: 100 }] })}>Add a rule</button></div>
    </fieldset>
    <${ActionNote} action=${act} />
    <div class="buttons">
      <button type="button" class="secondary" disabled=${act.busy} onClick=${() => act.run(async () => setPreview(await api.v1<Preview>('POST', '/api/v1/rate-limits/preview', { body: body() })))}>Preview</button>
      ${can('rate_limits:write') && html`<button type="submit" disabled=${act.busy}>Save rule set</button>`}
    </div>
    ${
      preview &&
      html`<div class="preview" aria-live="polite">
        <h3>Preview: ${preview.matched} agent${preview.matched === 1 ? '' : 's'} matched</h3>
        <${Table}
          caption="Rules against the registered agents"
          rows=${preview.rules}
          rowKey=${(r: Preview['rules'][number]) => String(r.index)}
          columns=${[
            { label: 'Rule', value: (r: Preview['rules'][number]) => `${r.index + 1} (${r.scope} ${r.key})` },
            {
              label: 'Effective QPS',
              value: (r: Preview['rules'][number]) => num(r.effective_qps),
              numeric: true,
            },
            {
              label: 'Current QPS',
              value: (r: Preview['rules'][number]) => num(r.current_qps),
              numeric: true,
            },
            { label: 'Agents', value: (r: Preview['rules'][number]) => r.agents.join(', ') || 'none' },
          ]}
        />
      </div>`
    }
  <//>`
}

/** `#/ops/rate-limits`: rate-limit rule sets, each previewed against the registered agents. */
export function RateLimits(): VNode {
  const list = useApi(
    (signal) => api.v1<RuleSet[] | { items: RuleSet[] }>('GET', '/api/v1/rate-limits', { signal }),
    [],
  )
  const [open, setOpen] = useState<RuleSet>()
  const del = useAction()
  const sets = (d: RuleSet[] | { items: RuleSet[] }) => (Array.isArray(d) ? d : d.items)
  return html`<${Page} title="Rate limits" actions=${html`<button type="button" onClick=${() => setOpen(blank())}>${useCan()('rate_limits:write') ? 'New rule set' : 'Try a preview'}</button>`}>
    <${Async}
      state=${list}
      what="rule sets"
      isEmpty=${(d: RuleSet[] | { items: RuleSet[] }) => sets(d).length === 0}
      empty=${html`<p>No rule set yet.</p>`}
      render=${(d: RuleSet[] | { items: RuleSet[] }) => html`<${Table}
        caption="Rule sets"
        hideCaption
        rows=${sets(d)}
        rowKey=${(r: RuleSet) => r.rateLimitId}
        columns=${[
          {
            label: 'Name',
            value: (r: RuleSet) => html`<strong>${r.name}</strong> <code>${r.rateLimitId}</code>`,
          },
          {
            label: 'Limit',
            value: (r: RuleSet) => `${r.limit} ${r.resource} requests / ${r.window} s, then ${r.action}`,
          },
          { label: 'Rules', value: (r: RuleSet) => r.rules.length, numeric: true },
          { label: 'Status', value: (r: RuleSet) => html`<${Badge} value=${r.status ?? 'active'} />` },
          {
            label: 'Actions',
            value: (r: RuleSet) => html`<div class="buttons">
              <button type="button" class="secondary small" onClick=${() => setOpen(r)}>Open<span class="sr-only"> ${r.name}</span></button>
              <${Can} perm="rate_limits:write">
                <button type="button" class="danger small" disabled=${del.busy} onClick=${() => del.run(() => api.v1('DELETE', `/api/v1/rate-limits/${encodeURIComponent(r.rateLimitId)}`), 'Deleted.').then(list.reload)}>
                  Delete<span class="sr-only"> ${r.name}</span>
                </button>
              <//>
            </div>`,
          },
        ]}
      />`}
    />
    <${ActionNote} action=${del} />
    ${open && html`<${Section} title=${open.rateLimitId ? `Rule set ${open.name}` : 'New rule set'}><${Editor} key=${open.rateLimitId || 'new'} initial=${open} onSaved=${list.reload} /><//>`}
  <//>`
}
