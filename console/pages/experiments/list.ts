import { html } from 'htm/preact'
import type { VNode } from 'preact'
import { useState } from 'preact/hooks'
import { Form, Input, Select, TextArea } from '../../components/form'
import { Pager, Table } from '../../components/table'
import { ActionNote, Async, Badge, Can, Empty, Page, Section } from '../../components/ui'
import { api } from '../../lib/api'
import { when } from '../../lib/format'
import { useAction, useApi } from '../../lib/hooks'
import { href, navigate } from '../../lib/router'
import { useScope } from '../../lib/scope'
import type { Page as Paged } from '../../lib/types'
import { type Variant, VariantEditor, variantProblems } from './variants'

export interface Experiment {
  id: string
  gameId: string
  environment: string
  name: string
  description: string
  status: 'draft' | 'running' | 'paused'
  salt: string
  config: { variants: Variant[]; metrics?: { primary?: string; secondary?: string[] } }
  createdAt: string
  updatedAt: string
  publishedAt?: string
}

const SIZE = 20

function CreateExperiment({
  gameId,
  env,
  onDone,
}: { gameId: string; env: string; onDone: () => void }): VNode {
  const [name, setName] = useState('')
  const [description, setDescription] = useState('')
  const [variants, setVariants] = useState<Variant[]>([
    { name: 'control', weight: 50 },
    { name: 'treatment', weight: 50 },
  ])
  const [primary, setPrimary] = useState('')
  const [secondary, setSecondary] = useState('')
  const [tried, setTried] = useState(false)
  const act = useAction()
  const problems = variantProblems(variants)
  const submit = async () => {
    setTried(true)
    if (!name.trim() || problems.length) return
    let id: string | undefined
    const ok = await act.run(async () => {
      const e = await api.post<Experiment>('/api/experiments', {
        gameId,
        environment: env,
        name: name.trim(),
        description: description || undefined,
        config: {
          variants: variants.map((v) => ({ name: v.name.trim(), weight: v.weight })),
          metrics: primary.trim()
            ? {
                primary: primary.trim(),
                secondary: secondary
                  .split(',')
                  .map((s) => s.trim())
                  .filter(Boolean),
              }
            : undefined,
        },
      })
      id = e.id
    })
    if (ok && id) {
      onDone()
      navigate(`/experiments/${id}`)
    }
  }
  return html`<${Section} title=${`New experiment in ${env}`}>
    <${Form} label="New experiment" onSubmit=${submit}>
      <div class="grid2">
        <${Input} label="Name" value=${name} onValue=${setName} required error=${tried && !name.trim() ? 'A name is needed.' : undefined} />
        <${TextArea} label="Description" value=${description} onValue=${setDescription} rows=${2} />
        <${Input} label="Primary metric (event)" value=${primary} onValue=${setPrimary} placeholder="shop_purchase" hint="A player converts when they send this event after their exposure." />
        <${Input} label="Secondary metrics" value=${secondary} onValue=${setSecondary} hint="Comma-separated event names." />
      </div>
      <${VariantEditor} value=${variants} onChange=${setVariants} />
      <${ActionNote} action=${act} />
      <div class="buttons">
        <button type="submit" disabled=${act.busy}>Create as draft</button>
        <button type="button" class="secondary" onClick=${onDone}>Cancel</button>
      </div>
    <//>
  <//>`
}

/** `#/experiments`: the chosen game's experiments by status; a new one with its variants. */
export function Experiments({ query }: { query: URLSearchParams }): VNode {
  const s = useScope()
  const status = query.get('status') ?? ''
  const page = Number(query.get('page') ?? 0)
  const [creating, setCreating] = useState(false)
  const list = useApi(
    (signal) =>
      s.gameId
        ? api.get<Paged<Experiment>>(
            '/api/experiments',
            { gameId: s.gameId, environment: s.env, status, page, size: SIZE },
            signal,
          )
        : undefined,
    [s.gameId, s.env, status, page],
  )
  return html`<${Page}
    title="Experiments"
    actions=${s.gameId && html`<${Can} perm="experiments:write"><button type="button" onClick=${() => setCreating(true)} disabled=${creating}>New experiment</button><//>`}
  >
    ${s.games && !s.gameId && html`<${Empty}><p>Create a game first: experiments run in a game's environment.</p><//>`}
    ${creating && s.gameId && html`<${CreateExperiment} gameId=${s.gameId} env=${s.env} onDone=${() => setCreating(false)} />`}
    <div class="filters">
      <${Select}
        label="Status"
        value=${status}
        placeholder="Any status"
        options=${['draft', 'running', 'paused']}
        onValue=${(v: string) => navigate('/experiments', { status: v })}
      />
    </div>
    <${Async}
      state=${list}
      what="experiments"
      isEmpty=${(d: Paged<Experiment>) => d.items.length === 0}
      empty=${html`<p>No experiment${status ? ` is ${status}` : ''} in ${s.game?.name ?? 'this game'} / ${s.env}.</p>`}
      render=${(d: Paged<Experiment>) => html`<${Table}
          caption=${`Experiments in ${s.env} (${d.total})`}
          rows=${d.items}
          rowKey=${(e: Experiment) => e.id}
          columns=${[
            {
              label: 'Name',
              value: (e: Experiment) => html`<a href=${href(`/experiments/${e.id}`)}>${e.name}</a>`,
            },
            { label: 'Status', value: (e: Experiment) => html`<${Badge} value=${e.status} />` },
            {
              label: 'Variants',
              value: (e: Experiment) => e.config.variants.map((v) => `${v.name} ${v.weight}%`).join(', '),
            },
            { label: 'Primary metric', value: (e: Experiment) => e.config.metrics?.primary ?? '–' },
            { label: 'Updated', value: (e: Experiment) => when(e.updatedAt) },
          ]}
        />
        <${Pager} page=${page} pages=${Math.ceil(d.total / SIZE)} label="Pages of experiments" to=${(n: number) => href('/experiments', { status, page: String(n) })} />`}
    />
  <//>`
}
