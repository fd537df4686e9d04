import { html } from 'htm/preact'
import type { VNode } from 'preact'
import { useState } from 'preact/hooks'
import { Form, Input, Select, TextArea } from '../../components/form'
import { Table } from '../../components/table'
import { ActionNote, Async, Badge, Can, Page, Section } from '../../components/ui'
import { api } from '../../lib/api'
import { when } from '../../lib/format'
import { useAction, useApi } from '../../lib/hooks'
import { useCan } from '../../lib/session'
import { checkedObject } from './channels'

interface Template {
  id: string
  name: string
  title: string
  body: string
  level: string
  fields: Array<{ label: string; value: string }>
  sample_params: Record<string, unknown>
  updated_at: string
}
interface Rendered {
  title: string
  body: string
  level: string
  fields: Array<{ label: string; value: string }>
}

export const LEVELS = ['info', 'warning', 'error', 'critical', 'resolved']

function Editor({ t, onSaved }: { t?: Template; onSaved: (id: string) => void }): VNode {
  const [d, set] = useState({
    id: t?.id ?? '',
    name: t?.name ?? '',
    title: t?.title ?? '',
    body: t?.body ?? '',
    level: t?.level ?? 'info',
    sample: JSON.stringify(t?.sample_params ?? {}, null, 2),
  })
  const [bad, setBad] = useState<string>()
  const [preview, setPreview] = useState<Rendered>()
  const act = useAction()
  const pv = useAction()
  const can = useCan()
  const params = () => checkedObject(d.sample, 'The sample values', setBad)
  const save = () => {
    const sample_params = params()
    if (!sample_params) return
    const body = { name: d.name, title: d.title, body: d.body, level: d.level, sample_params }
    void act.run(async () => {
      const saved = t
        ? await api.v1<Template>('PUT', `/api/v1/templates/${encodeURIComponent(t.id)}`, {
            body: { ...body, id: t.id },
          })
        : await api.v1<Template>('POST', '/api/v1/templates/create', {
            body: { ...body, id: d.id || undefined },
          })
      onSaved(saved.id)
    }, 'Saved.')
  }
  const showPreview = () => {
    const p = params()
    if (!p || !t) return
    void pv.run(async () =>
      setPreview(
        await api.v1<Rendered>('POST', `/api/v1/templates/${encodeURIComponent(t.id)}/preview`, {
          body: { params: p },
        }),
      ),
    )
  }
  const field = (k: keyof typeof d) => (v: string) => set({ ...d, [k]: v })
  return html`<${Form} label=${t ? `Template ${t.id}` : 'New template'} onSubmit=${save}>
    <div class="grid2">
      ${!t && html`<${Input} label="Id" value=${d.id} onValue=${field('id')} hint="Optional: made from the name when empty." />`}
      <${Input} label="Name" value=${d.name} onValue=${field('name')} required disabled=${!can('notify:write')} />
      <${Input} label="Title" value=${d.title} onValue=${field('title')} required hint="Placeholders: {{.name}}" disabled=${!can('notify:write')} />
      <${Select} label="Level" value=${d.level} options=${LEVELS} onValue=${field('level')} disabled=${!can('notify:write')} />
    </div>
    <${TextArea} label="Body" value=${d.body} onValue=${field('body')} rows=${4} disabled=${!can('notify:write')} />
    <${TextArea} label="Sample values (JSON)" mono value=${d.sample} onValue=${field('sample')} rows=${4} error=${bad} hint="Used by the preview, and when a notification names the template without values." />
    <${ActionNote} action=${act} />
    <${ActionNote} action=${pv} />
    <div class="buttons">
      <${Can} perm="notify:write"><button type="submit" disabled=${act.busy}>${t ? 'Save template' : 'Create template'}</button><//>
      ${t && html`<button type="button" class="secondary" onClick=${showPreview} disabled=${pv.busy}>Preview</button>`}
    </div>
    ${
      preview &&
      html`<div class="preview" aria-live="polite">
        <h3>Preview</h3>
        <p><${Badge} value=${preview.level} /> <strong>${preview.title}</strong></p>
        <pre class="mono">${preview.body}</pre>
        ${preview.fields.length > 0 && html`<dl>${preview.fields.map((f) => html`<dt>${f.label}</dt><dd>${f.value}</dd>`)}</dl>`}
      </div>`
    }
  <//>`
}

/** `#/notify/templates`: templates, their editor and a preview with sample values. */
export function Templates(): VNode {
  const list = useApi(
    (signal) => api.v1<{ templates: Template[] }>('GET', '/api/v1/templates', { signal }),
    [],
  )
  const [open, setOpen] = useState<string>()
  const [adding, setAdding] = useState(false)
  const del = useAction()
  const chosen = list.data?.templates.find((t) => t.id === open)
  return html`<${Page}
    title="Templates"
    actions=${html`<${Can} perm="notify:write"><button type="button" onClick=${() => setAdding(true)} disabled=${adding}>New template</button><//>`}
  >
    ${
      adding &&
      html`<${Section} title="New template">
        <${Editor}
          onSaved=${(id: string) => {
            setAdding(false)
            setOpen(id)
            list.reload()
          }}
        />
      <//>`
    }
    <${Async}
      state=${list}
      what="templates"
      isEmpty=${(d: { templates: Template[] }) => d.templates.length === 0}
      empty=${html`<p>No template yet. A template gives notifications a title and body with <code>{{.placeholders}}</code>.</p>`}
      render=${(d: { templates: Template[] }) => html`<${Table}
        caption="Templates"
        hideCaption
        rows=${d.templates}
        rowKey=${(t: Template) => t.id}
        columns=${[
          { label: 'Id', value: (t: Template) => html`<code>${t.id}</code>` },
          { label: 'Name', value: (t: Template) => t.name },
          { label: 'Level', value: (t: Template) => html`<${Badge} value=${t.level} />` },
          { label: 'Title', value: (t: Template) => t.title },
          { label: 'Changed', value: (t: Template) => when(t.updated_at) },
          {
            label: 'Actions',
            value: (t: Template) => html`<div class="buttons">
              <button type="button" class="secondary small" onClick=${() => setOpen(open === t.id ? undefined : t.id)} aria-expanded=${open === t.id ? 'true' : 'false'}>
                ${open === t.id ? 'Close' : 'Open'}<span class="sr-only"> ${t.id}</span>
              </button>
              <${Can} perm="notify:write">
                <button type="button" class="danger small" disabled=${del.busy} onClick=${() => del.run(() => api.v1('DELETE', `/api/v1/templates/${encodeURIComponent(t.id)}`), 'Deleted.').then(list.reload)}>
                  Delete<span class="sr-only"> ${t.id}</span>
                </button>
              <//>
            </div>`,
          },
        ]}
      />`}
    />
    <${ActionNote} action=${del} />
    ${chosen && html`<${Section} title=${`Template ${chosen.id}`}><${Editor} key=${chosen.id + chosen.updated_at} t=${chosen} onSaved=${list.reload} /><//>`}
  <//>`
}
