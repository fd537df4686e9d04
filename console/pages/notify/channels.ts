import { html } from 'htm/preact'
import type { VNode } from 'preact'
import { useEffect, useState } from 'preact/hooks'
import { Form, Input, Select, TextArea } from '../../components/form'
import { Table } from '../../components/table'
import { ActionNote, Async, Badge, Can, Page, Section } from '../../components/ui'
import { api } from '../../lib/api'
import { when } from '../../lib/format'
import { useAction, useApi } from '../../lib/hooks'
import { href } from '../../lib/router'
import { useCan } from '../../lib/session'

interface Provider {
  name: string
  type: string
  status: string
  enabled: boolean
  since: string
}
interface ChannelConfig {
  name: string
  type: string
  enabled: boolean
  status: string
  source: string
  updated_at: string
  config: Record<string, unknown>
}

const enc = encodeURIComponent

/** A JSON object typed by the user, or the reason it is not one. */
export function parseObject(text: string, what: string): Record<string, unknown> {
  let v: unknown
  try {
    v = JSON.parse(text || '{}')
  } catch (e) {
    throw new Error(`${what} is not JSON: ${(e as Error).message}`)
  }
  if (!v || typeof v !== 'object' || Array.isArray(v)) throw new Error(`${what} must be a JSON object.`)
  return v as Record<string, unknown>
}

/** `parseObject`, with its reason handed to `show` (and cleared when the text is fine). */
export function checkedObject(text: string, what: string, show: (why: string | undefined) => void) {
  try {
    const v = parseObject(text, what)
    show(undefined)
    return v
  } catch (e) {
    show((e as Error).message)
    return undefined
  }
}

/**
 * One channel: its settings as the API shows them (secrets masked: "set" and the last four
 * characters; sent back unchanged they keep their value), a test send, enable and disable.
 */
function Channel({ name, onChanged }: { name: string; onChanged: () => void }): VNode {
  const state = useApi(
    (signal) => api.v1<ChannelConfig>('GET', `/api/v1/config/${enc(name)}`, { signal }),
    [name],
  )
  const [text, setText] = useState('')
  const [bad, setBad] = useState<string>()
  const save = useAction()
  const test = useAction()
  const toggle = useAction()
  const can = useCan()
  useEffect(() => {
    if (state.data) setText(JSON.stringify(state.data.config, null, 2))
  }, [state.data])
  const submit = () => {
    const config = checkedObject(text, 'The settings', setBad)
    if (!config) return
    void save.run(async () => {
      await api.v1('PUT', `/api/v1/config/${enc(name)}`, { body: { type: state.data?.type, config } })
      state.reload()
      onChanged()
    }, 'Saved: the channel was rebuilt and checked.')
  }
  const sendTest = () =>
    test.run(async () => {
      const r = await api.v1<{ accepted: string[]; failed?: Array<{ channel: string; error: string }> }>(
        'POST',
        '/api/v1/notify',
        {
          body: {
            type: 'console.test',
            level: 'info',
            channels: [name],
            title: 'Test from the liveops console',
            body: `A test message through ${name}.`,
          },
        },
      )
      if (r.failed?.length) throw new Error(r.failed.map((f) => `${f.channel}: ${f.error}`).join('; '))
    }, 'Test message queued: see the delivery logs.')
  return html`<${Async}
    state=${state}
    what=${`channel ${name}`}
    render=${(c: ChannelConfig) => html`
      <p>
        <${Badge} value=${c.status} /> ${c.enabled ? 'enabled' : html`<${Badge} value="disabled" tone="warn" />`} · type <code>${c.type}</code> ·
        settings from ${c.source}, changed ${when(c.updated_at)}
      </p>
      <${Can} perm="notify:write">
        <div class="buttons">
          <button type="button" onClick=${sendTest} disabled=${test.busy}>Send a test message</button>
          <button
            type="button"
            class="secondary"
            disabled=${toggle.busy}
            onClick=${() =>
              toggle.run(
                async () => {
                  await api.v1('POST', `/api/v1/providers/${enc(name)}/${c.enabled ? 'disable' : 'enable'}`)
                  state.reload()
                  onChanged()
                },
                c.enabled ? 'Disabled.' : 'Enabled.',
              )}
          >
            ${c.enabled ? 'Disable' : 'Enable'}
          </button>
          <a href=${href('/notify/logs', { provider: name })}>Deliveries of ${name}</a>
        </div>
        <${ActionNote} action=${test} />
        <${ActionNote} action=${toggle} />
      <//>
      <${Form} label=${`Settings of ${name}`} onSubmit=${submit}>
        <${TextArea}
          label="Settings (JSON)"
          mono
          rows=${8}
          value=${text}
          onValue=${setText}
          disabled=${!can('notify:write')}
          error=${bad}
          hint="Secrets read as set:xxxx; leave them so to keep them, or type a new value."
        />
        <${Can} perm="notify:write">
          <${ActionNote} action=${save} />
          <div><button type="submit" disabled=${save.busy}>Save settings</button></div>
        <//>
      <//>
    `}
  />`
}

function NewChannel({ onDone }: { onDone: (name: string) => void }): VNode {
  const [name, setName] = useState('')
  const [type, setType] = useState('webhook')
  const [text, setText] = useState('{\n  "url": "https://hooks.example.com/liveops"\n}')
  const [bad, setBad] = useState<string>()
  const act = useAction()
  const submit = () => {
    const config = checkedObject(text, 'The settings', setBad)
    if (!config) return
    if (!name.trim()) return setBad('A channel needs a name.')
    void act.run(async () => {
      await api.v1('PUT', `/api/v1/config/${enc(name.trim())}`, { body: { type, config } })
      onDone(name.trim())
    })
  }
  return html`<${Form} label="New channel" onSubmit=${submit}>
    <div class="grid3">
      <${Input} label="Name" value=${name} onValue=${setName} required />
      <${Select} label="Type" value=${type} options=${['webhook', 'smtp', 'log']} onValue=${setType} />
    </div>
    <${TextArea} label="Settings (JSON)" mono rows=${5} value=${text} onValue=${setText} error=${bad} />
    <${ActionNote} action=${act} />
    <div><button type="submit" disabled=${act.busy}>Create channel</button></div>
  <//>`
}

/** `#/notify/channels`: the notification channels, their masked settings and a test send. */
export function Channels({ query }: { query: URLSearchParams }): VNode {
  const list = useApi(
    (signal) => api.v1<{ providers: Provider[] }>('GET', '/api/v1/providers', { signal }),
    [],
  )
  const [open, setOpen] = useState<string | undefined>(query.get('name') ?? undefined)
  const [adding, setAdding] = useState(false)
  return html`<${Page}
    title="Channels"
    actions=${html`<${Can} perm="notify:write"><button type="button" onClick=${() => setAdding(true)} disabled=${adding}>New channel</button><//>`}
  >
    ${
      adding &&
      html`<${Section} title="New channel">
        <${NewChannel}
          onDone=${(n: string) => {
            setAdding(false)
            setOpen(n)
            list.reload()
          }}
        />
      <//>`
    }
    <${Async}
      state=${list}
      what="channels"
      isEmpty=${(d: { providers: Provider[] }) => d.providers.length === 0}
      empty=${html`<p>No channel is configured: add one here or under <code>plugins.notify.channels</code> in the YAML.</p>`}
      render=${(d: { providers: Provider[] }) => html`<${Table}
        caption="Channels"
        hideCaption
        rows=${d.providers}
        rowKey=${(p: Provider) => p.name}
        columns=${[
          { label: 'Name', value: (p: Provider) => html`<strong>${p.name}</strong>` },
          { label: 'Type', value: (p: Provider) => p.type },
          { label: 'Status', value: (p: Provider) => html`<${Badge} value=${p.status} />` },
          {
            label: 'Enabled',
            value: (p: Provider) => (p.enabled ? 'yes' : html`<${Badge} value="disabled" tone="warn" />`),
          },
          { label: 'Since', value: (p: Provider) => when(p.since) },
          {
            label: 'Details',
            value: (p: Provider) =>
              html`<button type="button" class="secondary small" aria-expanded=${open === p.name ? 'true' : 'false'} onClick=${() => setOpen(open === p.name ? undefined : p.name)}>
                ${open === p.name ? 'Close' : 'Open'}<span class="sr-only"> ${p.name}</span>
              </button>`,
          },
        ]}
      />`}
    />
    ${open && html`<${Section} title=${`Channel ${open}`}><${Channel} key=${open} name=${open} onChanged=${list.reload} /><//>`}
  <//>`
}
