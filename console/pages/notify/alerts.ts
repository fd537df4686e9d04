import { html } from 'htm/preact'
import type { VNode } from 'preact'
import { useState } from 'preact/hooks'
import { Form, Input, Select } from '../../components/form'
import { Table } from '../../components/table'
import { ActionNote, Async, Badge, Can, Page, Section } from '../../components/ui'
import { api } from '../../lib/api'
import { when } from '../../lib/format'
import { useAction, useApi } from '../../lib/hooks'

interface AlertRule {
  id: string
  name: string
  metric: string
  labels?: Record<string, string>
  operator: string
  threshold: number
  forCount: number
  cooldownSeconds: number
  level: string
  enabled: boolean
  updatedAt: string
}

const OPS: Record<string, string> = { gt: '>', gte: '≥', lt: '<', lte: '≤' }

function NewRule({ onDone }: { onDone: () => void }): VNode {
  const [d, set] = useState({
    name: '',
    metric: 'svc_',
    labels: '',
    operator: 'gt',
    threshold: '0',
    forCount: '1',
    level: 'warning',
  })
  const act = useAction()
  const field = (k: keyof typeof d) => (v: string) => set({ ...d, [k]: v })
  const submit = () => {
    const labels = Object.fromEntries(
      d.labels
        .split(',')
        .map((x) => x.split('=').map((s) => s.trim()))
        .filter((kv) => kv.length === 2 && kv[0]),
    )
    void act
      .run(
        () =>
          api.v1('POST', '/api/v1/ops/alerts', {
            body: {
              name: d.name,
              metric: d.metric,
              labels,
              operator: d.operator,
              threshold: Number(d.threshold),
              forCount: Number(d.forCount),
              level: d.level,
            },
          }),
        'Created.',
      )
      .then((ok) => ok && onDone())
  }
  return html`<${Form} label="New alert rule" onSubmit=${submit}>
    <div class="grid3">
      <${Input} label="Name" value=${d.name} onValue=${field('name')} required />
      <${Input} label="Metric" value=${d.metric} onValue=${field('metric')} hint="A svc_ metric, as in /api/v1/monitoring/metrics." required />
      <${Input} label="Labels" value=${d.labels} onValue=${field('labels')} hint="name=value, comma-separated; empty: every series." />
      <${Select} label="Fires when the value is" value=${d.operator} options=${[['gt', 'above'], ['gte', 'at or above'], ['lt', 'below'], ['lte', 'at or below']]} onValue=${field('operator')} />
      <${Input} label="Threshold" type="number" step="any" value=${d.threshold} onValue=${field('threshold')} />
      <${Input} label="For evaluations in a row" type="number" min=${1} value=${d.forCount} onValue=${field('forCount')} />
      <${Select} label="Level" value=${d.level} options=${['info', 'warning', 'error', 'critical']} onValue=${field('level')} />
    </div>
    <${ActionNote} action=${act} />
    <div><button type="submit" disabled=${act.busy}>Create alert rule</button></div>
  <//>`
}

function AckById(): VNode {
  const [id, setId] = useState('')
  const act = useAction()
  return html`<${Form}
    label="Acknowledge an alert"
    class="inline"
    onSubmit=${() => id.trim() && act.run(() => api.v1('POST', `/api/v1/alerts/${encodeURIComponent(id.trim())}/ack`, { body: {} }), `Alert ${id.trim()} acknowledged: its escalation is cancelled.`)}
  >
    <${Input} label="Alert id" value=${id} onValue=${setId} hint="From a notification's params.alert_id." />
    <button type="submit" disabled=${act.busy || !id.trim()}>Acknowledge</button>
    <${ActionNote} action=${act} />
  <//>`
}

/** `#/alerts`: rules on the platform's svc_ metrics that raise alerts, and acknowledgement by alert id. */
export function AlertRules(): VNode {
  const list = useApi((signal) => api.v1<AlertRule[]>('GET', '/api/v1/ops/alerts', { signal }), [])
  const [adding, setAdding] = useState(false)
  const act = useAction()
  const [fired, setFired] = useState<unknown[]>()
  return html`<${Page}
    title="Alert rules"
    actions=${html`<${Can} perm="ops_alerts:write">
      <button type="button" class="secondary" disabled=${act.busy} onClick=${() => act.run(async () => setFired((await api.v1<{ fired: unknown[] }>('POST', '/api/v1/ops/alerts/evaluate')).fired))}>Evaluate now</button>
      <button type="button" onClick=${() => setAdding(true)} disabled=${adding}>New alert rule</button>
    <//>`}
  >
    <${ActionNote} action=${act} />
    ${fired && html`<p class="note" role="status">${fired.length ? `${fired.length} alert(s) fired.` : 'Evaluated: nothing fired.'}</p>`}
    ${
      adding &&
      html`<${Section} title="New alert rule">
        <${NewRule}
          onDone=${() => {
            setAdding(false)
            list.reload()
          }}
        />
      <//>`
    }
    <${Async}
      state=${list}
      what="alert rules"
      isEmpty=${(d: AlertRule[]) => d.length === 0}
      empty=${html`<p>No alert rule. A rule watches one svc_ metric and raises an alert past its threshold.</p>`}
      render=${(d: AlertRule[]) => html`<${Table}
        caption="Alert rules"
        hideCaption
        rows=${d}
        rowKey=${(r: AlertRule) => r.id}
        columns=${[
          { label: 'Name', value: (r: AlertRule) => r.name },
          {
            label: 'Condition',
            value: (r: AlertRule) =>
              html`<code>${r.metric}${
                r.labels && Object.keys(r.labels).length
                  ? `{${Object.entries(r.labels)
                      .map(([k, v]) => `${k}="${v}"`)
                      .join(',')}}`
                  : ''
              } ${OPS[r.operator] ?? r.operator} ${r.threshold}</code>`,
          },
          { label: 'For', value: (r: AlertRule) => `${r.forCount}×` },
          { label: 'Level', value: (r: AlertRule) => html`<${Badge} value=${r.level} />` },
          { label: 'Enabled', value: (r: AlertRule) => (r.enabled ? 'yes' : 'no') },
          { label: 'Changed', value: (r: AlertRule) => when(r.updatedAt) },
          {
            label: 'Actions',
            value: (r: AlertRule) => html`<${Can} perm="ops_alerts:write">
              <div class="buttons">
                <button type="button" class="secondary small" disabled=${act.busy} onClick=${() => act.run(() => api.v1('PUT', `/api/v1/ops/alerts/${r.id}`, { body: { enabled: !r.enabled } })).then(list.reload)}>
                  ${r.enabled ? 'Disable' : 'Enable'}<span class="sr-only"> ${r.name}</span>
                </button>
                <button type="button" class="danger small" disabled=${act.busy} onClick=${() => act.run(() => api.v1('DELETE', `/api/v1/ops/alerts/${r.id}`), 'Deleted.').then(list.reload)}>
                  Delete<span class="sr-only"> ${r.name}</span>
                </button>
              </div>
            <//>`,
          },
        ]}
      />`}
    />
    <${Can} perm="alerts:write"><${Section} title="Acknowledge an alert"><${AckById} /><//><//>
  <//>`
}
