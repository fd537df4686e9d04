import { html } from 'htm/preact'
import type { VNode } from 'preact'
import { useState } from 'preact/hooks'
import { Form, Input, Select } from '../../components/form'
import { Table } from '../../components/table'
import { ActionNote, Async, Badge, Can, Empty, Page, Section } from '../../components/ui'
import { api } from '../../lib/api'
import { when } from '../../lib/format'
import { useAction, useApi } from '../../lib/hooks'
import { href, navigate } from '../../lib/router'
import { useScope } from '../../lib/scope'
import type { Page as Paged } from '../../lib/types'

export interface Model {
  id: string
  gameId: string
  name: string
  type: string
  algorithm: string
  description: string
  status: string
  version: number
  trainedVersion?: number
  deployedVersion?: number
  canaryVersion?: number
  metrics?: Record<string, number>
  updatedAt: string
}

export const TYPES = ['CLASSIFICATION', 'REGRESSION', 'CLUSTERING', 'ANOMALY_DETECTION', 'TIME_SERIES']

function NewModel({ gameId, onDone }: { gameId: string; onDone: () => void }): VNode {
  const [name, setName] = useState('')
  const [type, setType] = useState('CLASSIFICATION')
  const act = useAction()
  const submit = async () => {
    let id: string | undefined
    if (!name.trim()) return
    const ok = await act.run(async () => {
      id = (await api.post<Model>('/api/ml-models', { gameId, name: name.trim(), type })).id
    })
    if (ok && id) {
      onDone()
      navigate(`/ml/${id}`)
    }
  }
  return html`<${Form} label="New model" class="inline" onSubmit=${submit}>
    <${Input} label="Name" value=${name} onValue=${setName} required />
    <${Select} label="Type" value=${type} options=${TYPES} onValue=${setType} />
    <button type="submit" disabled=${act.busy || !name.trim()}>Register model</button>
    <${ActionNote} action=${act} />
  <//>`
}

/** `#/ml`: the chosen game's models by status; register a new one. */
export function Models(): VNode {
  const s = useScope()
  const [adding, setAdding] = useState(false)
  const list = useApi(
    (signal) =>
      s.gameId ? api.get<Paged<Model>>('/api/ml-models', { gameId: s.gameId, size: 100 }, signal) : undefined,
    [s.gameId],
  )
  return html`<${Page}
    title="ML models"
    actions=${s.gameId && html`<${Can} perm="ml:write"><button type="button" onClick=${() => setAdding(true)} disabled=${adding}>New model</button><//>`}
  >
    ${s.games && !s.gameId && html`<${Empty}><p>Create a game first: models belong to a game.</p><//>`}
    ${
      adding &&
      s.gameId &&
      html`<${Section} title="New model">
        <${NewModel} gameId=${s.gameId} onDone=${() => setAdding(false)} />
      <//>`
    }
    <${Async}
      state=${list}
      what="models"
      isEmpty=${(d: Paged<Model>) => d.items.length === 0}
      empty=${html`<p>No model for ${s.game?.name ?? 'this game'} yet.</p>`}
      render=${(d: Paged<Model>) => html`<${Table}
        caption=${`Models of ${s.game?.name ?? 'the game'}`}
        rows=${d.items}
        rowKey=${(m: Model) => m.id}
        columns=${[
          { label: 'Name', value: (m: Model) => html`<a href=${href(`/ml/${m.id}`)}>${m.name}</a>` },
          { label: 'Status', value: (m: Model) => html`<${Badge} value=${m.status} />` },
          { label: 'Type', value: (m: Model) => m.type },
          { label: 'Algorithm', value: (m: Model) => m.algorithm },
          { label: 'Serving version', value: (m: Model) => m.deployedVersion ?? '–', numeric: true },
          { label: 'Changed', value: (m: Model) => when(m.updatedAt) },
        ]}
      />`}
    />
  <//>`
}
