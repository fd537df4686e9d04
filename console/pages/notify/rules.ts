import { html } from 'htm/preact'
import type { VNode } from 'preact'
import { useState } from 'preact/hooks'
import { Form, Input, Select, TextArea } from '../../components/form'
import { Table } from '../../components/table'
import { Async, Badge, Can, ErrorNote, Facts, Page, Section } from '../../components/ui'
import { ApiError, api } from '../../lib/api'
import { num, when } from '../../lib/format'
import { useAction, useApi } from '../../lib/hooks'
import { useCan } from '../../lib/session'

interface Rule {
  id: string
  match: string
  mode: string
  action: string
  priority?: number
  route?: Array<{ match?: string; channels: string[] }>
  silence?: { roster: string }
  escalation?: { ack_timeout?: string; to: string[] }
  shadow_hits: number
  updated_at: string
  shadow_stats?: {
    total: number
    last_24h: number
    last_7d: number
    held: Record<string, number>
    evaluation_errors: number
    samples?: Array<Record<string, unknown>>
  }
}

/** The match expression with the place the API found an error marked, as the API counts it (from 0). */
export function ErrorAt({
  text,
  position,
  reason,
}: { text: string; position: number; reason: string }): VNode {
  const at = Math.max(0, Math.min(position, text.length))
  return html`<div class="expr-error" role="alert">
    <p><strong>The match expression is not valid:</strong> ${reason}</p>
    <pre class="mono" aria-hidden="true">${text.slice(0, at)}<mark>${text.slice(at, at + 1) || ' '}</mark>${text.slice(at + 1)}
${' '.repeat(at)}^ position ${at}</pre>
  </div>`
}

const list = (s: string) =>
  s
    .split(',')
    .map((x) => x.trim())
    .filter(Boolean)

function Editor({
  rule,
  rosters,
  onSaved,
}: { rule?: Rule; rosters: string[]; onSaved: (id: string) => void }): VNode {
  const [d, set] = useState({
    id: rule?.id ?? '',
    match: rule?.match ?? 'level in ["error", "critical"]',
    mode: rule?.mode ?? 'shadow',
    action: rule?.action ?? 'route',
    priority: String(rule?.priority ?? ''),
    channels: rule?.route?.flatMap((r) => r.channels).join(', ') ?? '',
    roster: rule?.silence?.roster ?? '',
    escalateTo: rule?.escalation?.to.join(', ') ?? '',
    ackTimeout: rule?.escalation?.ack_timeout ?? '5m',
  })
  const act = useAction()
  const can = useCan()
  const field = (k: keyof typeof d) => (v: string) => set({ ...d, [k]: v })
  const save = () =>
    act.run(async () => {
      const body = {
        id: d.id.trim() || undefined,
        match: d.match,
        mode: d.mode,
        action: d.action,
        priority: d.priority === '' ? undefined : Number(d.priority),
        route: d.action === 'route' && list(d.channels).length ? [{ channels: list(d.channels) }] : undefined,
        silence: d.roster ? { roster: d.roster } : undefined,
        escalation: list(d.escalateTo).length
          ? { ack_timeout: d.ackTimeout, to: list(d.escalateTo) }
          : undefined,
      }
      const saved = rule
        ? await api.v1<Rule>('PUT', `/api/v1/rules/${encodeURIComponent(rule.id)}`, { body })
        : await api.v1<Rule>('POST', '/api/v1/rules', { body })
      onSaved(saved.id)
    }, 'Saved: the rule applies at once.')
  const err = act.error
  const pos =
    err instanceof ApiError
      ? (err.body as { data?: { position?: number; reason?: string } } | undefined)?.data
      : undefined
  const off = !can('rules:write')
  return html`<${Form} label=${rule ? `Rule ${rule.id}` : 'New rule'} onSubmit=${save}>
    <div class="grid3">
      ${!rule && html`<${Input} label="Id" value=${d.id} onValue=${field('id')} hint="Letters, digits, . _ -; made for you when empty." />`}
      <${Select} label="Mode" value=${d.mode} options=${[['shadow', 'Shadow (count only)'], ['active', 'Active'], ['off', 'Off']]} onValue=${field('mode')} disabled=${off} />
      <${Select} label="Action" value=${d.action} options=${['route', 'allow', 'suppress']} onValue=${field('action')} disabled=${off} />
      <${Input} label="Priority" type="number" value=${d.priority} onValue=${field('priority')} disabled=${off} />
    </div>
    <${TextArea}
      label="Match"
      mono
      rows=${3}
      value=${d.match}
      onValue=${field('match')}
      disabled=${off}
      hint=${html`Fields <code>type</code>, <code>level</code>, <code>title</code>, <code>body</code>, <code>params.name</code>; <code>==</code> <code>!=</code> <code>in</code> <code>&&</code> <code>||</code> <code>!</code>.`}
    />
    ${pos?.position !== undefined && err && html`<${ErrorAt} text=${d.match} position=${pos.position} reason=${pos.reason ?? err.message} />`}
    <div class="grid3">
      <${Input} label="Route to channels" value=${d.channels} onValue=${field('channels')} hint="Comma-separated channel names or group:<id>." disabled=${off || d.action !== 'route'} />
      <${Select} label="Silence while on call" value=${d.roster} placeholder="No silence" options=${rosters} onValue=${field('roster')} disabled=${off} />
      <${Input} label="Escalate to" value=${d.escalateTo} onValue=${field('escalateTo')} hint="Channels, when nobody acknowledges in time." disabled=${off} />
      <${Input} label="Acknowledge within" value=${d.ackTimeout} onValue=${field('ackTimeout')} hint="For example 5m, 1h." disabled=${off} />
    </div>
    ${err && pos?.position === undefined && html`<${ErrorNote} error=${err} />`}
    ${act.done && html`<p class="note ok" role="status">${act.done}</p>`}
    <${Can} perm="rules:write"><div><button type="submit" disabled=${act.busy}>${rule ? 'Save rule' : 'Create rule'}</button></div><//>
  <//>`
}

function ShadowStats({ id }: { id: string }): VNode {
  const state = useApi(
    (signal) => api.v1<Rule>('GET', `/api/v1/rules/${encodeURIComponent(id)}`, { signal }),
    [id],
  )
  return html`<${Async}
    state=${state}
    what="shadow statistics"
    render=${(r: Rule) => {
      const s = r.shadow_stats
      return html`<${Facts}
        items=${[
          ['Would have matched (total)', num(s?.total ?? r.shadow_hits, 0)],
          ['Last 24 hours', num(s?.last_24h, 0)],
          ['Last 7 days', num(s?.last_7d, 0)],
          ['Evaluation errors', num(s?.evaluation_errors, 0)],
          [
            'Held',
            Object.entries(s?.held ?? {})
              .map(([k, v]) => `${k}: ${v}`)
              .join(', ') || '–',
          ],
        ]}
      />`
    }}
  />`
}

/** `#/rules`: routing rules, their editor (with the match error's position) and shadow statistics. */
export function Rules(): VNode {
  const rules = useApi((signal) => api.v1<{ rules: Rule[] } | Rule[]>('GET', '/api/v1/rules', { signal }), [])
  const rosters = useApi(
    (signal) =>
      api
        .v1<{ rosters: Array<{ id: string }> }>('GET', '/api/v1/rosters', { signal })
        .catch(() => ({ rosters: [] })),
    [],
  )
  const [open, setOpen] = useState<string>()
  const [adding, setAdding] = useState(false)
  const del = useAction()
  const all = (d: { rules: Rule[] } | Rule[]) => (Array.isArray(d) ? d : d.rules)
  const chosen = rules.data && all(rules.data).find((r) => r.id === open)
  const names = (rosters.data?.rosters ?? []).map((r) => r.id)
  return html`<${Page}
    title="Routing rules"
    actions=${html`<${Can} perm="rules:write"><button
        type="button"
        onClick=${() => {
          setOpen(undefined)
          setAdding(true)
        }}
        disabled=${adding}
      >
        New rule
      </button><//>`}
  >
    ${
      adding &&
      html`<${Section} title="New rule">
        <${Editor}
          rosters=${names}
          onSaved=${(id: string) => {
            setAdding(false)
            setOpen(id)
            rules.reload()
          }}
        />
      <//>`
    }
    <${Async}
      state=${rules}
      what="rules"
      isEmpty=${(d: { rules: Rule[] } | Rule[]) => all(d).length === 0}
      empty=${html`<p>No rule: notifications go to the channels they name or the YAML's routes.</p>`}
      render=${(d: { rules: Rule[] } | Rule[]) => html`<${Table}
        caption="Rules"
        hideCaption
        rows=${all(d)}
        rowKey=${(r: Rule) => r.id}
        columns=${[
          { label: 'Id', value: (r: Rule) => html`<code>${r.id}</code>` },
          {
            label: 'Mode',
            value: (r: Rule) =>
              html`<${Badge} value=${r.mode} tone=${r.mode === 'active' ? 'good' : r.mode === 'off' ? 'neutral' : 'warn'} />`,
          },
          { label: 'Action', value: (r: Rule) => r.action },
          { label: 'Match', value: (r: Rule) => html`<code>${r.match}</code>` },
          { label: 'Shadow hits', value: (r: Rule) => num(r.shadow_hits, 0), numeric: true },
          { label: 'Changed', value: (r: Rule) => when(r.updated_at) },
          {
            label: 'Actions',
            value: (r: Rule) => html`<div class="buttons">
              <button type="button" class="secondary small" onClick=${() => setOpen(open === r.id ? undefined : r.id)} aria-expanded=${open === r.id ? 'true' : 'false'}>
                ${open === r.id ? 'Close' : 'Open'}<span class="sr-only"> ${r.id}</span>
              </button>
              <${Can} perm="rules:write">
                <button type="button" class="danger small" disabled=${del.busy} onClick=${() => del.run(() => api.v1('DELETE', `/api/v1/rules/${encodeURIComponent(r.id)}`), 'Deleted.').then(rules.reload)}>
                  Delete<span class="sr-only"> ${r.id}</span>
                </button>
              <//>
            </div>`,
          },
        ]}
      />`}
    />
    ${del.error && html`<${ErrorNote} error=${del.error} />`}
    ${
      chosen &&
      html`<${Section} title=${`Rule ${chosen.id}`}>
        <h3>Shadow statistics</h3>
        <${ShadowStats} id=${chosen.id} />
        <h3>Edit</h3>
        <${Editor} key=${chosen.id + chosen.updated_at} rule=${chosen} rosters=${names} onSaved=${rules.reload} />
      <//>`
    }
  <//>`
}
